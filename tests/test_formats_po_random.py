"""Random catalogs (hypothesis) through a hostile model: with or without a header, UTF-8 or ISO-8859-1,
LF or CRLF, blank lines between entries or none, wrapped msgids, msgctxt, flags of every format family,
plural entries for a two- and a three-form language, translated, fuzzy and obsolete entries. The model
translates some strings cleanly and drops, duplicates, reorders or invents placeholders in others.
Whatever it does: every entry is still there (read back by polib, an independent reader), every line of
every entry other than its msgstr and flags keeps its bytes, every entry that had a translation keeps
all of its bytes, each written translation keeps its placeholders, and msgfmt --check accepts the file."""

from __future__ import annotations

import random
import re
import shutil
import subprocess
from pathlib import Path

import polib
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mtkit.formats.gettext.po import escape, translate_catalog_bytes
from mtkit.formats.gettext.po_read import read
from mtkit.placeholders.strings import kept, syntax_for

WORDS = ["file", "open", "save", "the", "cannot", "read", "write", "error", "Done", "items", "Exit"]
#: per format flag, placeholders of its syntax (None: an unflagged entry)
FAMILIES = {
    "c-format": ["%s", "%d", "%<PRIu64>", "%5.2f", "%1$s"],
    "python-format": ["%(name)s", "%d", "%%"],
    "python-brace-format": ["{name}", "{0}", "{{", "}}"],
    "qt-format": ["%1", "%2", "%L1"],
    "ruby-format": ["%{count}", "%<dir>s"],
    "sh-format": ["$HOME", "${USER}"],
    None: ["<b>", "</b>", "&amp;", "{count}"],
}
RUSSIAN = ("nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) "
           "? 1 : 2);")


@st.composite
def messages(draw, family: str | None) -> str:
    parts = draw(st.lists(st.one_of(st.sampled_from(WORDS), st.sampled_from(FAMILIES[family])),
                          min_size=1, max_size=6))
    text = " ".join(parts)
    if family == "c-format":
        text = text.replace("%1$s", "%s")  # msgfmt refuses mixing numbered and unnumbered directives
    if draw(st.booleans()) and draw(st.booleans()):
        text += "\n" + draw(st.sampled_from(WORDS))
    if not re.search(r"[A-Za-z]{2}", re.sub(r"%\w|\$\w+|<[^>]*>|&\w+;|\{\w*\}", "", text)):
        text = "Open " + text
    return text


def field(keyword: str, text: str, wrapped: bool) -> str:
    if not wrapped:
        return f'{keyword} "{escape(text)}"\n'
    half = len(text) // 2
    return f'{keyword} ""\n"{escape(text[:half])}"\n"{escape(text[half:])}"\n'


@st.composite
def catalogs(draw) -> tuple[bytes, str, str]:
    """A random catalog's bytes, its line ending and its target language."""
    lang = draw(st.sampled_from(["de", "ru"]))
    header = draw(st.sampled_from(["full", "template", "none"]))
    charset = draw(st.sampled_from(["UTF-8", "ISO-8859-1"])) if header == "full" else "UTF-8"
    nplurals = 3 if lang == "ru" else 2
    blocks = []
    if header != "none":
        forms = ("nplurals=INTEGER; plural=EXPRESSION;" if header == "template"
                 else RUSSIAN if lang == "ru" else "nplurals=2; plural=(n != 1);")
        blocks.append('# A catalog\nmsgid ""\nmsgstr ""\n"Project-Id-Version: demo 1\\n"\n'
                      f'"Language: {lang if header == "full" else ""}\\n"\n'
                      f'"Content-Type: text/plain; charset={charset if header == "full" else "CHARSET"}\\n"\n'
                      '"Content-Transfer-Encoding: 8bit\\n"\n'
                      f'"Plural-Forms: {forms}\\n"\n')
    seen = set()
    for n in range(draw(st.integers(1, 8))):
        family = draw(st.sampled_from(list(FAMILIES)))
        msgid = draw(messages(family))
        context = draw(st.sampled_from([None, "menu"]))
        if (context, msgid) in seen:
            continue
        seen.add((context, msgid))
        lines = f"#: src/file{n}.c:{n}\n"
        flags = [f for f in (family, draw(st.sampled_from([None, "fuzzy"]))) if f]
        if flags:
            lines += "#, " + ", ".join(flags) + "\n"
        if draw(st.booleans()):
            lines += '#| msgid "an old one"\n'
        if context:
            lines += f'msgctxt "{context}"\n'
        wrapped = draw(st.booleans())
        lines += field("msgid", msgid, wrapped)
        done = draw(st.booleans()) and draw(st.booleans())  # a translation already there: valid, kept
        if draw(st.booleans()):
            plural = draw(messages(family))
            lines += field("msgid_plural", plural, False)
            lines += "".join(field(f"msgstr[{k}]", "Ü " + plural if done else "", False)
                             for k in range(nplurals))
        else:
            lines += field("msgstr", "Ü " + msgid if done else "", False)
        blocks.append(lines)
    if draw(st.booleans()):
        blocks.append('#~ msgid "Old"\n#~ msgstr "Alt"\n')
    text = ("\n" if draw(st.booleans()) else "").join(blocks)
    nl = draw(st.sampled_from(["\n", "\r\n"]))
    return text.replace("\n", nl).encode("latin-1" if charset == "ISO-8859-1" else "utf-8"), nl, lang


def hostile(rng: random.Random):
    """A model that upper-cases words and, on some lines, drops, duplicates, swaps or invents a
    placeholder; a word of German in every line, so a latin-1 catalog can hold it."""
    token = re.compile(r"%<\w+>\w?|%\{\w+\}|%\(\w+\)\w|%L?\d\$?\w?|%[-.\d]*\w|\{\{|\}\}|\{\w*\}|\$\{?\w+\}?|"
                       r"<[^>]*>|&\w+;|#")

    def model(lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            found = token.findall(line)
            text = token.sub(lambda m: m[0] if token.fullmatch(m[0]) else m[0], line)
            text = re.sub(r"\b[a-z]+\b", lambda m: m[0].upper(), text) + " grün"
            what = rng.choice(["clean", "clean", "drop", "duplicate", "swap", "invent"])
            if what == "drop" and found:
                text = text.replace(found[0], "", 1)
            elif what == "duplicate" and found:
                text += " " + found[0]
            elif what == "swap" and len(found) > 1:
                a, b = found[0], found[1]
                text = text.replace(a, "\0").replace(b, a, 1).replace("\0", b, 1)
            elif what == "invent":
                text += rng.choice([" %s", " <b>", " {x}", " %1"])
            out.append(text)
        return out

    return model


def without_translation(lines: list[str], entry) -> list[str]:
    """An entry's lines less its msgstr lines and its flags line (what translating it may change)."""
    skip = set(range(*entry.msgstr_lines)) | ({entry.flag_line} if entry.flag_line is not None else set())
    return [lines[i] for i in range(entry.start, entry.end)
            if i not in skip and lines[i] not in ("#, fuzzy\n", "#, fuzzy\r\n")]


@pytest.mark.skipif(shutil.which("msgfmt") is None, reason="GNU gettext's msgfmt is not installed")
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(catalog=catalogs(), seed=st.integers(0, 2**16), fuzzy=st.booleans())
def test_random_catalogs_through_a_hostile_model_lose_nothing_and_stay_valid(tmp_path: Path, catalog, seed,
                                                                             fuzzy):
    data, nl, lang = catalog
    path = tmp_path / "out.po"
    path.write_bytes(data)
    assume(msgfmt_check(path, fuzzy))  # a catalog gettext accepts (the generator can mix what it refuses)
    out, report = translate_catalog_bytes(data, "random.po", hostile(random.Random(seed)), None, lang,
                                          fuzzy=fuzzy)
    before, after = read(data, "in.po"), read(out, "out.po")
    assert out.count(b"\n") == out.count(nl.encode())  # the file's line ending throughout
    keys = [(e.msgctxt, e.msgid, e.obsolete) for e in before.entries if not e.is_header]
    assert [(e.msgctxt, e.msgid, e.obsolete) for e in after.entries if not e.is_header] == keys
    path.write_bytes(out)
    independent = polib.pofile(str(path))
    assert len([e for e in independent if e.msgid]) == len(keys)  # polib reads the same entries
    for old, new in zip([e for e in before.entries if not e.is_header],
                        [e for e in after.entries if not e.is_header], strict=True):
        old_lines = before.lines[old.start:old.end]
        if old.translated or old.obsolete or not new.translated:
            assert after.lines[new.start:new.end] == old_lines  # every byte of it
            continue
        assert without_translation(after.lines, new) == without_translation(before.lines, old)
        syntax = syntax_for(new.flags)
        strings = [new.msgstr] if new.msgid_plural is None else list(new.msgstr_plural.values())
        for text in strings:
            assert kept(new.msgid, text, syntax) == "" or kept(new.msgid_plural or "", text, syntax) == ""
    assert report.translated + len(report.left) == sum(not e.translated for e in before.entries
                                                       if not e.is_header and not e.obsolete)
    assert msgfmt_check(path, fuzzy), out.decode("latin-1")


def msgfmt_check(path: Path, fuzzy: bool) -> bool:
    return subprocess.run(["msgfmt", "--check", *(["--use-fuzzy"] if fuzzy else []), "-o", "/dev/null",
                           str(path)], capture_output=True).returncode == 0
