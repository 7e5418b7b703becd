"""gettext catalogs (.po, .pot): the untranslated entries translated, everything else kept.

polib reads the catalog. A line-level check runs first, because polib skips some malformed lines
silently (an unterminated or unquoted string): every line must be blank, a comment, a keyword with
one quoted string, or a quoted continuation, and no two entries may share msgctxt and msgid (msgfmt
refuses that). A malformed catalog is refused in one line naming the file and line.

What is translated: each entry with no translation (an empty ``msgstr``, or every ``msgstr[n]``
empty), or every active entry with ``retranslate``; never the header or an obsolete (``#~``) entry.
A plural entry gets every ``msgstr[n]`` the target language's ``Plural-Forms`` has: form 0 the
singular's translation (but in a language of one form), the others the plural's. A catalog without
a usable ``Plural-Forms`` (a .pot's ``nplurals=INTEGER``) gets the language's from ``PLURAL_FORMS``,
its ``Language`` and a UTF-8 charset where they are unset. Machine translations are flagged
``fuzzy`` (translators review them; gettext leaves them out of the .mo until they do) unless
``fuzzy=False``. An entry whose translation would break a placeholder stays untranslated and is
reported (formats/placeholders.py).

Writing changes only what was translated: every other entry keeps its bytes, header, comments,
references, flags, msgctxt, previous msgids, obsolete entries and order included; a changed entry
(and a changed header) is written as polib writes it. Translating a complete catalog again changes
nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mtkit.errors import DataError
from mtkit.formats.placeholders import Outcome

if TYPE_CHECKING:  # polib is imported where a catalog is read, so plain-text translation never needs it
    import polib

#: gettext's Plural-Forms by language (the GNU gettext manual's table), for catalogs that lack one
PLURAL_FORMS = {
    **{lang: "nplurals=1; plural=0;" for lang in ("ja", "ko", "zh", "vi", "th", "id", "ms", "lo", "km")},
    **{lang: "nplurals=2; plural=(n != 1);" for lang in (
        "en", "de", "nl", "sv", "da", "nb", "nn", "no", "fi", "et", "it", "es", "pt", "el", "hu", "bg",
        "ca", "eu", "gl", "eo", "he", "tr", "af", "sq", "hi", "bn", "fa", "ur", "sw", "fy", "lb", "is",
        "ta", "te", "ml", "kn", "mr", "gu", "pa", "ne", "si", "az", "ka", "kk", "ky", "mn", "uz", "tk")},
    **{lang: "nplurals=2; plural=(n > 1);" for lang in ("fr", "pt_BR", "oc", "br", "ln", "ti", "wa")},
    **{lang: ("nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && "
              "(n%100<10 || n%100>=20) ? 1 : 2);") for lang in ("ru", "uk", "be", "sr", "hr", "bs")},
    "pl": "nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "cs": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "sk": "nplurals=3; plural=(n==1) ? 0 : (n>=2 && n<=4) ? 1 : 2;",
    "ro": "nplurals=3; plural=(n==1 ? 0 : (n==0 || (n%100 > 0 && n%100 < 20)) ? 1 : 2);",
    "lt": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && (n%100<10 || n%100>=20) ? 1 : 2);",
    "lv": "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n != 0 ? 1 : 2);",
    "sl": "nplurals=4; plural=(n%100==1 ? 0 : n%100==2 ? 1 : n%100==3 || n%100==4 ? 2 : 3);",
}

_STRING = r'"(?:[^"\\]|\\.)*"'
_KEYWORD = r"(?:msgctxt|msgid|msgid_plural|msgstr(?:\[\d+\])?)"
_LINE_OK = re.compile(rf'^(?:#~\|?\s*)?(?:{_KEYWORD}\s+)?{_STRING}\s*$')
#: strings in, one Outcome each out (formats.placeholders.translate_strings, bound to a translator)
StringsFn = Callable[[list[str]], list[Outcome]]


@dataclass
class CatalogReport:
    """What translating a catalog did: counts, and each entry left untranslated with where and why."""

    entries: int = 0  # active entries, the header left out
    translated: int = 0
    already: int = 0  # had a translation and kept it
    left: list[str] = field(default_factory=list)  # "file:line: why"
    changed: list[polib.POEntry] = field(default_factory=list)  # the entries given a translation
    header_changed: bool = False  # Language, Plural-Forms or the charset set where they were unset


def check_lines(text: str, name: str) -> None:
    """Refuse what polib would skip: see the module docstring."""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not stripped.startswith("#~")):
            continue
        if stripped.startswith("#~") and not re.match(r"#~\|?\s*(?:msg|\")", stripped):
            continue  # an obsolete entry's comment
        if not _LINE_OK.match(stripped):
            raise DataError(f"{name}:{number}: not a gettext line (a keyword and one quoted string, "
                            f"or a quoted continuation): {stripped[:60]!r}")


def read_catalog(text: str, name: str) -> polib.POFile:
    """The catalog in ``text`` (the contents of ``name``), checked (see the module docstring)."""
    check_lines(text, name)
    try:
        import polib
    except ImportError:
        raise DataError(f"{name}: reading gettext catalogs needs polib (a dependency of mtkit): "
                        "pip install polib") from None
    try:
        catalog = polib.pofile(text, wrapwidth=79)
    except (OSError, ValueError) as exc:  # polib: "Syntax error in po file (line N)"
        found = re.search(r"line (\d+)", str(exc))
        raise DataError(f"{name}:{found[1] if found else '?'}: not a valid gettext catalog ({exc})") from None
    seen: dict[tuple[str | None, str], int] = {}
    for entry in catalog:
        entry.linenum = max(entry.linenum, 1)  # polib says 0 for an entry on the first line
        key = (entry.msgctxt, entry.msgid)
        if key in seen:
            raise DataError(f"{name}:{entry.linenum}: msgid {entry.msgid[:40]!r} is already defined at line "
                            f"{seen[key]}")
        seen[key] = entry.linenum
    return catalog


def _needs_translation(entry: polib.POEntry, retranslate: bool) -> bool:
    if entry.obsolete or entry.msgid == "":
        return False
    if retranslate:
        return True
    return not (entry.msgstr or any(entry.msgstr_plural.values()))


def _plural_count(catalog: polib.POFile, name: str, tgt_lang: str) -> int:
    """How many plural forms the target language has; sets the header where it lacks them."""
    forms = catalog.metadata.get("Plural-Forms", "")
    match = re.search(r"nplurals\s*=\s*(\d+)", forms)
    if match:
        return int(match[1])
    known = PLURAL_FORMS.get(tgt_lang) or PLURAL_FORMS.get(tgt_lang.split("_")[0])
    if known is None:
        if any(e.msgid_plural for e in catalog if not e.obsolete):
            raise DataError(f"{name}: the catalog has plural entries but no Plural-Forms header, and mtkit "
                            f"knows no plural forms for {tgt_lang!r}: add the header for the language")
        return 2
    catalog.metadata["Plural-Forms"] = known
    return int(re.search(r"nplurals=(\d+)", known)[1])  # type: ignore[index]


def _complete_header(catalog: polib.POFile, tgt_lang: str) -> None:
    """A header as a .pot leaves it (charset=CHARSET, Language empty) made usable for the language."""
    if not catalog.metadata.get("Language", "").strip():
        catalog.metadata["Language"] = tgt_lang
    content = catalog.metadata.get("Content-Type", "")
    if "charset=CHARSET" in content or not content:
        catalog.metadata["Content-Type"] = "text/plain; charset=UTF-8"


def translate_catalog(catalog: polib.POFile, name: str, translate: StringsFn, tgt_lang: str,
                      retranslate: bool = False, fuzzy: bool = True) -> CatalogReport:
    """Translate the entries that need it (see the module docstring), in place; what was done."""
    active = [e for e in catalog if not e.obsolete and e.msgid != ""]
    todo = [e for e in active if _needs_translation(e, retranslate)]
    report = CatalogReport(entries=len(active), already=len(active) - len(todo))
    if not todo:
        return report
    header_before = dict(catalog.metadata)
    nplurals = _plural_count(catalog, name, tgt_lang)
    _complete_header(catalog, tgt_lang)
    report.header_changed = catalog.metadata != header_before
    sources = [s for e in todo for s in ([e.msgid, e.msgid_plural] if e.msgid_plural else [e.msgid])]
    outcomes = iter(translate(sources))
    for entry in todo:
        got = [next(outcomes) for _ in range(2 if entry.msgid_plural else 1)]
        broken = [o for o in got if o.text is None]
        if broken:
            report.left.append(f"{name}:{entry.linenum}: left untranslated: {broken[0].problem}")
            continue
        if entry.msgid_plural:
            singular, plural = got[0].text, got[1].text
            entry.msgstr_plural = {n: (singular if n == 0 and nplurals > 1 else plural)
                                   for n in range(nplurals)}
        else:
            entry.msgstr = got[0].text
        if fuzzy and "fuzzy" not in entry.flags:
            entry.flags.append("fuzzy")
        report.changed.append(entry)
        report.translated += 1
    return report


def write_catalog(catalog: polib.POFile, original: str, report: CatalogReport) -> str:
    """The catalog as text: ``original`` with only the entries (and header) ``report`` says changed
    rewritten, where its entries are blocks apart by blank lines, one entry each; else as polib writes
    it all."""
    changed, header_changed = report.changed, report.header_changed
    if not changed and not header_changed:
        return original
    lines = original.splitlines(keepends=True)
    blocks: list[tuple[int, int]] = []  # [start, end) line indices of each run of non-blank lines
    start = None
    for i, line in enumerate([*lines, "\n"]):
        if line.strip() and start is None:
            start = i
        elif not line.strip() and start is not None:
            blocks.append((start, i))
            start = None
    block_of = {}
    for n, (a, b) in enumerate(blocks):
        for i in range(a, b):
            block_of[i + 1] = n
    keyword = re.compile(r"^(?:#~\s*)?msgid\s")
    replacements: dict[int, str] = {}
    for entry in changed:
        n = block_of.get(entry.linenum)
        if n is None or sum(bool(keyword.match(lines[i])) for i in range(*blocks[n])) != 1:
            return _with_newline(str(catalog))
        replacements[n] = str(entry)
    if header_changed:
        first = next((n for n, (a, b) in enumerate(blocks)
                      if any(re.match(r'^msgid\s+""\s*$', lines[i]) for i in range(a, b))), None)
        if first is None or first in replacements:
            return _with_newline(str(catalog))
        replacements[first] = _header_text(catalog, lines[blocks[first][0]:blocks[first][1]])
    out, previous = [], 0
    for n, (a, b) in enumerate(blocks):
        if n in replacements:
            out += lines[previous:a]
            out.append(_with_newline(replacements[n]))
            previous = b
    out += lines[previous:]
    return "".join(out)


def _header_text(catalog: polib.POFile, block: list[str]) -> str:
    """The header entry rewritten with the new metadata, its comments and flags as they were."""
    comments = "".join(line for line in block if line.startswith("#"))
    entry = catalog.metadata_as_entry()
    entry.flags = []
    return comments + str(entry)


def _with_newline(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"
