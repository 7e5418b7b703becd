"""SubRip and WebVTT subtitles (mtkit.formats.captions.subtitles, `mtkit translate -i x.srt`): the text of
each cue translated with its styling tags, every other byte as it was; a sentence across cues translated
as one and split back by length; malformed files refused in one line naming the line."""

from __future__ import annotations

import random
import re
import sys
from collections import Counter
from pathlib import Path

import pytest
import srt
import webvtt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mtkit.errors import DataError
from mtkit.formats.captions.subtitles import read_srt, read_vtt, translate_srt, translate_vtt
from mtkit.formats.documents import DocumentJob

SRT = """1
00:00:01,000 --> 00:00:04,000
{\\an8}<i>When I was young,</i> my
father told me

2
00:00:04,200 --> 00:00:06,000
that the <font color="#ff0000">sea</font> is wide.

3
00:00:08,000 --> 00:00:09,500
- Who are you?
- <b>Nobody.</b>

4
00:00:10,000 --> 00:00:11,000
♪ ♪

5
00:00:12,000 --> 00:00:13,000 X1:10 X2:20 Y1:30 Y2:40
Good night.
"""
VTT = """WEBVTT - a test file
Kind: captions

NOTE written by hand,
on two lines

STYLE
::cue(.yellow) { color: yellow }

REGION
id:fred width:40%

intro
00:01.000 --> 00:04.000 align:start position:10%
<v Roger>Hello <c.yellow>big</c> world, <00:02.000>and
all of you.

00:00:05.000 --> 00:00:06.000
Tom &amp; Jerry are here.
"""


def upper(lines: list[str]) -> list[str]:
    """A stub model: text upper-cased, tags and entities copied."""
    return [re.sub(r"(<[^>]*>|&#?\w+;)|([^<&]+)", lambda m: m[1] or m[2].upper(), s) for s in lines]


def job(model=upper, calls: list | None = None) -> DocumentJob:
    def recording(lines):
        if calls is not None:
            calls.extend(lines)
        return model(lines)

    return DocumentJob("de", recording)


def skeleton(text: str) -> list[str]:
    """Every line that is not cue text (numbers, timings, blank lines, headers, notes) with its line
    ending, and each cue's text as one mark with the line ending after it: what must come back byte
    for byte (a cue's text may take fewer lines: they are balanced again)."""
    cues = (read_vtt if text.startswith("WEBVTT") else read_srt)(text, "x")
    out, at, last = [], 0, None
    for line in re.findall(r"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+$", text):
        cue = next((k for k, c in enumerate(cues) if c.span[0] <= at < c.span[1]), None)
        mark = "<text>" + line[len(line.rstrip("\r\n")):]
        if cue is not None and cue == last:
            out[-1] = mark
        else:
            out.append(line if cue is None else mark)
        last, at = cue, at + len(line)
    return out


def test_srt_cue_text_is_translated_and_every_other_byte_stays():
    data = SRT.replace("\n", "\r\n").encode()
    result = translate_srt(b"\xef\xbb\xbf" + data, "movie.srt", job())
    out = result.data.decode("utf-8-sig")
    assert result.data.startswith(b"\xef\xbb\xbf") and "\n" not in out.replace("\r\n", "")
    assert skeleton(out) == skeleton(data.decode())
    parsed, source = list(srt.parse(out)), list(srt.parse(data.decode()))  # an independent reader
    assert [(c.index, c.start, c.end, c.proprietary) for c in parsed] == \
        [(c.index, c.start, c.end, c.proprietary) for c in source]
    assert parsed[0].content.startswith("{\\an8}<i>WHEN I WAS YOUNG,</i>")
    assert '<font color="#ff0000">SEA</font>' in parsed[1].content
    assert parsed[2].content == "- WHO ARE YOU?\n- <b>NOBODY.</b>"  # srt reads CRLF as LF
    assert parsed[3].content == "♪ ♪" and parsed[4].content == "GOOD NIGHT."
    assert result.summary == ("movie.srt: 4 of 4 cues translated (1 sentences across cues), 0 left as "
                              "they were")


def test_a_sentence_across_cues_is_one_string_split_back_by_length_into_the_same_lines():
    calls: list[str] = []
    reverse = lambda lines: [" ".join(reversed(s.split(" "))) for s in lines]  # noqa: E731
    out = translate_srt(SRT.encode(), "m.srt", job(reverse, calls)).data.decode()
    assert calls[0] == "<i>When I was young,</i> my father told me that the <font>sea</font> is wide."
    cues = list(srt.parse(out))
    words = [re.sub(r"<[^>]*>|\{[^}]*\}", "", c.content).split() for c in cues[:2]]
    assert all(words) and sum(map(len, words)) == 13  # every word, each cue some
    assert cues[0].content.count("\n") == 1 and "\n" not in cues[1].content  # as many lines as before
    assert cues[0].content.startswith("{\\an8}")  # a position override stays at the start of its cue
    assert "Who are you?" in calls and "<b>Nobody.</b>" in calls  # dialogue: each line apart, dash kept


def test_the_identity_model_gives_the_file_back_byte_for_byte():
    for data, translate in ((SRT.encode(), translate_srt), (VTT.encode(), translate_vtt)):
        assert translate(data, "x", job(lambda lines: list(lines))).data == data


def test_webvtt_keeps_header_blocks_identifiers_settings_and_timestamps():
    out = translate_vtt(VTT.replace("\n", "\r\n").encode(), "t.vtt", job()).data.decode()
    assert skeleton(out) == skeleton(VTT.replace("\n", "\r\n"))
    captions = webvtt.from_string(out.replace("\r\n", "\n"))  # an independent reader
    assert [(c.identifier, c.start, c.end) for c in captions] == [("intro", "00:00:01.000", "00:00:04.000"),
                                                                   (None, "00:00:05.000", "00:00:06.000")]
    assert captions[0].raw_text.startswith("<v Roger>HELLO <c.yellow>BIG</c>")
    assert "<00:02.000>" in captions[0].raw_text and captions[1].raw_text == "TOM &amp; JERRY ARE HERE."


def test_text_the_model_writes_is_escaped_in_webvtt_and_never_makes_a_timing_line_in_srt():
    model = lambda lines: ["A < B & C --> D" for _ in lines]  # noqa: E731
    vtt = translate_vtt(b"WEBVTT\n\n00:01.000 --> 00:02.000\nx y z\n", "t.vtt", job(model)).data
    assert vtt.endswith(b"A &lt; B &amp; C --&gt; D\n")
    srt_out = translate_srt(b"1\n00:00:01,000 --> 00:00:02,000\nx y z\n", "t.srt", job(model)).data
    assert srt_out.endswith(b"A < B & C --> D\n")
    timing = lambda lines: ["00:00:05,000 --> 00:00:06,000 Hallo" for _ in lines]  # noqa: E731
    result = translate_srt(b"1\n00:00:01,000 --> 00:00:02,000\nhello\n", "t.srt", job(timing))
    assert result.data.endswith(b"\nhello\n") and "would read as a timing line" in result.left[0]


def test_a_translation_that_breaks_a_tag_leaves_its_cue_as_it_was_and_says_where():
    data = b"1\n00:00:01,000 --> 00:00:02,000\nSay <i>hello</i> now.\n"
    result = translate_srt(data, "a.srt", DocumentJob("de", lambda lines: ["" for _ in lines]))
    assert result.data == data
    assert result.left and result.left[0].startswith("a.srt:3: left as it was")


@pytest.mark.parametrize("data, error", [
    (b"1\n00:00:01,000 -> 00:00:0x\nhi\n", r"x\.srt:2: a timing line that does not parse"),
    (b"1\n00:00:01,000 --> 00:00:02,000\nhi\n\nstray words\n", r"x\.srt:5: a cue without a timing line"),
    (b"1\n00:00:01,000 --> 00:00:02,000\ncaf\xe9\n", r"x\.srt:3: not utf-8 text \(byte 0xe9\)"),
])
def test_malformed_srt_is_refused_naming_the_line(data, error):
    with pytest.raises(DataError, match=error):
        translate_srt(data, "x.srt", job())


@pytest.mark.parametrize("data, error", [
    (b"00:01.000 --> 00:02.000\nhi\n", r"t\.vtt:1: not a WebVTT file"),
    (b"WEBVTT\n\n00:01.000 --> 00:0x.000\nhi\n", r"t\.vtt:3: a timing line that does not parse"),
    (b"WEBVTT\n\nid\nhello\n", r"t\.vtt:3: a cue without a timing line"),
])
def test_malformed_webvtt_is_refused_naming_the_line(data, error):
    with pytest.raises(DataError, match=error):
        translate_vtt(data, "t.vtt", job())


def test_utf16_srt_with_a_bom_comes_back_in_utf16():
    data = SRT.encode("utf-16")
    out = translate_srt(data, "x.srt", job()).data
    assert out.startswith(data[:2]) and "GOOD NIGHT." in out.decode("utf-16")


# --- random files through a hostile model ----------------------------------------------------------
WORDS = ("the", "Sea", "is", "wide", "Édition", "ok", "night")
ENDS = ("", ",", ".", "?", "!")


@st.composite
def cue_texts(draw) -> list[str]:
    lines = []
    for _ in range(draw(st.integers(1, 3))):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=5))
        k = draw(st.integers(0, len(words) - 1))
        tag = draw(st.sampled_from(("", "i", "b", "font", "ts", "ass", "dash", "voice", "class")))
        if tag in ("i", "b"):
            words[k] = f"<{tag}>{words[k]}</{tag}>"
        elif tag == "ts":
            words[k] = f"<00:00:00.{100 + k:03}>{words[k]}"
        elif tag == "voice":
            words[0] = "<v Ann>" + words[0]
        elif tag == "class":
            words[k] = f"<c.yellow>{words[k]}</c>"
        elif tag == "font":
            words[k] = f'<font color="red">{words[k]}</font>'
        elif tag == "ass":
            words[0] = "{\\an8}" + words[0]
        elif tag == "dash":
            words[0] = "- " + words[0]
        lines.append(" ".join(words) + draw(st.sampled_from(ENDS)))
    return lines


@st.composite
def srt_files(draw) -> str:
    cues, at = [], 0
    for n in range(draw(st.integers(1, 6))):
        begin, at = at + draw(st.integers(0, 2500)), at + draw(st.integers(500, 3000))
        stamp = lambda ms: f"{ms // 3600000:02}:{ms // 60000 % 60:02}:{ms // 1000 % 60:02},{ms % 1000:03}"  # noqa: E731
        cues.append(f"{n + 1}\n{stamp(begin)} --> {stamp(at)}\n" + "\n".join(draw(cue_texts())) + "\n")
        at += 1
    text = "\n".join(cues)
    return text.replace("\n", draw(st.sampled_from(("\n", "\r\n"))))


def tags(texts) -> Counter:
    """The tags and overrides of all ``texts`` together: a tag may move with its words to another cue
    of the same sentence, never be lost or invented."""
    return Counter(t for text in texts for t in re.findall(r"<[^>]*>|\{\\[^}]*\}", text))


def hostile(seed: int):
    """A model that drops, doubles, reorders and invents tags and words."""
    rng = random.Random(seed)

    def model(lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            parts = re.split(r"(<[^>]*>)", line)
            choice = rng.randrange(5)
            if choice == 0:
                parts = [p for p in parts if not p.startswith("<")]
            elif choice == 1:
                parts.append("<i>")
            elif choice == 2:
                rng.shuffle(parts)
            elif choice == 3:
                parts = [p.upper() for p in parts] + ["<x9/>"]
            else:
                parts = [p if p.startswith("<") else p.upper() for p in parts]
            out.append("".join(parts))
        return out
    return model


@settings(max_examples=30, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(srt_files(), st.booleans(), st.integers(0, 10_000))
def test_random_srt_through_a_hostile_model_loses_nothing_and_keeps_every_timing(text, bom, seed):
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode()
    result = translate_srt(data, "r.srt", job(hostile(seed)))
    assert result.data.startswith(b"\xef\xbb\xbf") == bom
    out = result.data.decode("utf-8-sig")
    assert skeleton(out) == skeleton(text)
    before, after = list(srt.parse(text)), list(srt.parse(out))
    assert [(c.index, c.start, c.end) for c in after] == [(c.index, c.start, c.end) for c in before]
    assert tags(c.content for c in after) == tags(c.content for c in before)  # every tag once, none invented
    for a, b in zip(before, after, strict=True):
        assert re.search(r"\w", re.sub(r"<[^>]*>", "", b.content))  # no cue left without words
        assert b.content.count("\n") <= a.content.count("\n")
    assert len(result.left) <= sum(c.content.count("\n") + 1 for c in before)  # one per cue or dialogue line


def as_vtt(text: str, seed: int) -> str:
    """The SubRip file ``text`` written as WebVTT: a header, timings with dots, identifiers or none."""
    rng = random.Random(seed)
    newline = "\r\n" if "\r\n" in text else "\n"
    text = re.sub(r"(\d\d:\d\d:\d\d),(\d{3})", r"\1.\2", text)
    text = re.sub(r"(?m)^(\d+)(\r?)$", lambda m: f"cue-{m[1]}{m[2]}" if rng.random() < 0.5
                  else "NOTE x" + m[2], text)
    text = text.replace("NOTE x" + newline, "")
    return f"WEBVTT{newline}{newline}NOTE kept{newline}{newline}" + text


@settings(max_examples=25, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(srt_files(), st.integers(0, 10_000))
def test_random_webvtt_through_a_hostile_model_keeps_identifiers_timings_and_tags(text, seed):
    source = as_vtt(text, seed)
    out = translate_vtt(source.encode(), "r.vtt", job(hostile(seed))).data.decode()
    assert skeleton(out) == skeleton(source)
    before, after = webvtt.from_string(source), webvtt.from_string(out)
    assert [(c.identifier, c.start, c.end) for c in after] == [(c.identifier, c.start, c.end) for c in before]
    assert tags(c.raw_text for c in after) == tags(c.raw_text for c in before)
    assert all(re.search(r"\w", re.sub(r"<[^>]*>", "", c.raw_text)) for c in after)


def test_a_split_follows_the_lengths_of_the_source_cues_and_lines_are_balanced():
    from mtkit.formats.captions.subtitle_text import balanced, split_by_length

    text = "aa bb cc dd ee ff gg hh ii jj"
    assert split_by_length(text, [1, 3]) == ["aa bb cc", "dd ee ff gg hh ii jj"]  # 8 of 29: nearest 1/4
    assert split_by_length(text, [3, 1]) == ["aa bb cc dd ee ff gg hh", "ii jj"]
    assert split_by_length(text, [1, 1, 1]) == ["aa bb cc dd", "ee ff gg", "hh ii jj"]
    assert split_by_length("<i>aa bb cc</i> dd", [3, 1]) == ["<i>aa bb cc</i>", "dd"]  # never inside a tag
    assert split_by_length("<i>aa bb</i>", [1, 1]) is None  # no cue may be left without a word
    assert balanced("one two three four five six", 2) == ["one two three", "four five six"]


# --- the CLI ---------------------------------------------------------------------------------------
def test_cli_translates_an_srt_file_and_refuses_a_broken_one_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from mtkit.cli.app import app

    sys.path.insert(0, str(Path(__file__).parent))
    from test_translator import make_model_dir

    model = make_model_dir(tmp_path / "model", beam_size=1, max_len_a=0.5, max_len_b=2)
    src, out = tmp_path / "x.srt", tmp_path / "y.srt"
    small = "1\n00:00:01,000 --> 00:00:02,000\nthe <i>sea</i> is\n\n2\n00:00:02,500 --> 00:00:03,000\nwide\n"
    src.write_bytes(small.encode())
    run = CliRunner().invoke(app, ["translate", "-m", str(model), "-i", str(src), "-o", str(out),
                                   "--device", "cpu"])
    assert run.exit_code == 0, run.output
    assert re.search(r"x\.srt: \d of 2 cues translated", run.output)
    assert [(c.index, c.start, c.end) for c in srt.parse(out.read_text(encoding="utf-8"))] == \
        [(c.index, c.start, c.end) for c in srt.parse(small)]
    src.write_bytes(b"1\n00:00:01,000 --> nonsense\nhi\n")
    bad = CliRunner().invoke(app, ["translate", "-m", str(model), "-i", str(src), "-o",
                                   str(tmp_path / "none.srt")])
    assert bad.exit_code != 0 and not (tmp_path / "none.srt").exists()
    assert isinstance(bad.exception, DataError)  # the CLI's main prints it as one line
    assert str(bad.exception).startswith(f"{src}:2: a timing line that does not parse")
