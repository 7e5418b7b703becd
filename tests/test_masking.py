"""The sentinels and the placement of placeholders/masking.py with what a weak model does to them: a quoted
placeholder (``"%s"``) is one sentinel and one slot, so the masked source's words are the stripped
source's words and the alignment can be used; every ``%`` that printf reads is out of the model's
reach, so gcc's quotes (``%<if%>``) it repeats and directives it invents (``%qD``) are taken out.
Random strings (hypothesis) keep every placeholder through sentinels and through placement."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from mtkit.placeholders import masking
from mtkit.placeholders.strings import kept, translate_strings
from mtkit.placeholders.syntaxes import GENERIC, guarded


def test_a_placeholder_alone_in_quotes_or_brackets_goes_with_them_and_words_are_counted_as_given():
    find = GENERIC.finditer
    masked, pairs = masking.sentinels('column "%s" is of type %s (%d)', find)
    assert masked == "column 901 is of type 902 903" and [s.text for _, s in pairs] == ['"%s"', "%s", "(%d)"]
    bare, placed = masking.stripped('column "%s" is of type %s', find)
    assert bare == "column is of type" and [(p.slot.text, p.before, p.total) for p in placed] == [
        ('"%s"', 1, 4), ("%s", 4, 4)]
    # glued to a word on both sides: a space, so that "file" and "name" stay two words, and counted so
    bare, placed = masking.stripped("a file%sname here", find)
    assert bare == "a file name here" and (placed[0].before, placed[0].total) == (2, 4)
    # quotes around a word, or an apostrophe inside one, are not a placeholder's pair
    assert masking.stripped("l'%s' and \"%s files\"", find)[0] == "l' ' and \" files\""


def test_a_placeholder_is_glued_only_to_what_it_touched_so_that_gluing_makes_no_other():
    source = "The directives %k, %m and %l, are quoted"
    find = guarded(source).finditer
    masked, pairs = masking.sentinels(source, find)
    assert masked == "The directives 901 , 902 and 903 , are quoted"
    # the commas dropped: "%k" glued to "%m" would read Symfony's "%k%", "%l" glued to "Sie" "%lS"
    back = masking.unmask("Die Direktiven 901 902 und 903 Sie werden zitiert", pairs)
    assert back == "Die Direktiven %k %m und %l Sie werden zitiert" and not kept(source, back)
    commas = masking.unmask("Die Direktiven 901 , 902 und 903 , Sie", pairs)
    assert commas == "Die Direktiven %k, %m und %l, Sie"
    bare, placed = masking.stripped(source, find)
    assert not kept(source, masking.project("Die Direktiven und Sie werden zitiert", placed))
    assert masking.unmask("901 902 done", masking.sentinels("%d%% done", find)[1]) == "%d%% done"


class _Aligning:
    """A model that cannot write ``%`` (so strings are masked at once; ``writes``: it can) and gives
    fixed answers with fixed word alignments (as formats_adapter's search does)."""

    def __init__(self, answers: dict[str, tuple[str, list[tuple[int, int]]]], writes: bool = False):
        self.answers, self.seen, self.writes = answers, [], writes

    def __call__(self, lines):
        self.seen.append(list(lines))
        return [[self.answers.get(line, (line.upper(), None))[0]] for line in lines]

    def can_write(self, text):
        return self.writes or "%" not in text

    def aligned(self, lines):
        self.seen.append(list(lines))
        return [self.answers.get(line, (line.upper(), None)) for line in lines]


def test_a_quoted_placeholder_whose_sentinel_is_dropped_is_placed_by_the_alignment():
    # "column 901 is of type 902" → "Spalte ist vom Typ": column–Spalte, is–ist, of–vom, type–Typ
    model = _Aligning({"column 901 is of type 902": ("Spalte ist vom Typ", [(0, 0), (2, 1), (3, 2), (4, 3)])})
    out = translate_strings(['column "%s" is of type %s'], model)
    assert model.seen == [["column 901 is of type 902"]]  # one search: placed from it
    assert (out[0].text, out[0].rescued) == ('Spalte "%s" ist vom Typ %s', "alignment")


def test_a_string_the_model_broke_is_masked_and_placed_from_one_search_with_attention():
    # the model writes % but loses one; masked, it drops the sentinels too: placed by the alignment
    # of that one translation, not searched a third time without its placeholders
    model = _Aligning({"column %s is of type %s": ("Spalte %s ist vom Typ", None),
                       "column 901 is of type 902": ("Spalte ist vom Typ", [(0, 0), (2, 1), (3, 2), (4, 3)])},
                      writes=True)
    out = translate_strings(["column %s is of type %s"], model)
    assert model.seen == [["column %s is of type %s"], ["column 901 is of type 902"]]
    assert (out[0].text, out[0].rescued) == ("Spalte %s ist vom Typ %s", "alignment")


def test_gcc_quotes_and_invented_directives_are_out_of_the_models_reach():
    source = "too many %<if%> clauses with %qs modifier"
    find = guarded(source).finditer
    assert masking.sentinels(source, find)[0] == "too many 901 if 902 clauses with 903 modifier"
    assert masking.stripped(source, find)[0] == "too many if clauses with modifier"
    assert guarded("50% off {n}") == GENERIC  # no printf directive: a % is prose, nothing more to take

    def repeating(lines, constraints=None):  # drops numbers, repeats gcc's quotes, invents a %qD
        return [re.sub(r"\d+", "", s).upper() + " %<X%> %qD" for s in lines]

    out = translate_strings([source], repeating, repeating)  # by position: the 6 words' places among 7
    assert out[0].text == "TOO MANY %<IF CLAUSES%> WITH MODIFIER %qs X" and out[0].rescued == "position"
    assert not kept(source, out[0].text)


_PLACEHOLDERS = ["%s", "%d", "%1$s", "{0}", "{name}", "<b>", "</b>", "&amp;", "%<", "%>", "%qD", "%%",
                 "$HOME"]
_PIECES = st.lists(st.one_of(st.sampled_from(["open", "file", "the", "Done", "x", ":", ".", "50%", "'", '"']),
                             st.sampled_from(_PLACEHOLDERS)), min_size=1, max_size=10)


@settings(max_examples=200, deadline=None)
@given(pieces=_PIECES, glue=st.lists(st.booleans(), min_size=10, max_size=10), quote=st.booleans())
def test_random_strings_keep_their_placeholders_through_sentinels_and_placement(pieces, glue, quote):
    core = ""
    for piece, glued in zip(pieces, glue, strict=False):
        core += piece if glued or not core else " " + piece
    if quote:
        core = core.replace("%s", '"%s"', 1)
    find = guarded(core).finditer
    masked, pairs = masking.sentinels(core, find)
    back = masking.unmask(masked, pairs)
    assert back is not None and not kept(core, back)  # "%1%2": "%1902" still finds 902
    bare, placed = masking.stripped(core, find)
    assert all(0 <= p.before <= p.total == len(bare.split()) for p in placed)
    words = [w for w in masked.split() if w not in {n for n, _ in pairs}]
    assert words == bare.split()  # the alignment of the masked source is one of the stripped source
    assert not kept(core, masking.project(bare, placed))  # position keeps the source's order


def test_placeholders_invented_in_a_string_that_has_none_are_taken_out():
    answers = {"`e' command not supported": "<b>Befehl »%s« nicht unterstützt", "unmatched `{'": "%s"}
    out = translate_strings(list(answers), lambda lines: [answers[s] for s in lines])
    assert (out[0].text, out[0].rescued) == ("Befehl nicht unterstützt", "uninvented")
    assert out[1].text is None  # nothing but what it invented: left, and reported
    off = translate_strings(list(answers)[:1], lambda lines: [answers[s] for s in lines], rescue=False)
    assert off[0].text is None


def test_a_sentinel_the_model_wrote_wrong_is_not_left_in_the_text():
    # "column 901 in child table" → "Spalte 90101-Tabelle …": the number goes, the word stays
    model = _Aligning({"column 901 in version 9.5": ("Spalte 90101-Tabelle in Version 9.5 9.01.01", None)})
    out = translate_strings(['column "%s" in version 9.5'], model)
    assert out[0].text is not None and out[0].rescued == "position"
    assert "901" not in out[0].text.replace(".", "") and "Tabelle" in out[0].text and "9.5" in out[0].text
