"""XLIFF 1.2 and 2.0 (mtkit.formats.interchange.xliff): the targets still to write are filled and marked as
machine suggestions, the others left as they are, inline codes kept with their ids; every other byte of the
file as it was; ill-formed files refused in one line."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from translate.storage import xliff as ttk_xliff
from translate.storage import xliff2 as ttk_xliff2

from mtkit.errors import DataError
from mtkit.formats.documents import DocumentJob
from mtkit.formats.interchange.xliff import translate_xliff

XLIFF_12 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" datatype="plaintext" original="app.properties">
    <header><note>keep   this</note></header>
    <body>
      <trans-unit id="save">
        <source>Click <g id="1" ctype="bold">Save</g> now &amp; <x id="2"/> then.</source>
      </trans-unit>
      <trans-unit id="kept" approved="yes">
        <source>Kept</source>
        <target state="translated">Behalten</target>
      </trans-unit>
      <trans-unit id="done">
        <source>Done</source>
        <target state="translated">Fertig</target>
      </trans-unit>
      <group translate="no"><trans-unit id="brand"><source>Brand</source></trans-unit></group>
      <trans-unit id="open"><source>Open <bpt id="1">&lt;b&gt;</bpt>file<ept id="1">&lt;/b&gt;</ept></source>\
<target state="new"/></trans-unit>
      <trans-unit id="seg"><source>One. Two.</source><seg-source><mrk mtype="seg" mid="1">One.</mrk> \
<mrk mtype="seg" mid="2">Two.</mrk></seg-source><target state="needs-translation"></target></trans-unit>
    </body>
  </file>
</xliff>
"""
XLIFF_20 = """<?xml version="1.0" encoding="UTF-8"?>
<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en">
 <file id="f1">
  <unit id="u1">
   <segment>
    <source>Hello <pc id="1">big</pc> <ph id="2"/> world <sc id="3"/>x<ec startRef="3"/>.</source>
   </segment>
   <ignorable><source> </source></ignorable>
   <segment state="final"><source>Done</source><target>Fertig</target></segment>
   <segment state="initial"><source>Again <mrk id="m1" translate="no">Brand</mrk>.</source>\
<target>Again</target></segment>
  </unit>
  <unit id="u2" translate="no"><segment><source>Not this</source></segment></unit>
 </file>
</xliff>
"""


def upper(lines: list[str]) -> list[str]:
    """A stub model: text upper-cased, tags and entities copied."""
    return [re.sub(r"(<[^>]*>|&#?\w+;)|([^<&]+)", lambda m: m[1] or m[2].upper(), s) for s in lines]


def job(model=upper, calls: list | None = None, **options) -> DocumentJob:
    def recording(lines):
        if calls is not None:
            calls.extend(lines)
        return model(lines)

    return DocumentJob("de", recording, **options)


def without_writes(text: str) -> str:
    """``text`` without what the translation may write: targets, their states, the target language."""
    text = re.sub(r"\s*<target\b[^>]*?(?:/>|>.*?</target>)", "", text, flags=re.S)
    return re.sub(r'\s(?:state|state-qualifier|subState|target-language|trgLang)="[^"]*"', "", text)


def test_xliff_12_fills_what_is_to_translate_and_leaves_the_rest_byte_for_byte():
    calls: list[str] = []
    result = translate_xliff(XLIFF_12.encode(), "app.xlf", job(upper, calls))
    out = result.data.decode()
    assert without_writes(out) == without_writes(XLIFF_12)
    assert 'datatype="plaintext" original="app.properties" target-language="de">' in out
    mt = 'state="needs-review-translation" state-qualifier="mt-suggestion"'
    assert (f'then.</source>\n        <target {mt}>CLICK <g id="1" ctype="bold">SAVE</g> NOW &amp; '
            f'<x id="2"/> THEN.</target>\n      </trans-unit>') in out  # after its source, indented as it is
    assert f'<target {mt}>OPEN <bpt id="1">&lt;b&gt;</bpt>FILE<ept id="1">&lt;/b&gt;</ept></target>' in out
    assert (f'<target {mt}><mrk mtype="seg" mid="1">ONE.</mrk> <mrk mtype="seg" mid="2">TWO.</mrk></target>'
            in out)  # segmented by <seg-source>: the same segments
    assert "<target state=\"translated\">Behalten</target>" in out and "Fertig" in out and "BRAND" not in out
    assert calls == ["Click <g>Save</g> now &amp; <x/> then.", "Open <bpt>file</bpt>", "One.", "Two."]
    store = ttk_xliff.xlifffile.parsestring(result.data)  # an independent reader
    units = {u.getid().rsplit("\x04", 1)[-1]: u for u in store.units}
    assert list(units) == ["save", "kept", "done", "brand", "open", "seg"]
    assert units["kept"].isapproved() and units["kept"].target == "Behalten"
    assert units["seg"].target == "ONE. TWO." and units["brand"].target in (None, "")
    assert result.summary == "app.xlf: 3 of 5 units translated, 2 kept as they were, 0 left untranslated"


def test_xliff_20_segments_get_targets_and_translated_state_with_a_machine_substate():
    result = translate_xliff(XLIFF_20.encode(), "b.xlf", job())
    out = result.data.decode()
    assert without_writes(out) == without_writes(XLIFF_20)
    assert 'version="2.0" srcLang="en" trgLang="de">' in out
    assert ('<segment state="translated" subState="mtkit:mt">\n    <source>Hello <pc id="1">big</pc> '
            '<ph id="2"/> world <sc id="3"/>x<ec startRef="3"/>.</source>\n    <target>HELLO <pc id="1">BIG'
            '</pc> <ph id="2"/> WORLD <sc id="3"/>X<ec startRef="3"/>.</target>') in out
    assert '<segment state="final"><source>Done</source><target>Fertig</target></segment>' in out
    assert '<target>AGAIN <mrk id="m1" translate="no">Brand</mrk>.</target>' in out  # initial: filled
    assert "NOT THIS" not in out
    store = ttk_xliff2.Xliff2File.parsestring(result.data)  # an independent reader
    assert [u.getid() for u in store.units] == ["u1::segment-1", "u1::segment-2", "u1::segment-3", "u2"]
    assert [u.target for u in store.units][:3] == ["HELLO BIG WORLD X.", "Fertig", "AGAIN Brand."]


def test_a_second_run_over_its_own_output_changes_nothing():
    for source in (XLIFF_12, XLIFF_20):
        once = translate_xliff(source.encode(), "a.xlf", job()).data
        assert translate_xliff(once, "a.xlf", job()).data == once


def test_retranslate_rewrites_translated_targets_but_never_approved_or_final_ones():
    out = translate_xliff(XLIFF_12.encode(), "a.xlf", job(retranslate=True)).data.decode()
    assert "DONE</target>" in out and "Behalten" in out
    out = translate_xliff(XLIFF_20.encode(), "b.xlf", job(retranslate=True)).data.decode()
    assert "<target>Fertig</target>" in out


def test_a_file_with_nothing_to_translate_comes_back_byte_for_byte():
    data = XLIFF_12.replace(' datatype="plaintext"', ' target-language="de-DE" datatype="plaintext"')
    data = re.sub(r"<trans-unit id=\"(save|open|seg)\">.*?</trans-unit>", "", data, flags=re.S)
    assert translate_xliff(data.encode(), "a.xlf", job()).data == data.encode()


def test_utf16_with_its_bom_and_declaration_is_written_back_in_utf16():
    data = XLIFF_12.replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16")
    out = translate_xliff(data, "a.xlf", job()).data
    assert out[:2] == data[:2] and "CLICK" in out.decode("utf-16")


def test_a_translation_that_loses_an_inline_code_leaves_its_unit_and_says_where():
    result = translate_xliff(XLIFF_12.encode(), "a.xlf", job(lambda lines: ["" for _ in lines]))
    assert len(result.left) == 3 and result.left[0].startswith("a.xlf:7: left untranslated")
    assert without_writes(result.data.decode()) == without_writes(XLIFF_12)
    assert "CLICK" not in result.data.decode()


@pytest.mark.parametrize("data, error", [
    (XLIFF_12.replace("</g>", "</x>"), r"a\.xlf:7: not well-formed XML"),
    ("<root/>", r"a\.xlf:1: not an XLIFF file"),
    (XLIFF_12.replace('source-language="en"', 'source-language="en" target-language="fr"'),
     r"a\.xlf:3: the file's target language is 'fr' but the model translates into 'de'"),
    # a 3-letter code is compared as the language it names (it used to pass as any 2-letter one)
    (XLIFF_12.replace('source-language="en"', 'source-language="en" target-language="fra"'),
     r"a\.xlf:3: the file's target language is 'fra' but the model translates into 'de'"),
])
def test_bad_files_are_refused_in_one_line(data, error):
    with pytest.raises(DataError, match=error):
        translate_xliff(data.encode(), "a.xlf", job())


@pytest.mark.parametrize("code", ["de", "de-DE", "de_AT", "DE", "deu", "ger"])
def test_every_way_of_writing_the_target_language_is_accepted(code):
    data = XLIFF_12.replace('source-language="en"', f'source-language="en" target-language="{code}"')
    assert translate_xliff(data.encode(), "a.xlf", job()).data.decode().count("CLICK") > 0





# --- random files through a hostile model ----------------------------------------------------------
WORDS = ("Save", "the", "file", "now", "Édition", "&amp;", "&lt;b&gt;")
CODES_12 = ('<x id="{n}"/>', '<g id="{n}">{w}</g>', '<ph id="{n}">&lt;br/&gt;</ph>',
            '<bpt id="{n}">&lt;i&gt;</bpt>{w}<ept id="{n}">&lt;/i&gt;</ept>', '<mrk mtype="term">{w}</mrk>')
CODES_20 = ('<ph id="{n}"/>', '<pc id="{n}">{w}</pc>', '<sc id="{n}"/>{w}<ec startRef="{n}"/>',
            '<mrk id="m{n}" translate="no">{w}</mrk>', '<cp hex="0001"/>')


@st.composite
def contents(draw, codes: tuple[str, ...]) -> str:
    parts = []
    for n in range(draw(st.integers(1, 5))):
        word = draw(st.sampled_from(WORDS))
        parts.append(draw(st.sampled_from(codes)).format(n=n + 1, w=word) if draw(st.booleans()) else word)
    return " ".join(parts)


@st.composite
def files(draw) -> tuple[str, int]:
    version = draw(st.sampled_from((1, 2)))
    newline = draw(st.sampled_from(("\n", "\r\n")))
    units = []
    for k in range(draw(st.integers(1, 5))):
        source = draw(contents(CODES_12 if version == 1 else CODES_20))
        target = draw(st.sampled_from(("", "<target/>", "<target>Old</target>",
                                       '<target state="new">x</target>',
                                       '<target state="translated">Alt</target>')))
        if version == 1:
            extra = draw(st.sampled_from(("", ' approved="yes"', ' translate="no"')))
            units.append(f'   <trans-unit id="t{k}"{extra}>{newline}    <source>{source}</source>'
                         f'{newline + "    " + target if target else ""}{newline}   </trans-unit>')
        else:
            state = draw(st.sampled_from(("", ' state="initial"', ' state="final"')))
            target = re.sub(r" state=\"\w+\"", "", target)
            units.append(f'   <unit id="u{k}"><segment{state}><source>{source}</source>{target}</segment>'
                         '</unit>')
    if version == 1:
        text = (f'<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">{newline}'
                f' <file source-language="en" datatype="x-test" original="r"><body>{newline}'
                + newline.join(units) + f"{newline} </body></file>{newline}</xliff>{newline}")
    else:
        text = (f'<xliff xmlns="urn:oasis:names:tc:xliff:document:2.0" version="2.0" srcLang="en">{newline}'
                f' <file id="f">{newline}' + newline.join(units) + f"{newline} </file>{newline}</xliff>"
                + newline)
    return text, version


def hostile(seed: int):
    """A model that drops, doubles, reorders and invents tags."""
    rng = random.Random(seed)

    def model(lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            parts = re.split(r"(<[^>]*>)", line)
            choice = rng.randrange(4)
            if choice == 0:
                parts = [p for p in parts if not p.startswith("<")]
            elif choice == 1:
                parts += ["<g>", "\x01"]
            elif choice == 2:
                rng.shuffle(parts)
            else:
                parts = [p if p.startswith("<") else p.upper() for p in parts]
            out.append("".join(parts))
        return out
    return model


def codes(text: str) -> Counter:
    return Counter(re.findall(r"<(?!/?(?:source|target)\b)[^>]*>", text))


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files(), st.booleans(), st.integers(0, 10_000))
def test_random_files_through_a_hostile_model_keep_every_code_and_byte(file, bom, seed):
    text, version = file
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    result = translate_xliff(data, "r.xlf", job(hostile(seed)))
    assert result.data.startswith(b"\xef\xbb\xbf") == bom
    out = result.data.decode("utf-8-sig")
    assert without_writes(out) == without_writes(text)
    if version == 1:
        before, after = (ttk_xliff.xlifffile.parsestring(t.encode()).units for t in (text, out))
    else:
        before, after = (ttk_xliff2.Xliff2File.parsestring(t.encode()).units for t in (text, out))
    assert [u.getid() for u in after] == [u.getid() for u in before]
    filled = 0
    for unit in re.findall(r"<(?:trans-unit|segment)\b.*?</(?:trans-unit|segment)>", out, flags=re.S):
        if "mt-suggestion" in unit or "mtkit:mt" in unit:
            filled += 1
            source = re.search(r"<source>(.*?)</source>", unit)[1]
            target = re.search(r"<target[^>]*>(.*?)</target>", unit)[1]
            assert codes(target) == codes(source)  # every inline code once, none invented
            assert "\x01" not in target  # a character XML does not allow is never written
    assert filled + len(result.left) <= len(before)
