"""Placeholders survive translation by construction (mtkit.placeholders.strings): found in every form,
taken out where they are structure (ends, line breaks, accelerators), checked in every translation,
retried as constraints, and a string whose translation would still break one is left untranslated
with the reason. Stub "models" make each failure happen on purpose; `--placeholders` is checked on a
real (tiny, random) model through the CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from mtkit.errors import DataError
from mtkit.placeholders.strings import kept, placeholders, syntax_for, translate_strings


@pytest.mark.parametrize("text", [
    "%s", "%d", "%-10.3f", "%1$s", "%2$d", "%(name)s", "%%", "%lu", "%zu", "%5.2lf", "{0}", "{name}", "{}",
    "{0:.2f}", "{ $count }", "${HOME}", "$PATH", "<b>", "</b>", "<br/>", '<a href="x.html">', "&amp;",
    "&#160;", "&#x2014;", "%name%", "%file_name%", "%PATH%", "{{ name }}", "{{name}}",
    "{{ user.name|upper }}", "{{- item -}}",
])
def test_every_kind_of_placeholder_is_found_whole(text):
    assert placeholders(f"Copy {text} now") == [text]


@pytest.mark.parametrize("text", ["100% sure", "50 % off", "a < b > c", "Tom & Jerry", "file_name",
                                  "costs $5", "{ not one }", "x<y", "50% off and 20%", "5% to 10% more",
                                  "{{ }}"])
def test_prose_is_not_a_placeholder(text):
    assert placeholders(text) == []


#: printf directives as C writes them (a position, flags, width, precision, a length), and Symfony names
_DIRECTIVES = st.builds(lambda *parts: "%" + "".join(parts),
                        st.sampled_from(["", "1$", "2$"]), st.sampled_from(["", "-", "0", "#", "+", "-0"]),
                        st.sampled_from(["", "5", "10"]), st.sampled_from(["", ".2", ".*"]),
                        st.sampled_from(["", "h", "hh", "l", "ll", "z", "j", "L", "q"]),
                        st.sampled_from("dioxXfegcsup"))
#: a name that is itself a directive's letters is no Symfony name: "ld" (%ld% is printf's %ld and a %),
#: or a length modifier alone ("ll": %ll% is printf's length ll before the conversion %)
_NAMES = st.text("abcdfilsquxz_0", min_size=2, max_size=6).filter(lambda name: not name[0].isdigit()).filter(
    lambda name: not re.fullmatch(r"(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcsSp%mr]?", name))


@settings(max_examples=100, deadline=None)
@given(tokens=st.lists(st.one_of(_DIRECTIVES, st.just("%%"), _NAMES.map(lambda n: f"%{n}%"),
                                 _NAMES.map(lambda n: f"{{{{ {n} }}}}")), min_size=1, max_size=6),
       glue=st.lists(st.booleans(), min_size=6, max_size=6))
def test_symfony_and_twig_placeholders_never_swallow_printf_directives(tokens, glue):
    """Directives, %%, %name% and {{ name }} side by side, glued or spaced, and prose with % around
    them: each token is found whole, nothing else; in a printf-flagged string %name% is no placeholder."""
    text = "50% off:"
    for token, glued in zip(tokens, glue, strict=False):
        text += token if glued else " " + token
    assert placeholders(text + " and 20%") == tokens
    c_format = syntax_for(["c-format"])
    assert not any(re.fullmatch(r"%[a-z_]\w+%", p) for p in placeholders(text, c_format))


@pytest.mark.parametrize(("source", "translation", "problem"), [
    ("Open %s", "Öffne %s", ""),
    ("%s of %d", "%d von %s", "%s %d out of order"),  # non-positional: the arguments come in order
    ("%1$s of %2$d", "%2$d von %1$s", ""),  # positional: free to move
    ("%(a)s and %(b)s", "%(b)s und %(a)s", ""),
    ("{0} to {1}", "{1} nach {0}", ""),
    ("Open %s", "Öffne", "lost %s"),
    ("Open", "Öffne %s", "added %s"),
    ("Open %s", "Öffne %S", "lost %s; added %S"),
    ("<b>bold</b> text", "<b>fett Text", "lost </b>"),
    ("Save %s", "Speichere % s %s", "printf directives changed: % s"),  # printf would read "% s"
    ("100% sure", "100 % sicher", ""),  # prose without directives: no printf reading
    ("Get %sB/%sB", "Hole %sB/%sB von %B", "a % that starts no printf directive"),  # msgfmt, in apt
    ("write %llu items", "schreibe %ll Elemente %llu", "a % that starts no printf directive"),
    ("%count% done in %d s", "%count% erledigt in %d s", ""),  # %count% holds no %c for C
    ("%d of %count%", "%count% von %d", ""),
])
def test_a_translation_keeps_its_placeholders_or_says_what_broke(source, translation, problem):
    assert kept(source, translation) == problem


def _recording(fn):
    calls: list[list[str]] = []

    def wrapped(lines, *rest):
        calls.append(list(lines))
        return fn(lines, *rest)

    return wrapped, calls


def upper_outside(lines):
    """A stub model that translates by upper-casing words but copies placeholders."""
    return [re.sub(r"(%\w|<[^>]*>|\{\w*\})|([^%<{]+)", lambda m: m[1] or m[2].upper(), s) for s in lines]


def test_structure_is_taken_out_before_the_model_and_put_back():
    model, calls = _recording(upper_outside)
    out = translate_strings(["  Open the file\n\tand save it.\n", "Line one\\nline two", "%s:", "_Open file"],
                            model, accelerators="_&~")
    assert [o.text for o in out] == ["  OPEN THE FILE\n\tAND SAVE IT.\n", "LINE ONE\\nLINE TWO", "%s:",
                                     "_OPEN FILE"]
    # the model saw lines without ends, breaks or the accelerator mark, and nothing for "%s:"
    assert calls == [["Open the file", "and save it.", "Line one", "line two", "Open file"]]


def test_the_accelerator_goes_before_the_same_letter_where_the_translation_has_it():
    german = {"Save as": "Speichern unter", "Save As": "Als Datei speichern", "Quit": "Beenden",
              "Open": "Datei öffnen"}
    out = translate_strings(["_Save as", "Save &As", "&Quit", "~Open"],
                            lambda lines: [german[s] for s in lines], accelerators="_&~")
    # the same letter at a word's start where there is one (S, A), else the first word's start
    assert [o.text for o in out] == ["_Speichern unter", "&Als Datei speichern", "&Beenden", "~Datei öffnen"]
    assert translate_strings(["&amp; more"], lambda lines: lines, accelerators="&")[0].text == "&amp; more"


def test_a_broken_piece_is_retried_with_its_placeholders_as_constraints():
    def dropping(lines):
        return [s.replace("%s", "").replace("{0}", "") for s in lines]

    def constrained(lines, constraints):
        assert constraints == [placeholders(s) for s in lines]
        return [s + " " + " ".join(c) for s, c in zip([d.strip() for d in dropping(lines)], constraints,
                                                        strict=True)]

    retry, calls = _recording(constrained)
    out = translate_strings(["Open %s now", "Copy {0}", "plain words"], dropping, retry)
    assert [o.text for o in out] == ["Open  now %s", "Copy {0}", "plain words"]
    assert [o.constrained for o in out] == [True, True, False]
    assert calls == [["Open %s now", "Copy {0}"]]  # only the broken pieces


def test_a_string_still_broken_after_the_retry_is_left_untranslated_with_the_reason():
    def inventing(lines, constraints=None):  # every path (plain, constraints, sentinels) breaks, and
        # the string without its placeholders ("of") comes back empty: nothing to place them in
        return [s + " %x" if re.search(r"[%0-9]", s) else "" for s in lines]

    out = translate_strings(["%s of %d", "fine %s"], inventing, inventing)
    assert out[0].text is None
    assert "added %x" in out[0].problem and "as constraints" in out[0].problem
    assert out[1].text is None
    # without a constrained search (the ct2 engine) the retry is skipped
    alone = translate_strings(["%s of %d"], inventing, None)
    assert alone[0].text is None and "as constraints" not in alone[0].problem


def test_a_model_that_will_not_keep_placeholders_gets_them_back_by_sentinels_then_by_position():
    def swapping(lines):  # swaps the directives, and copies numbers
        return [s.replace("%s of %d", "%d of %s").upper() for s in lines]

    out = translate_strings(["%s of %d files"], swapping)
    assert (out[0].text, out[0].rescued) == ("%s OF %d FILES", "sentinels")  # "901 OF 902 FILES"

    def no_marks(lines):  # writes no %, no <, no digits: the sentinels do not come back either
        return [re.sub(r"[%<>/0-9]|\b[sd]\b|\bb\b", "", s).upper() for s in lines]

    model, calls = _recording(no_marks)
    out = translate_strings(["Click <b>Save</b> now", "Open %s in %d seconds"], model)
    assert [o.rescued for o in out] == ["position", "position"]
    assert out[0].text == "CLICK <b>SAVE</b> NOW" and out[1].text == "OPEN %s IN %d SECONDS"
    assert calls[1] == ["Click 901 Save 902 now", "Open 901 in 902 seconds"]  # sentinels first
    assert calls[2] == ["Click Save now", "Open in seconds"]  # then without them, put back by position


def test_placeholders_a_model_invents_where_it_was_given_none_are_taken_out_before_placing():
    def inventing(lines, constraints=None):  # writes a %x into every translation, masked or not
        return [s.upper() + " %x" for s in lines]

    out = translate_strings(["%s of %d"], inventing, inventing)
    assert (out[0].text, out[0].rescued) == ("%s OF %d", "position")  # "OF %x": the %x is not the source's


def test_a_placeholder_the_model_cannot_write_is_put_back_by_position():
    def cannot(lines, constraints):
        if any("ü" in c for cs in constraints for c in cs):
            raise DataError("the target term cannot be encoded")
        return lines

    out = translate_strings(["a {ü} b", "c %s d"], lambda lines: [s.split()[0] for s in lines], cannot)
    assert out[0].text == "a {ü}" and out[0].rescued == "position"  # "a" of "a b": {ü} after it
    assert out[1].text == "c %s d" and out[1].constrained  # found one by one: the other is retried as usual


def test_one_broken_piece_leaves_its_whole_string_untranslated():
    out = translate_strings(["First %s.\nSecond line."], lambda lines: [s.replace("%s", "") for s in lines],
                            rescue=False)
    assert out[0].text is None


# ------------------------------------------------------------------------------------ the CLI
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    sys.path.insert(0, str(Path(__file__).parent))
    from test_translator import make_model_dir

    return make_model_dir(tmp_path_factory.mktemp("ph-model"), beam_size=2, max_len_a=1.0, max_len_b=6)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a CUDA GPU"))])
def test_placeholders_on_plain_text_keep_one_line_per_line_and_never_break_one(model_dir, tmp_path, device):
    """On a GPU too: constrained retries once mixed a host tensor into the card's there."""
    lines = ["the house %s is small", "where are {0} you going", "we like <b>green</b> tea", "", "plain cat"]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "mtkit", "translate", "-m", str(model_dir), "-i", str(src),
                          "--placeholders", "--device", device], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    out = run.stdout.split("\n")[:-1]
    assert len(out) == len(lines)
    for source, target in zip(lines, out, strict=True):
        assert kept(source, target) == "", (source, target)
    reported = {int(m[1]) for m in re.finditer(r"in\.txt:(\d+): left untranslated", run.stderr)}
    assert all(out[n - 1] == lines[n - 1] for n in reported)  # a reported line is written as it was


def test_placeholders_refuse_outputs_that_carry_more_than_text(model_dir, tmp_path):
    run = subprocess.run([sys.executable, "-m", "mtkit", "translate", "-m", str(model_dir), "--placeholders",
                          "--scores"], input="x\n", capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert run.stderr.strip() == ("error: --scores does not combine with --placeholders: it writes the "
                                  "translated text alone")


def test_search_functions_give_the_beams_candidates_part_by_part_and_report_them(model_dir, monkeypatch):
    """What `mtkit translate --format po` searches with: the beam's hypotheses, best first (the best is
    the translator's own translation), in parts of SEARCH_CHUNK strings, each part reported."""
    from mtkit.decode import formats_adapter as module
    from mtkit.decode.translator import Translator

    class Recording:
        def __init__(self):
            self.grown, self.advanced = 0, []

        def grow(self, n):
            self.grown += n

        def advance(self, n):
            self.advanced.append(n)

    monkeypatch.setattr(module, "SEARCH_CHUNK", 2)
    translator = Translator(model_dir, device="cpu", threads=1, precision="fp32")
    progress = Recording()
    plain, constrained = module.search_functions(translator, progress=progress)
    lines = ["the house is small", "a cat sat on the mat", "we like green tea"]
    found = plain(lines)
    assert [c[0] for c in found] == translator.translate(lines)
    assert all(1 <= len(c) <= translator.decoding.beam_size for c in found)
    assert constrained is not None
    forced = constrained(["the house is small"], [["tea"]])
    assert any("tea" in c for c in forced[0])
    assert progress.grown == 4 and progress.advanced == [2, 1, 1]


# ------------------------------------------------------------------ syntaxes by flag, ICU, accelerators
def test_gettext_inttypes_macros_and_rubys_named_directives_are_whole_placeholders():
    assert placeholders("read %<PRIu64> of %5<PRId32> in %{dir}") == ["%<PRIu64>", "%5<PRId32>", "%{dir}"]
    assert kept("read %<PRIu64> bytes", "lese <PRIu64> Bytes") == "lost %<PRIu64>; added <PRIu64>"


def test_a_flag_names_its_syntax():
    qt = syntax_for(["qt-format"])
    assert placeholders("Copy %1 to %2 (%L3)", qt) == ["%1", "%2", "%L3"]
    assert placeholders("Copy %1 to %2") == []  # unflagged: prose
    assert kept("Copy %1 to %2", "Kopiere %2 nach %1", qt) == ""  # positional: free to move
    assert kept("Copy %1 to %2", "Kopiere %2 nach", qt) == "lost %1"
    brace = syntax_for(["python-brace-format"])
    assert placeholders("Use {{x}} for {name}", brace) == ["{{", "}}", "{name}"]
    c = syntax_for(["c-format", "fuzzy"])
    assert kept("Help:", "Hilfe: 100%!", c) == "a % that starts no printf directive"
    assert kept("Help:", "Hilfe: 100%!") == ""  # no printf syntax: prose


def test_tags_that_nest_in_the_source_must_nest_in_the_translation():
    assert kept("<b>bold <i>it</i></b>", "<b>fett <i>es</b></i>") .startswith("tags out of nesting")
    assert kept("<b>bold</b> <i>it</i>", "<i>es</i> <b>fett</b>") == ""


def test_icu_plural_branches_are_translated_apart_with_their_structure_kept():
    model, calls = _recording(upper_outside)
    source = "You have {count, plural, offset:1 =0 {no files} one {# file} other {# files '{'x'}'}} left"
    out = translate_strings([source], model)
    assert out[0].text == ("YOU HAVE {count, plural, offset:1 =0 {NO FILES} one {# FILE} "
                           "other {# FILES '{'X'}'}} LEFT")
    assert sorted(calls[0]) == ["# file", "# files '{'x'}'", "no files"]  # the branches, on their own
    assert calls[1] == ["You have {count} left"]
    dropped = translate_strings([source], lambda ls: [s.replace("#", "") for s in ls], rescue=False)
    assert dropped[0].text is None and "lost #" in dropped[0].problem
    rescued = translate_strings([source], lambda ls: [s.replace("#", "").upper() for s in ls])
    assert rescued[0].text == ("YOU HAVE {count, plural, offset:1 =0 {NO FILES} one {# FILE} "
                               "other {# FILES '{'X'}'}} LEFT")


@pytest.mark.parametrize(("text", "expected"), [
    ("E_xit", "_BEENDEN"), ("Op&en file", "&DATEI ÖFFNEN"), ("Propert_ies", "_EIGENSCHAFTEN"),
    ("file_name", "FILE_NAME"), ("LC_ALL", "LC_ALL"), ("AT&T", "AT&T"), ("Save__all", "SAVE__ALL"),
])
def test_an_accelerator_inside_a_capitalised_word_is_one_and_a_name_is_not(text, expected):
    german = {"Exit": "Beenden", "Open file": "Datei öffnen", "Properties": "Eigenschaften"}
    out = translate_strings([text], lambda ls: [german.get(s, s).upper() for s in ls], accelerators="_&~")
    assert out[0].text == expected


# ------------------------------------------------------------ masking first, placing by the alignment
class _Vocabulary:
    """A target vocabulary that knows some characters: any other is the unknown subword."""

    def __init__(self, characters: str):
        self.characters = characters

    def encode_ids(self, lines):
        return [[5 if ch in self.characters else 1 for ch in line] for line in lines]


class _Model:
    """A stand-in Translator: ``answers[line]`` (else the line upper-cased, markup and digits dropped),
    with its subwords (one per word) and, asked for attention, ``links`` as its subword alignment."""

    can_constrain, nbest = False, 1
    decoding = type("Decoding", (), {"beam_size": 1})()

    def __init__(self, characters: str, answers=None, links=None):
        self.tgt_bpe, self.answers, self.links, self.seen = _Vocabulary(characters), answers or {}, links, []

    def translate_chunk(self, lines, start=0, need_attention=False, name="", constraints=None):
        from mtkit.decode.translation import Candidate, Translation

        self.seen.append(list(lines))
        out = []
        for line in lines:
            text = self.answers.get(line, re.sub(r"[%<>/{}$0-9]|\b[sdb]\b", "", line).upper())
            pieces = ["\u2581" + w for w in text.split()]
            links = self.links if need_attention else None
            out.append(Translation(0, line, ["\u2581" + w for w in line.split()],
                                   [Candidate(" ".join(text.split()), 0.0, 0.0, pieces, [], links)]))
        return out


def test_what_the_vocabulary_cannot_write_is_masked_at_once_and_what_it_can_is_not():
    from mtkit.decode.formats_adapter import search_functions

    copies = {"Open 901 now": "Öffne 901 jetzt", "Open %s now": "Öffne %s jetzt"}
    without = _Model("abcdefghijklmnopqrstuvwxyzO0123456789 ", copies)
    out = translate_strings(["Open %s now"], *search_functions(without))
    assert without.seen == [["Open 901 now"]]  # one translation, masked from the start
    assert (out[0].text, out[0].rescued) == ("Öffne %s jetzt", "sentinels")
    able = _Model("abcdefghijklmnopqrstuvwxyzO%0123456789 ", copies)
    out = translate_strings(["Open %s now"], *search_functions(able))
    assert able.seen == [["Open %s now"]] and (out[0].text, out[0].rescued) == ("Öffne %s jetzt", "")
    always = _Model("abcdefghijklmnopqrstuvwxyzO%0123456789 ", copies)
    translate_strings(["Open %s now"], *search_functions(always), masking="always")
    assert always.seen == [["Open 901 now"]]


def test_a_tag_the_model_drops_is_placed_by_the_word_alignment_not_by_position():
    from mtkit.decode.formats_adapter import search_functions

    # the sentinels dropped: "Click 901 Save 902 now" → "Jetzt klicken Sie auf Speichern", aligned
    # Click–klicken, Save–Speichern, now–Jetzt (source words 0, 2, 4 of the masked line)
    answers = {"Click 901 Save 902 now": "Jetzt klicken Sie auf Speichern",
               "Click Save now": "Jetzt klicken Sie auf Speichern"}
    model = _Model("abcdefghijklmnopqrstuvwxyzCS ", answers, links=[(0, 1), (2, 4), (4, 0)])
    out = translate_strings(["Click <b>Save</b> now"], *search_functions(model))
    assert model.seen == [["Click 901 Save 902 now"]]  # searched once: placed from that translation
    assert (out[0].text, out[0].rescued) == ("Jetzt klicken Sie auf <b>Speichern</b>", "alignment")
    # without an alignment (a plain function), the relative position puts it elsewhere
    out = translate_strings(["Click <b>Save</b> now"],
                            lambda lines: [answers.get(s, re.sub(r"[<>/0-9]|\bb\b", "", s)) for s in lines])
    assert (out[0].text, out[0].rescued) == ("Jetzt klicken <b>Sie</b> auf Speichern", "position")
    # a placeholder goes before the word aligned with the word after it; at the end, after the last's
    answers = {"Delete 901 files in 902": "In Dateien löschen"}
    model = _Model("abcdefghijklmnopqrstuvwxyzDIö ", answers, links=[(0, 2), (2, 1), (3, 0)])
    out = translate_strings(["Delete {n} files in {dir}"], *search_functions(model))
    assert (out[0].text, out[0].rescued) == ("In {dir} {n} Dateien löschen", "alignment")


# ------------------------------------------------- guessed placements: marked where the user reviews them
def _no_marks(lines: list[str]) -> list[str]:
    """A model that writes no %, no tag and no digit: every placeholder is put back by position."""
    return [re.sub(r"[%<>/0-9]|\b[sd]\b|\bb\b", "", s).upper() for s in lines]


def test_a_guessed_placement_is_fuzzy_in_a_catalog_and_counted_in_the_summary():
    from mtkit.formats.documents import translate_document

    po = (b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
          b'#, c-format\nmsgid "Open %s in %d seconds"\nmsgstr ""\n\nmsgid "Close"\nmsgstr ""\n')
    result = translate_document(po, "app.po", "po", "de", _no_marks, fuzzy=False)
    text = result.data.decode("utf-8")
    assert '#, fuzzy, c-format\nmsgid "Open %s in %d seconds"\nmsgstr "OPEN %s IN %d SECONDS"' in text
    assert '\nmsgid "Close"\nmsgstr "CLOSE"' in text and text.count("fuzzy") == 1  # --no-fuzzy elsewhere
    assert result.guessed == 1 and "1 string with placeholders put by guessed position" in result.summary
    assert any(line.startswith("app.po:6: placeholders put by guessed position") for line in result.left)


def test_a_guessed_placement_is_marked_for_review_in_xliff_2():
    from mtkit.formats.documents import translate_document

    xliff = (b'<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="2.0" xmlns="urn:oasis:names:tc:xliff:'
             b'document:2.0" srcLang="en" trgLang="de">\n<file id="f">\n'
             b'<unit id="1"><segment><source>Open <ph id="1"/> now</source></segment></unit>\n'
             b'<unit id="2"><segment><source>Close it</source></segment></unit>\n</file>\n</xliff>\n')
    result = translate_document(xliff, "ui.xlf", "xliff", "de", _no_marks)
    text = result.data.decode("utf-8")
    assert text.count('subState="mtkit:mt-review"') == 1 and text.count('subState="mtkit:mt"') == 1
    assert result.guessed == 1
    assert any("ui.xlf:4: placeholders put by guessed position" in line for line in result.left)
