"""Sinusoidal, learned and relative (Shaw 2018) positions."""

from __future__ import annotations

import math

import pytest
import torch

from mtkit.errors import MtkitError
from mtkit.models.attention import attend
from mtkit.models.positions import LearnedPositions, RelativePositions, SinusoidalPositions


def test_sinusoidal_follows_the_paper_formula_and_grows_on_demand() -> None:
    pe = SinusoidalPositions(6, initial_length=4)
    table = pe(10)  # longer than the initial table: grown on the fly
    assert table.shape == (10, 6)
    for pos in (0, 3, 9):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert torch.equal(pe(3, offset=7), table[7:10])
    assert not pe.state_dict() and not list(pe.buffers())  # a cache: not in checkpoints, not synced by DDP
    assert pe(5000).shape == (5000, 6)


def test_learned_positions_refuse_lengths_beyond_max() -> None:
    pe = LearnedPositions(4, max_positions=8)
    assert torch.equal(pe(3, offset=5), pe.embedding.weight[5:8])
    with pytest.raises(MtkitError, match="max_positions=8"):
        pe(4, offset=5)


def test_relative_index_is_the_clipped_distance() -> None:
    rel = RelativePositions(4, max_distance=2)
    index = rel.relative_index(4, 6, q_offset=1, device=torch.device("cpu"))
    for i in range(4):
        for j in range(6):
            assert index[i, j].item() == max(min(j - (i + 1), 2), -2) + 2


def test_relative_attention_matches_shaw_formula() -> None:
    """e_ij = q_i·(k_j + a^K_ij)/√d ;  z_i = Σ_j α_ij (v_j + a^V_ij)."""
    torch.manual_seed(0)
    rel = RelativePositions(4, max_distance=2)
    q, k, v = torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 4), torch.randn(1, 1, 5, 4)
    with torch.no_grad():
        out, weights = attend(q, k, v, relative=rel, need_weights=True)
        a_k, a_v = rel.key_table.weight, rel.value_table.weight
        for i in range(5):
            scores = torch.stack([q[0, 0, i] @ (k[0, 0, j] + a_k[max(min(j - i, 2), -2) + 2]) / 2.0
                                  for j in range(5)])
            alpha = torch.softmax(scores, 0)
            z = sum(alpha[j] * (v[0, 0, j] + a_v[max(min(j - i, 2), -2) + 2]) for j in range(5))
            assert torch.allclose(weights[0, 0, i], alpha, atol=1e-6)
            assert torch.allclose(out[0, 0, i], z, atol=1e-6)


def test_relative_scores_depend_only_on_clipped_distance() -> None:
    """With content-free keys (k = 0) and one query vector at every position, the score of (i, j)
    is a function of clip(j - i) alone."""
    torch.manual_seed(1)
    rel = RelativePositions(4, max_distance=2)
    n = 7
    q = torch.randn(1, 1, 1, 4).expand(1, 1, n, 4)
    index = rel.relative_index(n, n, 0, torch.device("cpu"))
    with torch.no_grad():
        scores = rel.key_scores(q, index)[0, 0]
    by_distance: dict[int, set[float]] = {}
    for i in range(n):
        for j in range(n):
            by_distance.setdefault(max(min(j - i, 2), -2), set()).add(round(scores[i, j].item(), 5))
    assert sorted(by_distance) == [-2, -1, 0, 1, 2]
    assert all(len(values) == 1 for values in by_distance.values())
    assert len({next(iter(v)) for v in by_distance.values()}) == 5  # and the five distances differ
