"""Output formats: line discipline, n-best layout, JSON records, Pharaoh alignments."""

from __future__ import annotations

import json
import re

import pytest
import torch

from mtkit.decode.translation import (
    Candidate,
    Translation,
    alignment_from_attention,
    format_translation,
    one_line,
    pharaoh,
    select_head,
)
from mtkit.errors import ConfigError

PHARAOH = re.compile(r"^(\d+-\d+( \d+-\d+)*)?$")


def translation(index: int = 0, n: int = 2) -> Translation:
    hyps = [Candidate(f"hyp {k}", -0.5 * (k + 1), -1.0 * (k + 1), ["▁hyp", f"▁{k}"], [10, 11 + k],
                      [(0, 0), (2, 1)]) for k in range(n)]
    return Translation(index, "ein kleiner test", ["▁ein", "▁kleiner", "▁test"], hyps)


def test_plain_is_one_line_even_for_odd_text():
    tr = translation()
    tr.hypotheses[0].text = "a\nb\rc\u2028d\x85e"
    assert format_translation(tr) == ["a b c d e"]
    assert one_line("x\x0by\x0cz") == "x y z"


def test_plain_with_alignment():
    assert format_translation(translation(), alignment=True) == ["hyp 0\t0-0 2-1"]
    assert format_translation(Translation(3, ""), alignment=True) == ["\t"]


def test_nbest_has_exactly_n_lines_per_input():
    lines = format_translation(translation(7, n=2), "nbest", nbest=3)
    assert lines == ["7\t-0.5000\thyp 0", "7\t-1.0000\thyp 1", "7\t-1.0000\thyp 1"]  # padded with the last
    assert format_translation(Translation(4, ""), "nbest", nbest=2) == ["4\t0.0000\t", "4\t0.0000\t"]
    with_align = format_translation(translation(1), "nbest", nbest=2, alignment=True)
    assert [line.split("\t")[3] for line in with_align] == ["0-0 2-1", "0-0 2-1"]


def test_json_record():
    (line,) = format_translation(translation(2), "json", nbest=2)
    record = json.loads(line)
    assert record["index"] == 2 and record["text"] == "hyp 0" and record["score"] == -0.5
    assert record["tokens"] == ["▁hyp", "▁0"] and record["alignment"] == "0-0 2-1"
    assert record["source_tokens"] == ["▁ein", "▁kleiner", "▁test"]
    assert [h["text"] for h in record["nbest"]] == ["hyp 0", "hyp 1"]
    empty = json.loads(format_translation(Translation(5, ""), "json")[0])
    assert empty["text"] == "" and empty["tokens"] == [] and "nbest" not in empty
    tr = translation()
    tr.hypotheses[0].score = float("-inf")
    assert json.loads(format_translation(tr, "json")[0])["score"] is None  # valid JSON, no -Infinity


def test_alignment_is_argmax_of_head_average():
    attn = torch.zeros(2, 3, 4)
    attn[0, 0, 1] = attn[1, 0, 1] = 1.0  # both heads: token 0 → source 1
    attn[0, 1, 3], attn[1, 1, 0] = 0.9, 0.4  # average favours 3
    attn[0, 2, 2], attn[1, 2, 2] = 0.2, 0.9
    assert alignment_from_attention(attn) == [(1, 0), (3, 1), (2, 2)]
    assert alignment_from_attention(attn, head=1) == [(1, 0), (0, 1), (2, 2)]
    assert PHARAOH.match(pharaoh(alignment_from_attention(attn)))
    assert alignment_from_attention(torch.zeros(1, 0, 3)) == []


def test_select_head():
    attn = torch.arange(24, dtype=torch.float32).view(2, 3, 4)
    assert torch.equal(select_head(attn, "avg"), attn.mean(0))
    assert torch.equal(select_head(attn, -1), attn[1])
    with pytest.raises(ConfigError, match="2 heads"):
        select_head(attn, 2)
