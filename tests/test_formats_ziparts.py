"""Zip packages rewritten with only some parts changed (mtkit.formats.zipped.ziparts): every other entry's
local record and data come back byte for byte, each entry keeps its name, order, compression method,
timestamp, attributes, extra field and comment; what is no sound zip is refused in one line."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from mtkit.errors import DataError
from mtkit.formats.zipped.ziparts import Package, open_package


def archive() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.comment = b"the archive's comment"
        for name, method, body, stamp in (("a.xml", zipfile.ZIP_STORED, b"<a>stored</a>",
                                           (2001, 2, 3, 4, 5, 6)),
                                          ("b.xml", zipfile.ZIP_DEFLATED, b"<b>deflated</b>" * 50,
                                           (2010, 1, 1, 0, 0, 0)),
                                          ("c.bin", zipfile.ZIP_DEFLATED, bytes(range(256)) * 9,
                                           (2020, 12, 31, 23, 59, 58))):
            info = zipfile.ZipInfo(name, stamp)
            info.compress_type = method
            info.external_attr = 0o640 << 16
            info.comment = name.encode() + b" comment"
            info.extra = struct.pack("<HH4s", 0xCAFE, 4, b"xtra")
            z.writestr(info, body, compresslevel=1)  # not zlib's default: a recompressed entry would differ
    return buf.getvalue()


def described(data: bytes) -> list[tuple]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, i.compress_type, i.date_time, i.external_attr, i.comment, i.extra, i.flag_bits)
                for i in z.infolist()] + [z.comment]


def test_changed_parts_keep_their_method_and_every_other_entry_comes_back_byte_for_byte():
    data = archive()
    package = Package(data, "p.zip", "package")
    out = package.rewritten({"a.xml": b"<a>CHANGED and longer</a>", "b.xml": b"<b>NEW</b>"})
    assert described(out) == described(data)
    with zipfile.ZipFile(io.BytesIO(out)) as z:
        assert z.testzip() is None
        assert (z.read("a.xml"), z.read("b.xml")) == (b"<a>CHANGED and longer</a>", b"<b>NEW</b>")
    c = next(e for e in package.entries if e.name == "c.bin")
    assert data[c.start:c.end] in out  # its local header and compressed data, as they were
    assert package.rewritten({}) == data


def patched(data: bytes, name: bytes, offset: int, fmt: str, value: int | bytes) -> bytes:
    """``data`` with a field of ``name``'s central directory record set to ``value``."""
    out = bytearray(data)
    at = out.find(b"PK\x01\x02")
    while at >= 0:
        if out[at + 46:at + 46 + len(name)] == name:
            struct.pack_into(fmt, out, at + offset, value)
        at = out.find(b"PK\x01\x02", at + 4)
    return bytes(out)


@pytest.mark.parametrize(("make", "why"), [
    (lambda d: d[:len(d) // 2], "not a zip archive"),
    (lambda d: patched(d, b"b.xml", 8, "<H", 0x1), "b.xml is encrypted"),
    (lambda d: patched(d, b"b.xml", 46, "<5s", b"a.xml"), "two entries named a.xml"),
    (lambda d: patched(d, b"b.xml", 42, "<L", 0), "a.xml overlaps the next entry"),
    (lambda d: patched(d, b"c.bin", 24, "<L", 0xFFFFFF00), r"its entries unpack to \d+ bytes"),
])
def test_what_is_no_sound_zip_is_refused_in_one_line(make, why):
    with pytest.raises(DataError, match=f"^p.zip: not a readable package: (?:{why})"):
        open_package(make(archive()), "p.zip", "package", "a.xml")


def test_a_changed_part_that_does_not_unpack_to_its_size_is_refused():
    data = archive()
    package = Package(patched(data, b"b.xml", 16, "<L", 12345), "p.zip", "package")
    with pytest.raises(DataError, match="p.zip: not a readable package: b.xml"):
        package.read("b.xml")
