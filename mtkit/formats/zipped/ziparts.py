"""Zip packages (Office Open XML, OpenDocument, EPUB) read and written again with only some parts
changed: every other entry comes back byte for byte, its local header, compressed data and central
directory record as they were (name, order, compression method, timestamps, attributes, extra fields),
only moved to its new offset.

A library that rewrites the archive (zipfile, python-docx, odfpy) recompresses every entry and drops
what it does not know; here the archive's own records are copied, and a changed part is written with
its original compression method (stored or deflated) in place of its old data.

Refused, in one line naming the file: what is not a zip archive, an encrypted entry, a zip64 or
split archive, a part that does not decompress to its recorded size and checksum, entries that
overlap or whose recorded sizes add up to more than ``MAX_UNPACKED`` (a zip bomb), two entries of
one name, and a package without the part that makes it the format named.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from dataclasses import dataclass

from mtkit.errors import DataError

#: the most a package's entries may hold unpacked, all together (a document far beyond any real one)
MAX_UNPACKED = 2 << 30
#: the most one part that is read may hold unpacked
MAX_PART = 512 << 20
_LOCAL = struct.Struct("<4s5H3L2H")
_CENTRAL = struct.Struct("<4s6H3L5H2L")
_END = struct.Struct("<4s4H2LH")
_LOCAL_SIG, _CENTRAL_SIG, _END_SIG = b"PK\x03\x04", b"PK\x01\x02", b"PK\x05\x06"
_STORED, _DEFLATED = 0, 8


@dataclass
class Entry:
    """One entry of the archive: its name, its central directory record (the fixed part, name, extra
    and comment as written) and the span of its local header and data in the archive."""

    name: str
    record: bytes
    start: int
    end: int
    method: int
    flags: int


class Package:
    """A zip archive's entries, read from its own central directory (see the module docstring)."""

    def __init__(self, data: bytes, name: str, what: str) -> None:
        self.data, self.name, self.what = data, name, what
        self._zip = self._open()
        self.entries = self._read_directory()
        self.names = [e.name for e in self.entries]

    def _error(self, why: str) -> DataError:
        return DataError(f"{self.name}: not a readable {self.what}: {why}")

    def _open(self) -> zipfile.ZipFile:
        try:
            archive = zipfile.ZipFile(io.BytesIO(self.data))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError) as exc:
            raise self._error(f"not a zip archive ({exc})") from None
        return archive

    def _read_directory(self) -> list[Entry]:
        data = self.data
        end_at = data.rfind(_END_SIG, max(0, len(data) - 65557))
        if end_at < 0 or len(data) - end_at < _END.size:
            raise self._error("no end of central directory")
        _, disk, cd_disk, count_here, count, cd_size, cd_offset, _ = _END.unpack_from(data, end_at)
        if disk or cd_disk or count_here != count or 0xFFFF in (count,) or 0xFFFFFFFF in (cd_size, cd_offset):
            raise self._error("a split or zip64 archive")
        if cd_offset + cd_size != end_at:
            raise self._error("data before the first entry or inside the central directory")
        entries, at, seen = [], cd_offset, set()
        for _ in range(count):
            if data[at:at + 4] != _CENTRAL_SIG:
                raise self._error("a broken central directory")
            fields = _CENTRAL.unpack_from(data, at)
            flags, method, csize, usize = fields[3], fields[4], fields[8], fields[9]
            name_len, extra_len, comment_len, offset = fields[10], fields[11], fields[12], fields[16]
            record = data[at:at + _CENTRAL.size + name_len + extra_len + comment_len]
            raw_name = record[_CENTRAL.size:_CENTRAL.size + name_len]
            name = raw_name.decode("utf-8" if flags & 0x800 else "cp437")
            if flags & 0x1:
                raise self._error(f"{name} is encrypted")
            if 0xFFFFFFFF in (csize, usize, offset):
                raise self._error("a zip64 archive")
            if name in seen:
                raise self._error(f"two entries named {name}")
            seen.add(name)
            entries.append(Entry(name, record, offset, 0, method, flags))
            at += len(record)
        total = sum(info.file_size for info in self._zip.infolist())
        if total > MAX_UNPACKED:
            raise self._error(f"its entries unpack to {total} bytes (more than {MAX_UNPACKED})")
        ordered = sorted(entries, key=lambda e: e.start)
        for n, entry in enumerate(ordered):
            entry.end = ordered[n + 1].start if n + 1 < len(ordered) else cd_offset
            if data[entry.start:entry.start + 4] != _LOCAL_SIG:
                raise self._error(f"no local header for {entry.name}")
            local = _LOCAL.unpack_from(data, entry.start)
            csize = struct.unpack_from("<L", entry.record, 20)[0]
            if entry.start + _LOCAL.size + local[9] + local[10] + csize > entry.end:
                raise self._error(f"{entry.name} overlaps the next entry")
        if ordered and ordered[0].start != 0:
            raise self._error("data before the first entry")
        return entries

    def read(self, part: str) -> bytes:
        """The unpacked bytes of ``part`` (checked against its recorded size and CRC)."""
        info = self._zip.getinfo(part)
        if info.file_size > MAX_PART:
            raise self._error(f"{part} unpacks to {info.file_size} bytes (more than {MAX_PART})")
        try:
            with self._zip.open(info) as stream:
                out = stream.read(info.file_size + 1)
        except (zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError, RuntimeError) as exc:
            raise self._error(f"{part}: {exc}") from None
        if len(out) != info.file_size:
            raise self._error(f"{part} does not unpack to its recorded size")
        return out

    def text(self, part: str) -> str:
        """``part`` as UTF-8 text (what the package formats require of their XML)."""
        raw = self.read(part)
        try:
            return raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise self._error(f"{part} is not UTF-8 (byte {exc.start})") from None

    def rewritten(self, changed: dict[str, bytes], first_stored: str | None = None) -> bytes:
        """The archive with the parts in ``changed`` replaced, each in its own compression method, and
        every other entry byte for byte; ``first_stored``: an entry written first and uncompressed
        (EPUB's ``mimetype``), rewritten only where the input had it otherwise."""
        order, listed = sorted(self.entries, key=lambda e: e.start), self.entries
        if first_stored is not None:
            head = next(e for e in order if e.name == first_stored)
            if order[0] is not head or listed[0] is not head or head.method != _STORED:
                order = [head] + [e for e in order if e is not head]
                listed = [head] + [e for e in listed if e is not head]
                changed = {**changed, first_stored: changed.get(first_stored, self.read(first_stored))}
        body, offsets, new_fields = io.BytesIO(), {}, {}
        for entry in order:
            offsets[entry.name] = body.tell()
            if entry.name in changed:
                method = _STORED if entry.name == first_stored else entry.method
                local, new_fields[entry.name] = self._local(entry, changed[entry.name], method)
                body.write(local)
            else:
                body.write(self.data[entry.start:entry.end])
        directory = io.BytesIO()
        for entry in listed:
            directory.write(_central(entry, offsets[entry.name], new_fields.get(entry.name)))
        end_record = bytearray(self.data[self.data.rfind(_END_SIG):])
        struct.pack_into("<2L", end_record, 12, directory.tell(), body.tell())
        return body.getvalue() + directory.getvalue() + bytes(end_record)

    def _local(self, entry: Entry, content: bytes, method: int) -> tuple[bytes, tuple[int, ...]]:
        """A local header and data for ``content``, in ``method`` (no data descriptor), and the fields
        its central record takes from it (flags, method, CRC, sizes)."""
        if method == _STORED:
            packed = content
        elif method == _DEFLATED:
            packer = zlib.compressobj(6, zlib.DEFLATED, -15)
            packed = packer.compress(content) + packer.flush()
        else:
            raise self._error(f"{entry.name} is compressed with method {method} (only stored and "
                              "deflated parts can be rewritten)")
        local = list(_LOCAL.unpack_from(self.data, entry.start))
        name_end = entry.start + _LOCAL.size + local[9]
        name, extra = self.data[entry.start + _LOCAL.size:name_end], self.data[name_end:name_end + local[10]]
        local[2] &= ~0x8
        local[3] = method
        local[6:9] = zlib.crc32(content), len(packed), len(content)
        return _LOCAL.pack(*local) + name + extra + packed, (local[2], method, *local[6:9])


def _central(entry: Entry, offset: int, new_fields: tuple[int, ...] | None) -> bytes:
    """The central directory record of ``entry`` at ``offset``, with the flags, method, CRC and sizes
    of its new data where it was rewritten."""
    record = bytearray(entry.record)
    if new_fields is not None:
        struct.pack_into("<2H", record, 8, *new_fields[:2])
        struct.pack_into("<3L", record, 16, *new_fields[2:])
    struct.pack_into("<L", record, 42, offset)
    return bytes(record)


def open_package(data: bytes, name: str, what: str, required: str) -> Package:
    """``data`` as a package of the format ``what`` (e.g. "Word document (.docx)"); refused where it is
    no zip, or lacks ``required``, naming what it is where that can be told."""
    if not data.startswith(_LOCAL_SIG):
        start = data[:64].lstrip()
        kind = ("an XML or HTML file" if start.startswith(b"<") else "a PDF" if start.startswith(b"%PDF")
                else "an OLE2 (old Office binary) file" if start.startswith(b"\xd0\xcf\x11\xe0")
                else "no zip archive")
        raise DataError(f"{name}: not {_article(what)} {what}: it is {kind}")
    package = Package(data, name, what)
    if required not in package.names:
        found = package_kind(package)
        raise DataError(f"{name}: not {_article(what)} {what}: it has no {required}"
                        + (f" (it is {found})" if found else ""))
    return package


def _article(what: str) -> str:
    return "an" if what[:1] in "AEIOU" else "a"


def package_kind(package: Package) -> str:
    """What a zip is where it says so itself (its ``mimetype`` entry, or an Office content-types
    part), '' where it does not."""
    if "mimetype" in package.names:
        return package.read("mimetype")[:100].decode("ascii", "replace").strip()
    if "[Content_Types].xml" in package.names:
        for kind in ("wordprocessingml", "presentationml", "spreadsheetml"):
            if kind.encode() in package.read("[Content_Types].xml"):
                return f"an Office Open XML {kind} package"
    return ""
