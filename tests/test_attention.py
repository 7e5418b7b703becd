"""Attention scorers and multi-head attention against naive loop implementations of their formulas."""

from __future__ import annotations

import math

import pytest
import torch

from mtkit.models.attention import (
    MultiHeadAttention,
    additive_key_mask,
    attend,
    make_scorer,
)
from mtkit.models.positions import RelativePositions

B, T, S = 3, 4, 6



def _mask() -> torch.Tensor:
    mask = torch.ones(B, S, dtype=torch.bool)
    mask[1, 4:] = False
    mask[2, 2:] = False
    return mask


def _naive_score(name: str, scorer: torch.nn.Module, h: torch.Tensor, k: torch.Tensor) -> float:
    """a(h, h′) for single vectors, straight from the formula."""
    if name == "dot":
        return float(sum(h[i] * k[i] for i in range(len(h))))
    if name == "scaled_dot":
        return float(sum(h[i] * k[i] for i in range(len(h))) / math.sqrt(len(k)))
    if name == "general":
        w = scorer.weight.weight  # maps key → query space: hᵀ W h′
        return float(sum(h[i] * sum(w[i, j] * k[j] for j in range(len(k))) for i in range(len(h))))
    u, v, w = scorer.query_proj.weight, scorer.key_proj.weight, scorer.energy.weight[0]
    b = scorer.key_proj.bias
    hidden = [math.tanh(float(sum(u[a, i] * h[i] for i in range(len(h)))
                              + sum(v[a, j] * k[j] for j in range(len(k))) + b[a]))
              for a in range(len(w))]
    return float(sum(w[a] * hidden[a] for a in range(len(w))))


@pytest.mark.parametrize("name,dq,dk", [("dot", 5, 5), ("scaled_dot", 5, 5), ("general", 5, 7),
                                        ("additive", 5, 7)])
@torch.no_grad()
def test_scorer_matches_naive_formula(name: str, dq: int, dk: int) -> None:
    torch.manual_seed(0)
    scorer = make_scorer(name, dq, dk)
    query, memory, mask = torch.randn(B, T, dq), torch.randn(B, S, dk), _mask()
    values = torch.randn(B, S, 3)
    context, weights = scorer(query, scorer.project_keys(memory), values, mask)
    for b in range(B):
        for t in range(T):
            real = [j for j in range(S) if mask[b, j]]
            scores = [_naive_score(name, scorer, query[b, t], memory[b, j]) for j in real]
            top = max(scores)
            exp = [math.exp(s - top) for s in scores]
            alpha = [e / sum(exp) for e in exp]
            expected_w = torch.zeros(S)
            expected_w[real] = torch.tensor(alpha)
            assert torch.allclose(weights[b, t], expected_w, atol=1e-5)
            expected_c = sum(a * values[b, j] for a, j in zip(alpha, real, strict=True))
            assert torch.allclose(context[b, t], expected_c, atol=1e-5)
    assert torch.allclose(weights.sum(-1), torch.ones(B, T), atol=1e-6)
    assert torch.all(weights.masked_select(~mask[:, None, :].expand_as(weights)) == 0)


def test_dot_scorer_rejects_unequal_sizes() -> None:
    with pytest.raises(ValueError, match="equal query and key sizes"):
        make_scorer("dot", 4, 8)


def test_empty_source_gives_no_nan() -> None:
    scorer = make_scorer("additive", 4, 4)
    mask = torch.zeros(2, 3, dtype=torch.bool)
    mask[0, :2] = True
    memory = torch.randn(2, 3, 4)
    context, weights = scorer(torch.randn(2, 1, 4), scorer.project_keys(memory), memory, mask)
    assert torch.isfinite(context).all() and torch.isfinite(weights).all()
    assert torch.isfinite(additive_key_mask(mask)).any(-1).all()


def _naive_multihead(mha: MultiHeadAttention, x: torch.Tensor, key_mask: torch.Tensor, causal: bool
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per head: softmax(x W_q (x W_k)ᵀ / √dk) x W_v; concatenate; W_O — with explicit loops over heads."""
    d, h = mha.d_model, mha.heads
    dk = d // h
    wq, wk, wv = mha.qkv.weight.split(d)
    bq, bk, bv = mha.qkv.bias.split(d)
    heads, weights = [], []
    for i in range(h):
        sl = slice(i * dk, (i + 1) * dk)
        q = x @ wq[sl].T + bq[sl]
        k = x @ wk[sl].T + bk[sl]
        v = x @ wv[sl].T + bv[sl]
        scores = q @ k.transpose(1, 2) / math.sqrt(dk)
        allowed = key_mask[:, None, :].expand_as(scores).clone()
        if causal:
            allowed &= torch.ones(x.size(1), x.size(1), dtype=torch.bool).tril()
        alpha = torch.softmax(scores.masked_fill(~allowed, float("-inf")), -1)
        heads.append(alpha @ v)
        weights.append(alpha)
    return mha.out_proj(torch.cat(heads, -1)), torch.stack(weights, 1)


@pytest.mark.parametrize("causal", [False, True])
def test_multihead_matches_per_head_loop_and_sdpa_path_equals_weights_path(causal: bool) -> None:
    torch.manual_seed(1)
    mha = MultiHeadAttention(16, 4).eval()
    x = torch.randn(B, S, 16)
    key_mask = torch.ones(B, S, dtype=torch.bool) if causal else _mask()
    mask = None if causal else additive_key_mask(key_mask)
    with torch.no_grad():
        fast, none = mha.forward_self(x, mask, causal=causal, need_weights=False)
        slow, weights = mha.forward_self(x, mask, causal=causal, need_weights=True)
        expected, expected_w = _naive_multihead(mha, x, key_mask, causal)
    assert none is None
    assert torch.allclose(fast, slow, atol=1e-5)
    assert torch.allclose(slow, expected, atol=1e-5)
    assert torch.allclose(weights, expected_w, atol=1e-6)


def test_attend_paths_agree_with_mask_and_causal_offset() -> None:
    torch.manual_seed(2)
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 8)
    key_mask = torch.ones(2, 7, dtype=torch.bool)
    key_mask[0, 5:] = False
    mask = additive_key_mask(key_mask)
    fast, _ = attend(q, k, v, mask, causal=True, q_offset=3)
    slow, weights = attend(q, k, v, mask, causal=True, q_offset=3, need_weights=True)
    assert torch.allclose(fast, slow, atol=1e-6)
    # query t sits at position 3 + t: it sees keys ≤ 3 + t, and never padding
    for t in range(4):
        assert torch.all(weights[:, :, t, 3 + t + 1:] == 0)
    assert torch.all(weights[0, :, :, 5:] == 0)


def test_incremental_self_attention_equals_causal_full_pass() -> None:
    torch.manual_seed(3)
    for relative in (None, RelativePositions(4, 2)):
        mha = MultiHeadAttention(8, 2, relative=relative).eval()
        x = torch.randn(2, 5, 8)
        with torch.no_grad():
            full, _ = mha.forward_self(x, causal=True)
            cache, outs = torch.zeros(2, 2, 2, 5, 4), []  # keys and values [2, B, H, capacity, dk]
            for t in range(5):
                out, seen = mha.forward_self_step(x[:, t: t + 1], cache, t)
                outs.append(out)
        assert torch.allclose(torch.cat(outs, 1), full, atol=1e-6)
        assert seen[0].shape == (2, 2, 5, 4)  # the last step attended over all five positions


def test_cross_attention_weights_ignore_padding() -> None:
    torch.manual_seed(4)
    mha = MultiHeadAttention(8, 2, self_attention=False).eval()
    memory, x, key_mask = torch.randn(B, S, 8), torch.randn(B, T, 8), _mask()
    keys, values = mha.project_memory(memory)
    with torch.no_grad():
        out, weights = mha.forward_cross(x, keys, values, additive_key_mask(key_mask), need_weights=True)
        fast, _ = mha.forward_cross(x, keys, values, additive_key_mask(key_mask))
    assert torch.allclose(out, fast, atol=1e-6)
    assert torch.allclose(weights.sum(-1), torch.ones(B, 2, T), atol=1e-6)
    assert torch.all(weights[1, :, :, 4:] == 0) and torch.all(weights[2, :, :, 2:] == 0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_one_query_step_equals_the_fused_kernel(dtype: torch.dtype) -> None:
    """A decoding step's single query (fp32 on the CPU takes the explicit path, bf16 the fused
    kernel) gives SDPA's output over a strided cache view and under a padding mask."""
    torch.manual_seed(0)
    q = torch.randn(6, 4, 1, 8, dtype=dtype)
    cache = torch.randn(2, 6, 4, 12, 8, dtype=dtype)
    k, v = cache[0, :, :, :7], cache[1, :, :, :7]
    key_mask = torch.ones(6, 7, dtype=torch.bool)
    key_mask[:3, 4:] = False
    mask = additive_key_mask(key_mask, dtype)
    with torch.inference_mode():
        for m in (None, mask):
            out, weights = attend(q, k, v, m)
            fp32_mask = None if m is None else m.float()
            expected = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                                        attn_mask=fp32_mask)
            assert weights is None
            assert torch.allclose(out.float(), expected, atol=1e-5 if dtype == torch.float32 else 2e-2)
