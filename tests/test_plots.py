"""Attention heatmaps: a PNG whose size follows the sentence lengths."""

from __future__ import annotations

import pytest
import torch

from mtkit.plots import head_label, plot_attention

plt = pytest.importorskip("matplotlib")


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


def test_plot_writes_png_scaled_to_lengths(tmp_path):
    torch.manual_seed(0)
    short = torch.rand(4, 4, 5).softmax(-1)
    src = ["▁Das", "▁Haus", "▁ist", "▁klein", "."]
    tgt = ["▁The", "▁house", "▁is"]
    small = plot_attention(short, src, tgt, tmp_path / "a" / "small.png", title="sentence 0")
    long = torch.rand(4, 31, 40).softmax(-1)
    big = plot_attention(long, [f"s{i}" for i in range(40)], [f"t{i}" for i in range(30)],
                         tmp_path / "big.png", head=2)
    (w1, h1), (w2, h2) = png_size(small), png_size(big)
    assert w2 > w1 and h2 > h1


def test_plot_rejects_missing_head(tmp_path):
    from mtkit.errors import ConfigError

    with pytest.raises(ConfigError):
        plot_attention(torch.rand(2, 2, 2), ["a", "b"], ["c"], tmp_path / "x.png", head=5)
    assert not (tmp_path / "x.png").exists()


def test_head_label():
    assert head_label("avg", -1) == "last layer, mean of heads"
    assert head_label(2, 0) == "layer 0, head 2"
    assert head_label("avg", -1, heads=1) == "attention"  # the RNN: one attention, one head
