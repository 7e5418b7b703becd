"""gettext catalogs (mtkit.formats.po, `mtkit translate` on .po/.pot): the untranslated entries get a
translation flagged fuzzy, plural entries every form the language needs, a .pot a usable header, and
everything else keeps its bytes; `msgfmt --check --use-fuzzy` accepts every catalog written; a
malformed catalog is one error naming the line, with nothing written; a second run changes nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mtkit.errors import DataError
from mtkit.formats.placeholders import kept, translate_strings
from mtkit.formats.po import read_catalog, translate_catalog, write_catalog

needs_msgfmt = pytest.mark.skipif(shutil.which("msgfmt") is None,
                                  reason="GNU gettext's msgfmt is not installed (Debian package gettext)")

CATALOG = r'''# German translations for demo.
# Copyright (C) 2026 The demo authors
msgid ""
msgstr ""
"Project-Id-Version: demo 1.0\n"
"Report-Msgid-Bugs-To: bugs@example.org\n"
"PO-Revision-Date: 2026-01-01 10:00+0100\n"
"Last-Translator: A Translator <a@example.org>\n"
"Language-Team: German <de@example.org>\n"
"Language: de\n"
"MIME-Version: 1.0\n"
"Content-Type: text/plain; charset=UTF-8\n"
"Content-Transfer-Encoding: 8bit\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#. TRANSLATORS: a file name follows
#: src/main.c:10 src/main.c:42
#, c-format
msgid "Cannot open %s: %s"
msgstr ""

#: src/menu.c:12
msgctxt "menu"
msgid "_Open"
msgstr ""

#: src/list.c:7
#, c-format
msgid "%d file removed"
msgid_plural "%d files removed"
msgstr[0] ""
msgstr[1] ""

#: src/help.c:3
msgid ""
"Usage: demo [OPTION]...\n"
"  -h, --help     show this help\n"
msgstr ""

#: src/main.c:80
msgid "Done."
msgstr "Fertig."

#: src/main.c:81
#, fuzzy
msgid "Almost done."
msgstr "Fast fertig."

#, python-brace-format
msgid "Hello {name}, you have {count} messages"
msgstr ""

#~ msgid "Old string"
#~ msgstr "Alte Zeichenkette"
'''


def upper(lines: list[str]) -> list[str]:
    """A stub model: words upper-cased, placeholders copied."""
    return [re.sub(r"(%\w|\{\w*\})|([^%{]+)", lambda m: m[1] or m[2].upper(), s) for s in lines]


def strings(model=upper, retry=None):
    return lambda texts: translate_strings(texts, model, retry, "_&~")


def translate_text(text: str, model=upper, lang: str = "de", **options) -> tuple[str, object]:
    catalog = read_catalog(text, "demo.po")
    report = translate_catalog(catalog, "demo.po", strings(model), lang, **options)
    return write_catalog(catalog, text, report), report


def entries(text: str) -> list[str]:
    return text.strip("\n").split("\n\n")


def test_untranslated_entries_are_translated_fuzzy_and_every_other_byte_stays():
    out, report = translate_text(CATALOG)
    before, after = entries(CATALOG), entries(out)
    assert len(before) == len(after)
    changed = [n for n, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [1, 2, 3, 4, 7]  # the untranslated ones; header, done, fuzzy, obsolete untouched
    assert after[1] == ('#. TRANSLATORS: a file name follows\n#: src/main.c:10 src/main.c:42\n'
                        '#, c-format, fuzzy\nmsgid "Cannot open %s: %s"\nmsgstr "CANNOT OPEN %s: %s"')
    assert 'msgctxt "menu"\nmsgid "_Open"\nmsgstr "_OPEN"' in after[2]
    assert 'msgstr[0] "%d FILE REMOVED"\nmsgstr[1] "%d FILES REMOVED"' in after[3]
    assert '"  -H, --HELP     SHOW THIS HELP\\n"' in after[4]
    assert (report.entries, report.translated, report.already, report.left) == (7, 5, 2, [])


def test_a_second_run_changes_nothing_byte_for_byte():
    once, _ = translate_text(CATALOG)
    twice, report = translate_text(once)
    assert twice == once and report.translated == 0


def test_no_fuzzy_and_retranslate():
    out, _ = translate_text(CATALOG, fuzzy=False)
    assert "fuzzy" not in out.replace('#, fuzzy\nmsgid "Almost done."', "")
    again, report = translate_text(CATALOG, retranslate=True)
    assert 'msgstr "DONE."' in again and report.translated == 7 and report.already == 0
    assert "Alte Zeichenkette" in again  # obsolete entries never


def test_an_entry_whose_translation_breaks_a_placeholder_stays_empty_and_is_reported():
    def changing(lines):
        return [s.replace(": %s", ": %d") for s in upper(lines)]

    out, report = translate_text(CATALOG, model=changing)
    assert 'msgid "Cannot open %s: %s"\nmsgstr ""' in out
    assert len(report.left) == 1  # named by the entry's first line
    assert report.left[0].startswith("demo.po:16: left untranslated:")


def test_a_template_gets_the_languages_header_and_plural_forms():
    pot = (CATALOG.replace('"Language: de\\n"\n', '"Language: \\n"\n')
           .replace("charset=UTF-8", "charset=CHARSET")
           .replace("nplurals=2; plural=(n != 1);", "nplurals=INTEGER; plural=EXPRESSION;"))
    out, _ = translate_text(pot, lang="ru")
    header = entries(out)[0]
    assert header.startswith("# German translations for demo.\n# Copyright (C) 2026 The demo authors\nmsgid")
    assert '"Language: ru\\n"' in header and '"Content-Type: text/plain; charset=UTF-8\\n"' in header
    assert "nplurals=3; plural=(n%10==1 && n%100!=11 ? 0" in header
    # three forms for Russian: the singular's translation, then the plural's
    assert ('msgstr[0] "%d FILE REMOVED"\nmsgstr[1] "%d FILES REMOVED"\nmsgstr[2] "%d FILES REMOVED"'
            in out)


def test_one_form_languages_take_the_plural():
    out, _ = translate_text(CATALOG.replace("nplurals=2; plural=(n != 1);", "nplurals=1; plural=0;"))
    assert 'msgid_plural "%d files removed"\nmsgstr[0] "%d FILES REMOVED"\n' in out


def test_plural_entries_without_plural_forms_for_an_unknown_language_are_refused():
    no_forms = CATALOG.replace('"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n', "")
    with pytest.raises(DataError, match="demo.po: the catalog has plural entries but no Plural-Forms header, "
                                        "and mtkit knows no plural forms for 'xx'"):
        translate_text(no_forms, lang="xx")


@pytest.mark.parametrize(("text", "message"), [
    ('msgid "a"\nmsgstr "b"\n\nmsgid "c\nmsgstr ""\n', r"demo\.po:4: not a gettext line"),  # polib skips it
    ('msgid a\nmsgstr "b"\n', r"demo\.po:1: not a gettext line"),
    ('msgid "a"\nmsgstr "b"\nhello\n', r"demo\.po:3: not a gettext line"),
    ('msgid "a"\n\nmsgid "b"\nmsgstr ""\n', r"demo\.po:3: not a valid gettext catalog"),
    ('msgid "a"\nmsgstr "b"\n\nmsgid "a"\nmsgstr "c"\n',
     r"demo\.po:4: msgid 'a' is already defined at line 1"),
])
def test_a_malformed_catalog_is_one_error_naming_the_line(text, message):
    with pytest.raises(DataError, match=message):
        read_catalog(text, "demo.po")


@needs_msgfmt
def test_msgfmt_checks_every_catalog_written(tmp_path):
    for n, (text, options) in enumerate([(CATALOG, {}), (CATALOG, {"retranslate": True}),
                                         (CATALOG, {"fuzzy": False})]):
        out, _ = translate_text(text, **options)
        path = tmp_path / f"out{n}.po"
        path.write_text(out, encoding="utf-8")
        check = subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(path)],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stderr


# ------------------------------------------------------------------------------------ the CLI
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    sys.path.insert(0, str(Path(__file__).parent))
    from test_translator import make_model_dir

    return make_model_dir(tmp_path_factory.mktemp("po-model"), beam_size=2, max_len_a=1.0, max_len_b=6)


def mtkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mtkit", *args], capture_output=True, text=True, timeout=300)


def test_translate_writes_a_catalog_that_msgfmt_accepts_and_reports_what_it_left(model_dir, tmp_path):
    src, out = tmp_path / "demo.pot", tmp_path / "de.po"
    src.write_text(CATALOG, encoding="utf-8")
    run = mtkit("translate", "-m", str(model_dir), "-i", str(src), "-o", str(out), "--device", "cpu")
    assert run.returncode == 0, run.stderr
    assert re.search(r"demo\.pot: (\d) of 7 entries translated \(fuzzy\), 2 kept, (\d) left untranslated",
                     run.stderr)
    written = read_catalog(out.read_text(encoding="utf-8"), "de.po")
    original = read_catalog(CATALOG, "demo.pot")
    for entry, before in zip(written, original, strict=True):
        assert (entry.msgid, entry.msgctxt, entry.occurrences) == (before.msgid, before.msgctxt,
                                                                    before.occurrences)
        if entry.msgstr and not before.msgstr:
            assert kept(entry.msgid, entry.msgstr) == "" and "fuzzy" in entry.flags
    left = re.findall(r"demo\.pot:(\d+): left untranslated", run.stderr)
    assert all(not e.msgstr and not any(e.msgstr_plural.values()) for e in written if str(e.linenum) in left)
    if shutil.which("msgfmt"):
        check = subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(out)],
                               capture_output=True, text=True)
        assert check.returncode == 0, check.stderr
    again = mtkit("translate", "-m", str(model_dir), "-i", str(out), "-o", str(tmp_path / "again.po"),
                  "--device", "cpu")
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.po").read_bytes() == out.read_bytes()


def test_a_malformed_catalog_writes_nothing(model_dir, tmp_path):
    src, out = tmp_path / "bad.po", tmp_path / "out.po"
    src.write_text('msgid "a"\nmsgstr "b"\n\nmsgid "c\nmsgstr ""\n', encoding="utf-8")
    run = mtkit("translate", "-m", str(model_dir), "-i", str(src), "-o", str(out))
    assert run.returncode != 0 and not out.exists()
    assert run.stderr.strip().startswith(f"error: {src}:4: not a gettext line")
    for flag in (["--nbest", "2"], ["--json"], ["--resume"], ["--no-placeholders"]):
        refused = mtkit("translate", "-m", str(model_dir), "-i", str(src), "-o", str(out), *flag)
        assert refused.returncode != 0 and "--format po" in refused.stderr
        assert "Traceback" not in refused.stderr


def test_plain_text_translation_does_not_need_polib_and_a_catalog_says_what_is_missing():
    # polib blocked: the CLI and the translate stage still import (a GPU image without polib ran plain
    # `mtkit translate` and failed at import); reading a catalog is then one line naming the file
    code = (
        "import sys; sys.modules['polib'] = None\n"
        "import mtkit.cli.app, mtkit.translate.documents\n"
        "from mtkit.errors import DataError\n"
        "from mtkit.formats.po import read_catalog\n"
        "try:\n    read_catalog('msgid \"a\"\\nmsgstr \"\"\\n', 'x.po')\n"
        "except DataError as exc:\n    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("x.po: reading gettext catalogs needs polib"), out
