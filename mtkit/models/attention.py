"""Attention shared by both model families.

* ``Scorer`` and its four subclasses (dot, scaled dot, general/bilinear, additive/MLP) give the RNN
  decoder a(h, h′); the key-side work is done once per sentence by ``project_keys`` so every decoding
  step only scores the new query.
* ``MultiHeadAttention`` is the Transformer's: fused projections, a fast path through
  ``scaled_dot_product_attention`` when nobody needs the weights, an explicit path that returns them
  per head, and optional relative positions (Shaw et al. 2018).

Masks: ``key_mask`` is bool [B, S], True at real positions. The Transformer passes an additive float
mask [B, 1, 1, S] (0 / -inf) that is built once per batch with ``additive_key_mask``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.models.positions import RelativePositions

SCORERS = ("dot", "scaled_dot", "general", "additive")


def safe_key_mask(key_mask: Tensor) -> Tensor:
    """Let rows with no real position attend to position 0 so softmax never sees only -inf (NaN)."""
    # branch-free: no host sync per forward and no graph break under torch.compile
    empty = ~key_mask.any(dim=-1, keepdim=True)
    first = torch.zeros_like(key_mask)
    first[..., 0] = True
    return key_mask | (empty & first)


def additive_key_mask(key_mask: Tensor, dtype: torch.dtype = torch.float32) -> Tensor:
    """bool [B, S] (True = real) → float [B, 1, 1, S] with 0 at real and -inf at padding positions."""
    key_mask = safe_key_mask(key_mask)
    mask = torch.zeros(key_mask.shape, dtype=dtype, device=key_mask.device)
    return mask.masked_fill_(~key_mask, float("-inf"))[:, None, None, :]


# --------------------------------------------------------------------------------- RNN scorers
class Scorer(nn.Module):
    """a(query, key) → softmax over source positions → context = Σ α_j value_j.

    Queries are [B, T, Dq] (T = 1 in a decoding step); keys come from ``project_keys(memory)``.
    """

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__()
        self.query_dim = query_dim
        self.key_dim = key_dim

    def project_keys(self, memory: Tensor) -> Tensor:
        """Key-side precomputation, once per sentence (identity unless the formula allows more)."""
        return memory

    def scores(self, query: Tensor, keys: Tensor) -> Tensor:  # [B, T, Dq], projected keys → [B, T, S]
        raise NotImplementedError

    def forward(self, query: Tensor, keys: Tensor, values: Tensor, key_mask: Tensor) -> tuple[Tensor, Tensor]:
        """query [B, T, Dq], keys from project_keys, values [B, S, Dv], key_mask bool [B, S]
        → context [B, T, Dv], weights [B, T, S] (exactly 0 at padding)."""
        scores = self.scores(query, keys)
        scores = scores.masked_fill(~safe_key_mask(key_mask)[:, None, :], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return torch.bmm(weights, values), weights


class DotScorer(Scorer):
    """a(h, h′) = hᵀh′ (Luong "dot"); query and key sizes must match."""

    def __init__(self, query_dim: int, key_dim: int) -> None:
        if query_dim != key_dim:
            raise ValueError(f"dot attention needs equal query and key sizes, got {query_dim} and {key_dim}")
        super().__init__(query_dim, key_dim)

    def scores(self, query: Tensor, keys: Tensor) -> Tensor:
        return torch.bmm(query, keys.transpose(1, 2))


class ScaledDotScorer(DotScorer):
    """a(h, h′) = hᵀh′ / √d: keeps the softmax out of saturation when d is large."""

    def project_keys(self, memory: Tensor) -> Tensor:
        return memory * (1.0 / math.sqrt(self.key_dim))


class GeneralScorer(Scorer):
    """a(h, h′) = hᵀ W h′ (Luong "general", bilinear); W h′ is precomputed, sizes may differ."""

    def __init__(self, query_dim: int, key_dim: int) -> None:
        super().__init__(query_dim, key_dim)
        self.weight = nn.Linear(key_dim, query_dim, bias=False)

    def project_keys(self, memory: Tensor) -> Tensor:
        return self.weight(memory)

    def scores(self, query: Tensor, keys: Tensor) -> Tensor:
        return torch.bmm(query, keys.transpose(1, 2))


class AdditiveScorer(Scorer):
    """a(h, h′) = wᵀ tanh(U h + V h′) (Bahdanau MLP attention); V h′ is precomputed."""

    def __init__(self, query_dim: int, key_dim: int, hidden_dim: int | None = None) -> None:
        super().__init__(query_dim, key_dim)
        hidden_dim = hidden_dim or query_dim
        self.query_proj = nn.Linear(query_dim, hidden_dim, bias=False)
        self.key_proj = nn.Linear(key_dim, hidden_dim, bias=True)
        self.energy = nn.Linear(hidden_dim, 1, bias=False)

    def project_keys(self, memory: Tensor) -> Tensor:
        return self.key_proj(memory)

    def scores(self, query: Tensor, keys: Tensor) -> Tensor:
        hidden = torch.tanh(self.query_proj(query).unsqueeze(2) + keys.unsqueeze(1))  # [B, T, S, A]
        return self.energy(hidden).squeeze(-1)


def make_scorer(name: str, query_dim: int, key_dim: int) -> Scorer:
    classes = {"dot": DotScorer, "scaled_dot": ScaledDotScorer, "general": GeneralScorer,
               "additive": AdditiveScorer}
    if name not in classes:
        raise ValueError(f"unknown attention scorer {name!r}; expected one of {', '.join(SCORERS)}")
    return classes[name](query_dim, key_dim)


# ----------------------------------------------------------------------- multi-head attention
def attend(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, causal: bool = False,
           dropout_p: float = 0.0, need_weights: bool = False, relative: RelativePositions | None = None,
           q_offset: int = 0) -> tuple[Tensor, Tensor | None]:
    """Scaled dot-product attention of q [B, H, T, dk] over k, v [B, H, S, dk].

    ``mask``: additive float mask broadcastable to [B, H, T, S]; ``causal``: query t (at absolute
    position q_offset + t) sees keys ≤ q_offset + t. PyTorch's fused SDPA kernel runs unless the
    weights are wanted, relative positions must enter the scores and outputs, or a decoding step's
    single query is in fp32 on the CPU (there the explicit path is faster; in bf16 the kernel, which
    also reads the strided views of a preallocated cache). Both paths compute the same function.
    """
    if q.dtype == torch.bfloat16 and q.device.type == "cpu" and torch.is_grad_enabled():
        # CPU attention kernels are several times slower backwards in bf16 than in fp32, so bf16
        # training is faster with attention itself in fp32
        with torch.autocast("cpu", enabled=False):
            out, weights = attend(q.float(), k.float(), v.float(), mask, causal, dropout_p, need_weights,
                                  relative, q_offset)
        return out.to(q.dtype), weights
    if relative is None and not need_weights and not _one_query_in_fp32_on_cpu(q):
        if causal and mask is None and q.size(2) == k.size(2) and q_offset == 0:
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True), None
        if causal:
            mask = _with_causal(mask, q.size(2), k.size(2), q_offset, q)
        if mask is not None and mask.dtype != q.dtype:
            # under autocast q is bf16/fp16 while the mask is fp32 (CUDA's fused kernels take a mask of
            # the query's dtype only, else SDPA falls back to its unfused math), and a bf16 model's
            # mask meets fp32 queries where attention computes in fp32 (-inf stays -inf)
            mask = mask.to(q.dtype)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None

    scale = 1.0 / math.sqrt(q.size(-1))
    scores = torch.matmul(q, k.transpose(-1, -2))
    index = None
    if relative is not None:
        index = relative.relative_index(q.size(2), k.size(2), q_offset, q.device)
        scores = scores + relative.key_scores(q, index)
    scores = scores * scale
    if causal and q.size(2) > 1:
        mask = _with_causal(mask, q.size(2), k.size(2), q_offset, q)
    if mask is not None:
        scores = scores + mask.to(scores.dtype)
    weights = torch.softmax(scores, dim=-1)
    dropped = F.dropout(weights, dropout_p) if dropout_p > 0 else weights
    out = torch.matmul(dropped, v)
    if relative is not None:
        out = out + relative.value_output(dropped, index)
    return out, (weights if need_weights else None)


def _one_query_in_fp32_on_cpu(q: Tensor) -> bool:
    """A decoding step in fp32 on the CPU: there the explicit path's two small matmuls beat the fused
    kernel, which is built for many queries; in bf16 the fused kernel is the faster one
    (bench/studies/step_attention.py measures both)."""
    return (q.size(2) == 1 and q.dtype == torch.float32 and q.device.type == "cpu"
            and not torch.is_grad_enabled())


def _with_causal(mask: Tensor | None, q_len: int, k_len: int, q_offset: int, like: Tensor) -> Tensor:
    q_pos = torch.arange(q_offset, q_offset + q_len, device=like.device).unsqueeze(1)
    future = torch.arange(k_len, device=like.device).unsqueeze(0) > q_pos
    causal = torch.zeros(q_len, k_len, dtype=like.dtype, device=like.device)
    causal.masked_fill_(future, float("-inf"))
    return causal if mask is None else mask + causal


class MultiHeadAttention(nn.Module):
    """Multi-head attention: heads = softmax(Q_h K_hᵀ/√dk) V_h, concatenated, then W_O.

    Self-attention projects Q, K, V with one fused matmul; encoder-decoder attention projects K, V of
    the memory with one fused matmul (``project_memory``, done once per sentence when decoding).
    """

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0, self_attention: bool = True,
                 relative: RelativePositions | None = None) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model ({d_model}) must be divisible by heads ({heads})")
        self.d_model, self.heads, self.head_dim = d_model, heads, d_model // heads
        self.dropout = dropout
        self.self_attention = self_attention
        self.relative = relative
        if self_attention:
            self.qkv = nn.Linear(d_model, 3 * d_model)
        else:
            self.q_proj = nn.Linear(d_model, d_model)
            self.kv = nn.Linear(d_model, 2 * d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        fused = self.qkv if self.self_attention else self.kv
        for chunk in fused.weight.data.chunk(fused.out_features // self.d_model, dim=0):
            nn.init.xavier_uniform_(chunk)  # each of W_q, W_k, W_v as if it were its own d×d layer
        nn.init.zeros_(fused.bias)
        if not self.self_attention:
            nn.init.xavier_uniform_(self.q_proj.weight)
            nn.init.zeros_(self.q_proj.bias)
        nn.init.xavier_uniform_(self.out_proj.weight)
        nn.init.zeros_(self.out_proj.bias)

    def _heads(self, x: Tensor) -> Tensor:  # [B, T, D] → [B, H, T, dk]
        return x.view(x.size(0), x.size(1), self.heads, self.head_dim).transpose(1, 2)

    def _merge(self, x: Tensor) -> Tensor:  # [B, H, T, dk] → [B, T, D]
        return self.out_proj(x.transpose(1, 2).reshape(x.size(0), x.size(2), self.d_model))

    def _drop_p(self) -> float:
        return self.dropout if self.training else 0.0

    def project_memory(self, memory: Tensor, contiguous: bool = False) -> tuple[Tensor, Tensor]:
        """Keys and values of the encoder output, [B, H, S, dk] each (contiguous for decoding, where
        they are read at every step)."""
        k, v = self.kv(memory).chunk(2, dim=-1)
        k, v = self._heads(k), self._heads(v)
        return (k.contiguous(), v.contiguous()) if contiguous else (k, v)

    def forward_self(self, x: Tensor, mask: Tensor | None = None, causal: bool = False,
                     need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """Full self-attention over x [B, T, D] (training, encoding)."""
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        out, weights = attend(self._heads(q), self._heads(k), self._heads(v), mask, causal, self._drop_p(),
                              need_weights, self.relative)
        return self._merge(out), weights

    def forward_self_step(self, x: Tensor, cache: Tensor, t: int) -> tuple[Tensor, Tensor]:
        """Causal self-attention of the newest position x [B, 1, D] (at position ``t``) over the
        positions before it and itself; returns the output and the keys and values [2, B, H, t+1, dk]
        it attended over.

        ``cache`` [2, B, H, capacity, dk] holds the keys and values of positions < t. Without
        gradients this step writes the new key and value into slot t in place and attends over a
        strided view of slots ≤ t: no copy that grows with the step. With gradients (scheduled
        sampling) autograd forbids writing into what an earlier step read, so the keys and values
        are concatenated into a new tensor instead. One fused matmul projects Q, K and V.
        """
        batch = x.size(0)
        qkv = self.qkv(x).view(batch, 3, self.heads, self.head_dim)
        new = qkv[:, 1:].transpose(0, 1)  # [2, B, H, dk]
        if torch.is_grad_enabled():
            kv = torch.cat((cache[:, :, :, :t], new.unsqueeze(3)), 3)
        else:
            cache[:, :, :, t] = new
            kv = cache[:, :, :, : t + 1]
        q = qkv[:, 0].unsqueeze(2)  # [B, H, 1, dk]
        out, _ = attend(q, kv[0], kv[1], None, False, self._drop_p(), False, self.relative, t)
        return self._merge(out), kv

    def forward_cross(self, x: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None,
                      need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """Attention of x [B, T, D] over projected memory keys/values [B, H, S, dk], or [B / G, H, S,
        dk] shared by G consecutive rows of x (a sentence's beams): then the G rows' queries attend
        as G·T queries of one row, which reads each sentence's keys and values once."""
        q = self._heads(self.q_proj(x))
        rows, group = keys.size(0), x.size(0) // keys.size(0)
        if group > 1:
            q = self._group_queries(q, rows, group)
        out, weights = attend(q, keys, values, mask, False, self._drop_p(), need_weights)
        if group > 1:
            out = self._ungroup(out, rows, group)
            weights = self._ungroup(weights, rows, group) if weights is not None else None
        return self._merge(out), weights

    @staticmethod
    def _group_queries(q: Tensor, rows: int, group: int) -> Tensor:  # [R·G, H, T, dk] → [R, H, G·T, dk]
        _, heads, steps, dim = q.shape
        return q.view(rows, group, heads, steps, dim).transpose(1, 2).reshape(rows, heads, group * steps, dim)

    @staticmethod
    def _ungroup(x: Tensor, rows: int, group: int) -> Tensor:  # [R, H, G·T, E] → [R·G, H, T, E]
        _, heads, queries, dim = x.shape
        steps = queries // group
        return x.view(rows, heads, group, steps, dim).transpose(1, 2).reshape(rows * group, heads, steps, dim)
