"""gettext catalogs (mtkit.formats.gettext.po, `mtkit translate` on .po/.pot): the untranslated entries get a
translation flagged fuzzy, plural entries every form the language needs, a .pot a usable header, and
everything else keeps its bytes; `msgfmt --check --use-fuzzy` accepts every catalog written; a
malformed catalog is one error naming the line, with nothing written; a second run changes nothing."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import polib
import pytest
from cli_helpers import Result, run_mtkit

from mtkit.errors import DataError
from mtkit.formats.gettext.po import translate_catalog_bytes
from mtkit.placeholders.strings import kept, syntax_for

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


def translate_bytes(data: bytes, model=upper, lang: str = "de", **options) -> tuple[bytes, object]:
    return translate_catalog_bytes(data, "demo.po", model, None, lang, **options)


def translate_text(text: str, model=upper, lang: str = "de", **options) -> tuple[str, object]:
    out, report = translate_bytes(text.encode("utf-8"), model, lang, **options)
    return out.decode("utf-8"), report


def entries(text: str) -> list[str]:
    return text.strip("\n").split("\n\n")


def msgfmt_check(tmp_path: Path, data: bytes, use_fuzzy: bool = False) -> str:
    """msgfmt --check's complaints about ``data`` ('' where it accepts it)."""
    path = tmp_path / "check.po"
    path.write_bytes(data)
    run = subprocess.run(["msgfmt", "--check", *(["--use-fuzzy"] if use_fuzzy else []), "-o", "/dev/null",
                          str(path)], capture_output=True, text=True)
    return "" if run.returncode == 0 else run.stderr or "failed"


def test_untranslated_entries_are_translated_fuzzy_and_every_other_byte_stays():
    out, report = translate_text(CATALOG)
    before, after = entries(CATALOG), entries(out)
    assert len(before) == len(after)
    changed = [n for n, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed == [1, 2, 3, 4, 7]  # the untranslated ones; header, done, fuzzy, obsolete untouched
    assert after[1] == ('#. TRANSLATORS: a file name follows\n#: src/main.c:10 src/main.c:42\n'
                        '#, fuzzy, c-format\nmsgid "Cannot open %s: %s"\nmsgstr "CANNOT OPEN %s: %s"')
    assert after[2] == '#: src/menu.c:12\n#, fuzzy\nmsgctxt "menu"\nmsgid "_Open"\nmsgstr "_OPEN"'
    assert 'msgstr[0] "%d FILE REMOVED"\nmsgstr[1] "%d FILES REMOVED"' in after[3]
    assert after[4].endswith('msgstr ""\n"USAGE: DEMO [OPTION]...\\n"\n"  -H, --HELP     SHOW THIS HELP\\n"')
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
    def inventing(lines):  # adds a directive to one string in every form it is given in, and gives
        # the string without its placeholders back empty (an invented directive or stray % would be
        # taken out there): nothing to place them in
        return [s.upper() if "open" not in s.lower() else
                s.upper() + " %x" if "%" in s or "90" in s or s == "Open" else "" for s in lines]

    out, report = translate_text(CATALOG, model=inventing)
    assert 'msgid "Cannot open %s: %s"\nmsgstr ""' in out
    assert len(report.left) == 1  # named by the entry's msgid line
    # "_Open" holds no placeholder: the %x the model wrote is invented, and taken out
    assert 'msgid "_Open"\nmsgstr "_OPEN"' in out
    assert report.left[0].startswith("demo.po:19: left untranslated:") and "%x" in report.left[0]


def test_a_template_gets_the_languages_header_and_plural_forms():
    pot = (CATALOG.replace('"Language: de\\n"\n', '"Language: \\n"\n')
           .replace("charset=UTF-8", "charset=CHARSET")
           .replace("nplurals=2; plural=(n != 1);", "nplurals=INTEGER; plural=EXPRESSION;"))
    out, _ = translate_text(pot, lang="ru")
    header = entries(out)[0]
    assert header == entries(CATALOG)[0].replace('"Language: de\\n"', '"Language: ru\\n"').replace(
        "nplurals=2; plural=(n != 1);", "nplurals=3; plural=n % 10 == 1 && n % 100 != 11 ? 0 : n % 10 >= 2 "
        "&& n % 10 <= 4 && (n % 100 < 12 || n % 100 > 14) ? 1 : 2;")  # Babel's rule; nothing else moves
    # three forms for Russian; "%d file" can say 21 (form 0), so form 0 is the singular's translation
    assert ('msgstr[0] "%d FILE REMOVED"\nmsgstr[1] "%d FILES REMOVED"\nmsgstr[2] "%d FILES REMOVED"'
            in out)


RUSSIAN = ('msgid ""\nmsgstr ""\n"Language: ru\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
           '"Plural-Forms: nplurals=3; plural=(n%10==1 && n%100!=11 ? 0 : n%10>=2 && n%10<=4 && '
           '(n%100<10 || n%100>=20) ? 1 : 2);\\n"\n\n'
           '#, c-format\nmsgid "One file"\nmsgid_plural "%d files"\n'
           'msgstr[0] ""\nmsgstr[1] ""\nmsgstr[2] ""\n')
GERMAN = ('msgid ""\nmsgstr ""\n"Language: de\\n"\n"Content-Type: text/plain; charset=UTF-8\\n"\n'
          '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n'
          '#, c-format\nmsgid "One file"\nmsgid_plural "%d files"\nmsgstr[0] ""\nmsgstr[1] ""\n')


def test_a_form_used_for_21_too_takes_the_plural_where_the_singular_cannot_count(tmp_path):
    out, report = translate_text(RUSSIAN, lang="ru", fuzzy=False)
    assert 'msgstr[0] "%d FILES"\nmsgstr[1] "%d FILES"\nmsgstr[2] "%d FILES"' in out
    out_de, _ = translate_text(GERMAN, fuzzy=False)
    assert 'msgstr[0] "ONE FILE"\nmsgstr[1] "%d FILES"' in out_de  # German's form 0 is for 1 alone
    if shutil.which("msgfmt"):
        assert msgfmt_check(tmp_path, out.encode()) == ""
        assert msgfmt_check(tmp_path, out_de.encode()) == ""


def test_one_form_languages_take_the_plural():
    out, _ = translate_text(CATALOG.replace("nplurals=2; plural=(n != 1);", "nplurals=1; plural=0;"))
    assert 'msgid_plural "%d files removed"\nmsgstr[0] "%d FILES REMOVED"\n' in out


def test_plural_entries_without_plural_forms_for_an_unknown_language_are_refused():
    no_forms = CATALOG.replace('"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n', "").replace(
        "Language: de", "Language: xx")
    with pytest.raises(DataError, match="demo.po: the catalog has plural entries but no Plural-Forms header, "
                                        "and no plural rule is known for 'xx'"):
        translate_text(no_forms, lang="xx")


def test_a_header_without_plural_forms_gets_the_languages_where_plural_entries_need_it():
    no_forms = CATALOG.replace('"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n', "")
    out, _ = translate_text(no_forms)
    assert '"Content-Transfer-Encoding: 8bit\\n"\n"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n' in out


HEADERLESS = ('#: a.c:1\nmsgid ""\n"A long first message that xgettext wrapped because it did not fit "\n'
              '"in one line"\nmsgstr "Schon übersetzt"\n\n#: a.c:2\nmsgid "Second"\nmsgstr ""\n\n'
              '#, c-format\nmsgid "%d item"\nmsgid_plural "%d items"\nmsgstr[0] ""\nmsgstr[1] ""\n')


def test_a_catalog_without_a_header_loses_no_entry_and_gets_a_header_at_its_top(tmp_path):
    # xgettext --omit-header: the first entry's msgid starts with "" (a wrapped one); it was translated
    out, report = translate_text(HEADERLESS)
    assert out.endswith(HEADERLESS.replace('msgid "Second"\nmsgstr ""',
                                           '#, fuzzy\nmsgid "Second"\nmsgstr "SECOND"')
                        .replace('msgstr[0] ""\nmsgstr[1] ""', 'msgstr[0] "%d ITEM"\nmsgstr[1] "%d ITEMS"')
                        .replace("#, c-format", "#, fuzzy, c-format"))
    assert out.startswith('msgid ""\nmsgstr ""\n"MIME-Version: 1.0\\n"\n"Content-Type: text/plain; '
                          'charset=UTF-8\\n"\n"Content-Transfer-Encoding: 8bit\\n"\n"Language: de\\n"\n'
                          '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n\n')
    assert (report.already, report.translated) == (1, 2)
    if shutil.which("msgfmt"):
        assert msgfmt_check(tmp_path, out.encode(), use_fuzzy=True) == ""


def test_line_endings_blank_lines_and_a_bom_are_kept():
    crlf = CATALOG.replace("\n", "\r\n").encode("utf-8")
    out, _ = translate_bytes(crlf)
    assert out.count(b"\r\n") == out.count(b"\n")
    assert out.decode().replace("\r\n", "\n") == translate_text(CATALOG)[0]
    packed = CATALOG.replace("\n\n", "\n")  # no blank lines between entries (msgfmt accepts that)
    out_packed, report = translate_text(packed)
    assert out_packed == translate_text(CATALOG)[0].replace("\n\n", "\n") and report.translated == 5
    with_bom, _ = translate_bytes(b"\xef\xbb\xbf" + CATALOG.encode())
    assert with_bom == b"\xef\xbb\xbf" + translate_text(CATALOG)[0].encode()


def test_a_legacy_charset_is_written_in_that_charset_and_what_it_cannot_hold_is_left(tmp_path):
    latin1 = CATALOG.replace("charset=UTF-8", "charset=ISO-8859-1").replace("Fertig.", "Fertig, schön.")
    out, _ = translate_bytes(latin1.encode("latin-1"), model=lambda ls: [s + " ÄÖÜ" for s in upper(ls)])
    assert "schön".encode("latin-1") in out and out.decode("latin-1").count("ÄÖÜ") >= 5
    _, report = translate_bytes(latin1.encode("latin-1"), model=lambda ls: ["Файл " + s for s in ls])
    assert report.translated == 0 and len(report.left) == 5
    assert "cannot be written in the catalog's charset ISO-8859-1" in report.left[0]
    if shutil.which("msgfmt"):
        assert msgfmt_check(tmp_path, out, use_fuzzy=True) == ""


def test_a_header_of_another_language_is_warned_about():
    _, report = translate_text(CATALOG, lang="fr")
    assert report.warnings == ["demo.po: the header says Language: de, but the translations are into fr "
                               "(--tgt-lang, or the model's target)"]
    assert translate_text(CATALOG.replace("Language: de", "Language: de_AT"))[1].warnings == []


FAMILIES = r"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#, c-format
msgid "read %<PRIu64> bytes of %s"
msgstr ""

#, qt-format
msgid "Copy %1 to %2"
msgstr ""

#, ruby-format
msgid "Found %{count} files in %<dir>s"
msgstr ""

#, python-brace-format
msgid "Use {{braces}} for {name}"
msgstr ""

msgid "You have {count, plural, one {# file} other {# files}} left"
msgstr ""

msgid "E_xit"
msgstr ""

msgid "Op&en file"
msgstr ""
"""
#: copies every placeholder of FAMILIES and upper-cases the rest
_FAMILY_TOKEN = r"(%<\w+>\w?|%\{\w+\}|%\d|\{\{|\}\}|\{\w+\}|#|%\w)|([^%{}#]+)"


def keep_families(lines: list[str]) -> list[str]:
    return [re.sub(_FAMILY_TOKEN, lambda m: m[1] or m[2].upper(), s) for s in lines]


def drop_marks(lines: list[str]) -> list[str]:
    """A model that knows no markup: every %, {, }, #, _, & and < > dropped, the rest upper-cased."""
    return [re.sub(r"[%{}#_&<>]", "", s).upper() for s in lines]


def test_each_format_flag_protects_its_own_syntax(tmp_path):
    # a model that writes no markup at all: each entry's placeholders, in its flag's syntax, come back
    # by sentinels (placeholders/masking.py) and the catalog stays valid
    out, report = translate_text(FAMILIES, model=drop_marks, fuzzy=False)
    assert report.translated == 7 and report.left == []
    written = polib.pofile(out)
    for entry in written:
        if entry.msgid:
            assert kept(entry.msgid, entry.msgstr, syntax_for(entry.flags)) == "", entry
    assert 'msgstr "YOU HAVE {count, plural, one {# FILE} other {# FILES}} LEFT"' in out
    out, report = translate_text(FAMILIES, fuzzy=False, model=keep_families)
    assert report.left == []
    for written in ('msgstr "READ %<PRIu64> BYTES OF %s"', 'msgstr "COPY %1 TO %2"',
                    'msgstr "FOUND %{count} FILES IN %<dir>s"', 'msgstr "USE {{BRACES}} FOR {name}"',
                    'msgstr "YOU HAVE {count, plural, one {# FILE} other {# FILES}} LEFT"',
                    'msgstr "_EXIT"', 'msgstr "&OPEN FILE"'):
        assert written in out
    if shutil.which("msgfmt"):
        assert msgfmt_check(tmp_path, out.encode()) == ""


def test_qt_directives_may_move_and_printf_ones_may_not():
    _, report = translate_text(FAMILIES, model=lambda ls: ["%2 KOPIE %1" if "%1" in s else s for s in ls])
    assert not any("Copy %1" in line for line in report.left)
    swapped = 'msgid ""\nmsgstr ""\n\n#, c-format\nmsgid "%s of %d"\nmsgstr ""\n'
    # every form of the string comes back with the directives swapped (and no words to place them in)
    _, report = translate_text(swapped, model=lambda ls: ["%d VON %s" if "%" in s else "%d %s" for s in ls])
    assert report.left and "%s %d out of order" in report.left[0]


@pytest.mark.parametrize(("text", "message"), [
    ('msgid "a"\nmsgstr "b"\n\nmsgid "c\nmsgstr ""\n', r"demo\.po:4: not a gettext line"),
    ('msgid a\nmsgstr "b"\n', r"demo\.po:1: not a gettext line"),
    ('msgid "a"\nmsgstr "b"\nhello\n', r"demo\.po:3: not a gettext line"),
    ('msgid "a"\n\nmsgid "b"\nmsgstr ""\n', r"demo\.po:1: an entry without msgstr"),
    ('msgid "a"\nmsgstr "b"\n\nmsgid "a"\nmsgstr "c"\n',
     r"demo\.po:4: duplicate message definition: msgid 'a' is already defined at line 1"),
    ('msgid "a"\nmsgstr[0] "b"\n', r"demo\.po:2: msgstr\[0\] in an entry without msgid_plural"),
    ('msgid "a"\nmsgid_plural "as"\nmsgstr "b"\n', r"demo\.po:3: msgstr in an entry with msgid_plural"),
    ('msgid "a"\nmsgid_plural "as"\nmsgstr[1] "b"\n', r"demo\.po:3: msgstr\[1\] out of order"),
    ('msgid "a \\q b"\nmsgstr ""\n', r"demo\.po:1: invalid escape sequence \\q"),
    ('msgid "a"\n"b"\nmsgstr "c"\nmsgid "a"\n', r"demo\.po:4: an entry without msgstr"),
])
def test_a_malformed_catalog_is_one_error_naming_the_line(text, message):
    with pytest.raises(DataError, match=message):
        translate_text(text)


@needs_msgfmt
@pytest.mark.parametrize("text", ['msgid "a"\nmsgstr[0] "b"\n', 'msgid "a \\q b"\nmsgstr ""\n',
                                  'msgid "a"\nmsgid_plural "as"\nmsgstr "b"\n'])
def test_what_mtkit_refuses_msgfmt_refuses_too(tmp_path, text):
    assert msgfmt_check(tmp_path, text.encode()) != ""


def test_bytes_that_are_not_the_declared_charset_are_refused():
    with pytest.raises(DataError, match=r"demo\.po:41: not UTF-8 text"):
        translate_bytes(CATALOG.replace("Done.", "D\xf6ne.").encode("latin-1"))
    with pytest.raises(DataError, match="charset=KLINGON, which mtkit cannot read"):
        translate_text(CATALOG.replace("charset=UTF-8", "charset=KLINGON"))


@needs_msgfmt
def test_msgfmt_checks_every_catalog_written(tmp_path):
    for text, options in [(CATALOG, {}), (CATALOG, {"retranslate": True}), (CATALOG, {"fuzzy": False}),
                          (HEADERLESS, {"fuzzy": False}), (RUSSIAN, {"fuzzy": False})]:
        out, _ = translate_text(text, **options)
        assert msgfmt_check(tmp_path, out.encode(), use_fuzzy=options.get("fuzzy", True)) == ""


# ------------------------------------------------------------------------------------ the CLI
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    sys.path.insert(0, str(Path(__file__).parent))
    from test_translator import make_model_dir

    return make_model_dir(tmp_path_factory.mktemp("po-model"), beam_size=2, max_len_a=1.0, max_len_b=6)


def mtkit(*args: str) -> Result:
    """`mtkit ARGS...` in this process: these tests are about the CLI's catalog handling, not the process."""
    return run_mtkit(*args)


@pytest.mark.slow
def test_translate_writes_a_catalog_that_msgfmt_accepts_and_reports_what_it_left(model_dir, tmp_path):
    src, out = tmp_path / "demo.pot", tmp_path / "de.po"
    src.write_text(CATALOG, encoding="utf-8")
    run = mtkit("translate", "-m", str(model_dir), "-i", str(src), "-o", str(out), "--device", "cpu")
    assert run.returncode == 0, run.stderr
    assert re.search(r"demo\.pot: (\d) of 7 entries translated \(fuzzy\), 2 kept, (\d) left untranslated",
                     run.stderr)
    written = polib.pofile(out.read_text(encoding="utf-8"))  # an independent reader
    original = polib.pofile(CATALOG)
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


def test_plain_text_translation_does_not_import_the_catalog_machinery():
    # Babel (plural rules) and the catalog reader load where a catalog is read: a plain-text run and
    # start-up never pay for them
    code = ("import sys; import mtkit.cli.app, mtkit.translate.protected\n"
            "print(sorted(m for m in sys.modules if m.startswith(('babel', 'mtkit.formats.gettext.po'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
