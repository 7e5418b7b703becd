"""gettext catalogs (.po, .pot): the untranslated entries translated, every other byte kept.

Bytes in, bytes out. The catalog is read from its bytes (formats/gettext/po_read.py: its charset, BOM and each
line's own line ending kept; what msgfmt refuses, refused with its line), and written by splicing: an
entry given a translation gets new ``msgstr`` lines (wrapped as gettext wraps them, in the file's line
ending) and ``fuzzy`` among its flags; its comments, references, ``#|`` lines, msgctxt and msgid lines
stay byte for byte, and so does every other entry, blank line or its absence, obsolete entry and the
order. Translating a complete catalog again changes nothing.

What is translated: each entry with no translation (an empty ``msgstr``, or every ``msgstr[n]`` empty),
or every active entry with ``retranslate``; never the header or an obsolete (``#~``) entry. Each
entry's strings are checked by the placeholders of the syntax its format flag names (``c-format``,
``qt-format``, ``python-brace-format`` …: placeholders/strings.py ``syntax_for``); an entry whose
translation would break one stays untranslated and is reported. Plural entries get every ``msgstr[n]``
of the catalog's ``Plural-Forms`` (or, where it has none, the target language's rule from Babel), each
from the msgid that covers the numbers of that form (formats/gettext/plurals.py). A translation that the
catalog's charset cannot hold (Cyrillic in an ISO-8859-1 catalog) leaves its entry untranslated,
reported, rather than writing text in another charset than the header declares.

The header: completed only where it has template values (an empty ``Language``, ``charset=CHARSET``,
``nplurals=INTEGER``) or lacks ``Plural-Forms`` while holding plural entries, line by line in place; a
catalog without a header gets one at its top when anything is translated (the charset its text is in,
the language, the plural rule). A header whose ``Language`` is another language than the target is
warned about. Machine translations are flagged ``fuzzy`` (translators review them; gettext leaves them
out of the .mo until they do) unless ``fuzzy=False``.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from mtkit.errors import DataError
from mtkit.formats.gettext import plurals
from mtkit.formats.gettext.po_read import BOM, Catalog, Entry, read
from mtkit.placeholders.strings import (
    ConstrainedFn,
    Outcome,
    TranslateFn,
    in_order,
    placed_by_guess,
    placeholders,
    syntax_for,
    translate_strings,
)

#: the accelerator marks of gettext catalogs: GTK's _, Qt's and KDE's &, LibreOffice's ~
ACCELERATORS = "_&~"
WRAP = 79  # gettext's line width
#: format flags whose every plural form must use every argument of msgid_plural, even a form for 1 alone
#: (what msgfmt --check-format 0.21 does: for the other syntaxes it lets such a form leave the number out;
#: python-format too where its directives are unnamed)
STRICT_FORMS = frozenset(("qt-format", "lua-format", "scheme-format", "lisp-format"))
_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t", "\r": "\\r", "\a": "\\a", "\b": "\\b",
            "\f": "\\f", "\v": "\\v"}


@dataclass
class CatalogReport:
    """What translating a catalog did: counts, each entry left untranslated with where and why, and
    warnings about the catalog (its header's language)."""

    entries: int = 0  # active entries, the header left out
    translated: int = 0
    already: int = 0  # had a translation and kept it
    left: list[str] = field(default_factory=list)  # "file:line: why"
    warnings: list[str] = field(default_factory=list)
    guessed: list[int] = field(default_factory=list)  # lines of entries with placeholders put by guess


def translate_catalog_bytes(data: bytes, name: str, plain: TranslateFn, constrained: ConstrainedFn | None,
                            tgt_lang: str, retranslate: bool = False, fuzzy: bool = True
                            ) -> tuple[bytes, CatalogReport]:
    """The catalog in ``data`` (the bytes of ``name``) with its entries translated into ``tgt_lang``
    (see the module docstring), and what was done."""
    catalog = read(data, name)
    active = [e for e in catalog.entries if not e.obsolete and not e.is_header]
    todo = [e for e in active if retranslate or not e.translated]
    report = CatalogReport(entries=len(active), already=len(active) - len(todo))
    meta = catalog.metadata()
    language = meta.get("Language", "")
    if language and _primary(language) != _primary(tgt_lang):
        report.warnings.append(f"{name}: the header says Language: {language}, but the translations are "
                               f"into {tgt_lang} (--tgt-lang, or the model's target)")
    if not todo:
        return data, report
    rule = _plural_rule(meta, name, language or tgt_lang, any(e.msgid_plural is not None for e in todo))
    written = _translations(catalog, name, todo, plain, constrained, rule, report)
    if not written:
        return data, report
    edits: dict[int, list[str]] = {}  # line index → the lines that replace it ([] deletes it)
    inserts: dict[int, list[str]] = {}  # line index → lines put before it
    nl = catalog.newline
    for entry, strings in written:
        first, end = entry.msgstr_lines
        prefix = re.match(r"\s*", catalog.lines[first])[0]  # type: ignore[index]
        new = [line for n, text in strings for line in _field_lines(
            "msgstr" if n is None else f"msgstr[{n}]", text, nl, prefix)]
        edits.update({i: [] for i in range(first + 1, end)})
        edits[first] = new
        if (fuzzy or entry.line in report.guessed) and "fuzzy" not in entry.flags:
            _add_fuzzy(catalog, entry, edits, inserts)  # a guessed placement is fuzzy with --no-fuzzy too
    _complete_header(catalog, meta, name, tgt_lang, rule, edits, inserts)
    out: list[str] = []
    for i, line in enumerate(catalog.lines):
        out += inserts.get(i, [])
        out += edits.get(i, [line])
    out += inserts.get(len(catalog.lines), [])
    text = "".join(out)
    return (BOM if catalog.bom else b"") + text.encode(catalog.charset), report


def _primary(lang: str) -> str:
    return re.split(r"[-_@.]", lang.strip().lower())[0]


def _plural_rule(meta: dict[str, str], name: str, lang: str, needed: bool) -> plurals.PluralRule | None:
    """The catalog's plural rule: its header's, else the language's; a catalog with plural entries to
    fill and no rule to be had is refused."""
    rule = plurals.parse(meta.get("Plural-Forms", ""), name)
    if rule is None:
        rule = plurals.for_language(lang)
    if rule is None and needed:
        raise DataError(f"{name}: the catalog has plural entries but no Plural-Forms header, and no plural "
                        f"rule is known for {lang!r}: add the header for the language")
    return rule


def _translations(catalog: Catalog, name: str, todo: list[Entry], plain: TranslateFn,
                  constrained: ConstrainedFn | None, rule: plurals.PluralRule | None,
                  report: CatalogReport) -> list[tuple[Entry, list[tuple[int | None, str]]]]:
    """Each entry that could be translated, with its msgstr (None) or msgstr[n] strings."""
    sources, syntaxes = [], []
    for e in todo:
        syntax = syntax_for(e.flags)
        for text in (e.msgid,) if e.msgid_plural is None else (e.msgid, e.msgid_plural):
            sources.append(text)
            syntaxes.append(syntax)
    outcomes = iter(translate_strings(sources, plain, constrained, ACCELERATORS, syntaxes))
    singular_forms = _singular_forms(rule)
    written = []
    for entry in todo:
        got: list[Outcome] = [next(outcomes) for _ in range(1 if entry.msgid_plural is None else 2)]
        broken = next((o for o in got if o.text is None), None)
        if broken is not None:
            report.left.append(f"{name}:{entry.line}: left untranslated: {broken.problem}")
            continue
        texts = [o.text or "" for o in got]
        if any(placed_by_guess(o) for o in got):
            report.guessed.append(entry.line)
            report.warnings.append(f"{name}:{entry.line}: placeholders put by guessed position: marked "
                                   "fuzzy, review it")
        if entry.msgid_plural is None:
            strings: list[tuple[int | None, str]] = [(None, texts[0])]
        else:
            assert rule is not None  # _plural_rule refused the catalog otherwise
            syntax = syntax_for(entry.flags)
            found_one = placeholders(entry.msgid, syntax)
            found_many = placeholders(entry.msgid_plural, syntax)
            one, many = Counter(found_one), Counter(found_many)
            # msgfmt checks every form against msgid_plural: the singular's translation may stand in a
            # form only with none of the plural's placeholders missing but where the form is for 1 alone,
            # the arguments it has in their places (printf's come in order: "%d" cannot stand for "%s %d"),
            # and never with one missing in the syntaxes whose every form must use every argument
            ordered_one = in_order(found_one)
            fits = one <= many and ordered_one == in_order(found_many)[:len(ordered_one)]
            strict = one != many and bool(STRICT_FORMS & set(entry.flags) or (
                "python-format" in entry.flags and any(p[:2] not in ("%(", "%%") for p in found_many)))
            singular = singular_forms[one == many] if fits and not strict else set()
            strings = [(n, texts[0] if n in singular else texts[1]) for n in range(rule.nplurals)]
        unwritable = next((t for _, t in strings if not _encodes(t, catalog.charset)), None)
        if unwritable is not None:
            report.left.append(f"{name}:{entry.line}: left untranslated: {unwritable!r} cannot be written in "
                               f"the catalog's charset {catalog.declared} (convert it: msgconv -t UTF-8)")
            continue
        written.append((entry, strings))
        report.translated += 1
    return written


def _singular_forms(rule: plurals.PluralRule | None) -> dict[bool, set[int]]:
    """The forms that take the singular's translation, where the singular can count (True) or not."""
    if rule is None:
        return {True: set(), False: set()}
    return {can: rule.singular_forms(can) for can in (True, False)}


def _encodes(text: str, charset: str) -> bool:
    try:
        text.encode(charset)
    except UnicodeEncodeError:
        return False
    return True


def escape(text: str) -> str:
    """``text`` as the inside of a PO string literal."""
    return "".join(_ESCAPES.get(c, c) for c in text)


def _field_lines(keyword: str, text: str, nl: str, prefix: str = "") -> list[str]:
    """``keyword "text"`` as gettext writes it: one line where it fits in 79 columns and has no line
    break inside; else ``keyword ""`` and the text in lines that end after each ``\\n`` and wrap at
    spaces."""
    escaped = escape(text)
    single = f'{prefix}{keyword} "{escaped}"'
    if len(single) <= WRAP and "\\n" not in escaped[:-2]:
        return [single + nl]
    lines = [f'{prefix}{keyword} ""{nl}']
    for chunk in re.findall(r".*?(?:\\n|$)", escaped):
        if not chunk:
            continue
        while len(chunk) + 2 > WRAP:
            cut = chunk.rfind(" ", 0, WRAP - 2)
            if cut <= 0:
                cut = chunk.find(" ", WRAP - 2)
                if cut < 0:
                    break
            lines.append(f'{prefix}"{chunk[:cut + 1]}"{nl}')
            chunk = chunk[cut + 1:]
        if chunk:
            lines.append(f'{prefix}"{chunk}"{nl}')
    return lines


def _add_fuzzy(catalog: Catalog, entry: Entry, edits: dict[int, list[str]], inserts: dict[int, list[str]]
               ) -> None:
    """``fuzzy`` first among the entry's flags: its ``#,`` line rewritten, or one put where gettext puts
    it (after the other comments, before the ``#|`` lines and the keywords)."""
    nl = catalog.newline
    if entry.flag_line is not None:
        line = catalog.lines[entry.flag_line]
        body = line.rstrip("\r\n")
        rest = body[2:].strip()
        edits[entry.flag_line] = [f"#, fuzzy, {rest}" + line[len(body):] if rest else f"#, fuzzy{nl}"]
        return
    at = next(i for i in range(entry.start, entry.end)
              if catalog.lines[i].startswith(("#|", "#~|")) or not catalog.lines[i].startswith("#"))
    inserts.setdefault(at, []).append(f"#, fuzzy{nl}")


def _complete_header(catalog: Catalog, meta: dict[str, str], name: str, tgt_lang: str,
                     rule: plurals.PluralRule | None, edits: dict[int, list[str]],
                     inserts: dict[int, list[str]]) -> None:
    """Template values of the header made real, a missing Plural-Forms added where plural entries need
    it, line by line; a catalog without a header given one (see the module docstring)."""
    header = catalog.header
    nl = catalog.newline
    has_plurals = any(e.msgid_plural is not None for e in catalog.entries if not e.obsolete)
    wanted: dict[str, str] = {}
    if not meta.get("Language", "").strip():
        wanted["Language"] = tgt_lang
    if header is None or catalog.declared.upper() in ("", "CHARSET"):
        wanted["Content-Type"] = "text/plain; charset=UTF-8"
    forms = meta.get("Plural-Forms", "")
    if rule is not None and (("INTEGER" in forms or "EXPRESSION" in forms) or (has_plurals and not forms)):
        wanted["Plural-Forms"] = rule.header
    if not wanted:
        return
    if header is None:
        fields = {"MIME-Version": "1.0", "Content-Type": "text/plain; charset=UTF-8",
                  "Content-Transfer-Encoding": "8bit", **wanted}
        text = "".join(f"{k}: {v}\n" for k, v in fields.items())
        new = [*_field_lines("msgid", "", nl), *_field_lines("msgstr", text, nl), nl]
        inserts.setdefault(0, []).extend(new)
        return
    first, end = header.msgstr_lines
    if any(edits.get(i) is not None for i in range(first, end)):
        return
    for key, value in wanted.items():
        found = ((i, re.match(rf'(\s*(?:msgstr\s+)?)"{re.escape(key)}\s*:', catalog.lines[i]))
                 for i in range(first, end))
        at, match = next(((i, m) for i, m in found if m), (None, None))
        if at is None or match is None:
            tail = "" if header.msgstr.endswith("\n") or not header.msgstr else "\\n"
            inserts.setdefault(end, []).append(f'"{tail}{escape(f"{key}: {value}")}\\n"{nl}')
            continue
        line = catalog.lines[at]
        if not line.rstrip("\r\n").endswith('\\n"'):
            raise DataError(f"{name}:{at + 1}: the header's {key} is not one whole line: set it to "
                            f"{value!r} by hand")
        ending = line[len(line.rstrip("\r\n")):]
        edits[at] = [f'{match[1]}"{escape(f"{key}: {value}")}\\n"{ending}']
