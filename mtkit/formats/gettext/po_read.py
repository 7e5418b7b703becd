"""Reading a gettext catalog (.po, .pot) as msgfmt reads it, keeping where every entry stands in the file.

A catalog is read from its bytes: a UTF-8 byte-order mark is noted, the text decoded in the charset its
header declares (``charset=CHARSET`` of a template, and a catalog without a header, are read as UTF-8),
and every line kept with its own line ending. Translating then rewrites only the lines of the entries it
fills (formats/gettext/po.py), so everything else comes back byte for byte; that needs each entry's
lines, which is why this reader is ours and not a general-purpose library's (polib, Babel's pofile)
that parse the strings but forget the lines and silently accept what msgfmt refuses.

Refused, in one line naming the file and line, as msgfmt refuses them: a line that is not blank, a
comment, a keyword with one quoted string or a quoted continuation; an unknown escape (``\\q``); a
``msgstr[n]`` without ``msgid_plural``, a ``msgstr`` with one, form indices out of order; an entry
without ``msgid`` or ``msgstr``; a second entry with the same ``msgctxt`` and ``msgid``; bytes that are
not text in the declared charset; a charset Python does not know.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

from mtkit.errors import DataError

_STRING = r'"(?:[^"\\]|\\.)*"'
_KEYWORD = r"msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?"
#: one line of an entry's fields: its prefix (obsolete ``#~``, previous ``#|``), keyword, string
_FIELD_LINE = re.compile(rf'^(#~\s*\|?\s*|#\|\s*)?(?:({_KEYWORD})\s+)?({_STRING})\s*$')
_ESCAPE = re.compile(r'\\(?:([ntrabfv\\"\'?])|([0-7]{1,3})|x([0-9A-Fa-f]+)|(.?))', re.S)
_UNESCAPE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\",
             '"': '"', "'": "'", "?": "?"}
_CHARSET = re.compile(rb'"Content-Type:[^"\n]*charset=([^"\\\s;]+)', re.I)
BOM = b"\xef\xbb\xbf"


@dataclass
class Entry:
    """One entry: its strings (unescaped) and where its lines stand (indices into ``Catalog.lines``)."""

    start: int  # its first line (a comment, or its first keyword)
    end: int  # one past its last line
    line: int  # the 1-based line of its msgid, for messages
    obsolete: bool = False
    flags: list[str] = field(default_factory=list)
    msgctxt: str | None = None
    msgid: str = ""
    msgid_plural: str | None = None
    msgstr: str = ""
    msgstr_plural: dict[int, str] = field(default_factory=dict)
    msgstr_lines: tuple[int, int] = (0, 0)  # [first, end) of its msgstr / msgstr[n] lines
    flag_line: int | None = None  # its first "#," line

    @property
    def is_header(self) -> bool:
        return not self.obsolete and self.msgid == "" and self.msgctxt is None

    @property
    def translated(self) -> bool:
        return bool(self.msgstr or any(self.msgstr_plural.values()))


@dataclass
class Catalog:
    """A catalog's lines (each with its own line ending), entries, and how its bytes were encoded."""

    lines: list[str]
    entries: list[Entry]
    charset: str  # the codec its text was decoded with (and is written in)
    declared: str  # the charset its header names ("" where it names none, "CHARSET" in a template)
    bom: bool = False

    @property
    def header(self) -> Entry | None:
        return next((e for e in self.entries if e.is_header), None)

    def metadata(self) -> dict[str, str]:
        """The header's fields ("Language" → "de"), empty where there is no header."""
        header = self.header
        out: dict[str, str] = {}
        for line in (header.msgstr if header else "").split("\n"):
            key, sep, value = line.partition(":")
            if sep and key.strip():
                out[key.strip()] = value.strip()
        return out

    @property
    def newline(self) -> str:
        """The line ending new lines get: the file's first line's."""
        first = self.lines[0] if self.lines else "\n"
        return "\r\n" if first.endswith("\r\n") else "\n"


def unescape(quoted: str, name: str, number: int) -> str:
    """A PO string literal's contents, its escapes resolved; an escape msgfmt refuses, refused."""
    def one(m: re.Match[str]) -> str:
        if m[1] is not None:
            return _UNESCAPE[m[1]]
        if m[2] is not None:
            return chr(int(m[2], 8))
        if m[3] is not None:
            return chr(int(m[3], 16))
        raise DataError(f"{name}:{number}: invalid escape sequence \\{m[4]} (gettext knows \\n \\t \\r \\a "
                        "\\b \\f \\v \\\\ \\\" \\' \\? and octal or \\x hex codes)")
    return _ESCAPE.sub(one, quoted[1:-1])


def decode(data: bytes, name: str) -> tuple[str, str, str, bool]:
    """The catalog's text, the codec it was decoded with, the charset its header declares, and
    whether it began with a UTF-8 byte-order mark."""
    bom = data.startswith(BOM)
    body = data[len(BOM):] if bom else data
    found = _CHARSET.search(body)
    declared = found[1].decode("ascii", "replace") if found else ""
    codec = "utf-8" if bom or declared.upper() in ("", "CHARSET") else declared
    try:
        codec = codecs.lookup(codec).name
    except LookupError:
        raise DataError(f"{name}: the header declares charset={declared}, which mtkit cannot read "
                        "(convert the catalog: msgconv -t UTF-8)") from None
    try:
        return body.decode(codec), codec, declared, bom
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{name}:{line}: not {declared or 'UTF-8'} text (byte {exc.start + 1}); the header "
                        "must name the charset the file is written in") from None


def read(data: bytes, name: str) -> Catalog:
    """The catalog in ``data`` (the bytes of ``name``), checked (see the module docstring)."""
    text, codec, declared, bom = decode(data, name)
    lines = text.splitlines(keepends=True)
    entries = _entries(lines, name)
    seen: dict[tuple[str | None, str], int] = {}
    for entry in entries:
        if entry.obsolete:
            continue
        key = (entry.msgctxt, entry.msgid)
        if key in seen:
            raise DataError(f"{name}:{entry.line}: duplicate message definition: msgid {entry.msgid[:40]!r} "
                            f"is already defined at line {seen[key]}")
        seen[key] = entry.line
    return Catalog(lines, entries, codec, declared, bom)


class _Builder:
    """The entry being read: its fields in order, each (keyword, [string, …], first line, last line)."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.fields: list[list] = []
        self.flags: list[str] = []
        self.flag_line: int | None = None
        self.obsolete = False


def _entries(lines: list[str], name: str) -> list[Entry]:
    entries: list[Entry] = []
    current: _Builder | None = None
    last_kind = ""  # what the previous non-blank line was: "comment", "field", "previous"

    def close(end: int) -> None:
        nonlocal current
        if current is not None and current.fields:  # comments alone make no entry
            entries.append(_finish(current, end, name))
        current = None

    def comment(i: int) -> _Builder:
        """The entry a comment line at ``i`` belongs to: a new one after an entry's keywords."""
        nonlocal current
        if current is not None and current.fields:
            close(i)
        if current is None:
            current = _Builder(i)
        return current

    for i, raw in enumerate(lines):
        number = i + 1
        line = raw.strip()
        if not line:
            close(i)
            last_kind = ""
            continue
        if line.startswith("#") and not line.startswith(("#~", "#|")):
            current = comment(i)
            if line.startswith("#,"):
                if current.flag_line is None:
                    current.flag_line = i
                current.flags += [f.strip() for f in line[2:].split(",") if f.strip()]
            last_kind = "comment"
            continue
        if line.startswith("#~") and not re.match(r"#~\s*\|?\s*(?:msg|\")", line):
            last_kind = "comment"  # an obsolete entry's comment
            current = comment(i)
            continue
        match = _FIELD_LINE.match(line)
        if not match:
            raise DataError(f"{name}:{number}: not a gettext line (a keyword and one quoted string, or a "
                            f"quoted continuation): {line[:60]!r}")
        prefix, keyword, quoted = match[1] or "", match[2], match[3]
        value = unescape(quoted, name, number)
        previous = "|" in prefix
        obsolete = prefix.startswith("#~")
        if previous:  # "#| msgid …": the previous msgid, part of the entry's comments
            current = comment(i)
            last_kind = "previous"
            continue
        if keyword is None:  # a continuation
            if last_kind == "previous":
                continue
            if current is None or not current.fields or last_kind != "field":
                raise DataError(f"{name}:{number}: a quoted string that continues no keyword")
            current.fields[-1][1].append(value)
            current.fields[-1][3] = i
            continue
        starts_entry = keyword == "msgctxt" or (keyword == "msgid" and not (
            current is not None and current.fields and current.fields[-1][0] == "msgctxt"))
        if current is not None and current.fields and starts_entry:
            close(i)
        if current is None:
            current = _Builder(i)
        if current.fields and current.obsolete != obsolete:
            raise DataError(f"{name}:{number}: an entry cannot mix obsolete (#~) and active lines")
        current.obsolete = obsolete
        current.fields.append([keyword, [value], i, i])
        last_kind = "field"
    close(len(lines))
    return entries


def _finish(b: _Builder, end: int, name: str) -> Entry:
    """The entry ``b`` read, checked as msgfmt checks an entry's keywords."""
    first = b.fields[0][2] + 1
    order = [f[0] for f in b.fields]
    if "msgid" not in order:
        raise DataError(f"{name}:{first}: an entry without msgid")
    if order.count("msgid") > 1 or order.count("msgctxt") > 1 or order.count("msgid_plural") > 1:
        raise DataError(f"{name}:{first}: an entry with a keyword twice (a missing msgstr between entries?)")
    msgid_at = order.index("msgid")
    entry = Entry(start=b.start, end=end, line=b.fields[msgid_at][2] + 1, obsolete=b.obsolete,
                  flags=b.flags, flag_line=b.flag_line)
    strings = {f[0]: "".join(f[1]) for f in b.fields}
    entry.msgctxt = strings.get("msgctxt")
    entry.msgid = strings["msgid"]
    entry.msgid_plural = strings.get("msgid_plural")
    forms = [f for f in b.fields if f[0].startswith("msgstr[")]
    plain = [f for f in b.fields if f[0] == "msgstr"]
    if "msgctxt" in order and order.index("msgctxt") > msgid_at:
        raise DataError(f"{name}:{b.fields[order.index('msgctxt')][2] + 1}: msgctxt must come before msgid")
    if entry.msgid_plural is None:
        if forms:
            raise DataError(f"{name}:{forms[0][2] + 1}: {forms[0][0]} in an entry without msgid_plural "
                            "(a plural form needs a plural msgid)")
        if not plain:
            raise DataError(f"{name}:{entry.line}: an entry without msgstr")
        entry.msgstr = strings["msgstr"]
        chosen = plain
    else:
        if plain:
            raise DataError(f"{name}:{plain[0][2] + 1}: msgstr in an entry with msgid_plural "
                            "(write msgstr[0], msgstr[1], …)")
        if not forms:
            raise DataError(f"{name}:{entry.line}: an entry with msgid_plural but no msgstr[0]")
        for n, f in enumerate(forms):
            if int(f[0][7:-1]) != n:
                raise DataError(f"{name}:{f[2] + 1}: {f[0]} out of order (expected msgstr[{n}])")
            entry.msgstr_plural[n] = "".join(f[1])
        chosen = forms
    if any(f is not g for f, g in zip(b.fields[-len(chosen):], chosen, strict=True)):
        raise DataError(f"{name}:{chosen[0][2] + 1}: msgstr must come after msgctxt, msgid and msgid_plural")
    entry.msgstr_lines = (chosen[0][2], chosen[-1][3] + 1)
    return entry
