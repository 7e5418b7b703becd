"""Plain text as one document (mtkit.formats.text.plaintext, the server's .txt files and the Python API):
every line with words translated with its placeholders kept; empty lines, the whitespace at each
line's ends, each line's ending and the BOM as they were."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mtkit.errors import DataError
from mtkit.formats.documents import DocumentJob, translate_document
from mtkit.formats.text.plaintext import translate_text


def upper(lines: list[str]) -> list[str]:
    return [re.sub(r"(%\w|\{\w*\}|<[^>]*>)|([^%{<]+)", lambda m: m[1] or m[2].upper(), s) for s in lines]


def test_each_line_is_translated_and_endings_blank_lines_and_the_bom_stay():
    calls: list[str] = []
    data = b"\xef\xbb\xbfHello %s world\r\n\r\n  two {name} here  \n\n42\rlast"
    model = lambda lines: calls.extend(lines) or upper(lines)  # noqa: E731
    result = translate_text(data, "t.txt", DocumentJob("de", model))
    assert result.data == b"\xef\xbb\xbfHELLO %s WORLD\r\n\r\n  TWO {name} HERE  \n\n42\rLAST"
    assert calls == ["Hello %s world", "two {name} here", "last"]  # nothing without words is sent
    assert result.summary == "t.txt: 3 of 3 lines translated, 0 left as they were"


def test_a_line_whose_translation_is_empty_or_loses_a_placeholder_stays_and_is_reported():
    data = b"one\nsay %d times\n"
    result = translate_text(data, "t.txt", DocumentJob("de", lambda lines: [""] * len(lines)))
    assert result.data == data
    assert [line[:25] for line in result.left] == ["t.txt:1: left as it was: ", "t.txt:2: left as it was: "]


def test_utf16_with_a_bom_is_written_back_so_and_other_bytes_are_refused_naming_the_line():
    data = "a line\nanother\n".encode("utf-16")
    assert translate_document(data, "t.txt", "text", "de", upper).data == "A LINE\nANOTHER\n".encode("utf-16")
    with pytest.raises(DataError, match=r"t\.txt:2: not utf-8 text \(byte 0xe9\)"):
        translate_text(b"fine\ncaf\xe9\n", "t.txt", DocumentJob("de", upper))


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("", "  ", "word", "two words", "%s and {x}", "Édition ")),
                          st.sampled_from(("\n", "\r\n", "\r"))), max_size=8),
       st.sampled_from(("", "tail")))
def test_random_text_keeps_its_lines_and_endings(lines, tail):
    text = "".join(a + b for a, b in lines) + tail
    out = translate_text(text.encode(), "r.txt", DocumentJob("de", upper)).data.decode()
    split = lambda t: re.findall(r"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+$", t)  # noqa: E731
    assert [len(line) for line in split(out)] == [len(line) for line in split(text)]
    assert out == upper([text])[0] if text else out == ""
