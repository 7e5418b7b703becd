"""Position information for the Transformer: fixed sinusoids, learned embeddings, relative (Shaw 2018).

Absolute positions (sinusoidal, learned) are added to the scaled token embeddings; relative positions
live inside self-attention instead, as learned vectors for the clipped distance between the query and
the key, added to the keys (scores) and to the values (outputs).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from mtkit.errors import MtkitError


class SinusoidalPositions(nn.Module):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...), as in the paper (``layout``
    "interleaved"), MarianMT's permutation of it ("halves": `marian_sinusoids`), or fairseq's table as
    M2M100 and NLLB use it ("fairseq": `fairseq_sinusoids`).

    The table is a cache, not a buffer: it grows on demand (translate may see inputs longer than
    anything in training), checkpoints do not carry it, and DDP does not broadcast it (a buffer
    grown on one rank only would no longer match the others).
    """

    def __init__(self, dim: int, initial_length: int = 256, layout: str = "interleaved") -> None:
        super().__init__()
        self.dim = dim
        self.initial_length = initial_length
        self.layout = layout
        self._table: Tensor | None = None

    def _make(self, length: int, device: torch.device) -> Tensor:
        if self.layout == "halves":
            return marian_sinusoids(length, self.dim).to(device)
        if self.layout == "fairseq":
            return fairseq_sinusoids(length, self.dim).to(device)
        position = torch.arange(length, dtype=torch.float32, device=device).unsqueeze(1)
        inv_freq = torch.exp(
            torch.arange(0, self.dim, 2, dtype=torch.float32, device=device) * (-math.log(10000.0) / self.dim)
        )
        table = torch.zeros(length, self.dim, device=device)
        table[:, 0::2] = torch.sin(position * inv_freq)
        table[:, 1::2] = torch.cos(position * inv_freq[: self.dim // 2])
        return table

    def forward(self, length: int, offset: int = 0, device: torch.device | None = None) -> Tensor:
        """Encodings of positions offset … offset+length-1: [length, dim] (float32)."""
        device = device or torch.device("cpu")
        table = self._table
        if table is None or table.size(0) < offset + length:
            size = max(offset + length, self.initial_length, 0 if table is None else 2 * table.size(0))
            table = self._make(size, device)
        elif table.device != device:
            table = table.to(device)
        self._table = table
        return table[offset: offset + length]


def marian_sinusoids(length: int, dim: int) -> Tensor:
    """MarianMT's table [length, dim] (float32): the same frequencies as the paper's, sines in the first
    half and cosines in the second, from position 0. Computed as `transformers` computes it (float64
    NumPy, then float32), so an imported model adds bit for bit the positions MarianMT adds."""
    import numpy as np

    j = np.arange(dim)
    angle = np.arange(length, dtype=np.float64)[:, None] / np.power(10000, 2 * (j // 2) / dim)[None, :]
    sentinel = (dim + 1) // 2
    table = torch.empty(length, dim, dtype=torch.float32)
    table[:, :sentinel] = torch.from_numpy(np.sin(angle[:, 0::2])).float()
    table[:, sentinel:] = torch.from_numpy(np.cos(angle[:, 1::2])).float()
    return table


#: fairseq numbers the positions of a sentence from padding_idx + 1, and its dictionary's pad is 1
FAIRSEQ_FIRST_POSITION = 2


def fairseq_sinusoids(length: int, dim: int) -> Tensor:
    """fairseq's table [length, dim] (float32) as M2M100 and NLLB add it: row p is position p + 2 (fairseq
    numbers a sentence's tokens from padding_idx + 1), sines of the frequencies 10000^(-i/(d/2 - 1)) in
    the first half and their cosines in the second (other frequencies than the paper's 10000^(-2i/d)),
    a zero column last where d is odd. Computed as `transformers`' M2M100SinusoidalPositionalEmbedding
    computes it (float32 torch), so an imported model adds bit for bit what it adds."""
    half = dim // 2
    step = math.log(10000) / (half - 1) if half > 1 else 0.0
    freq = torch.exp(torch.arange(half, dtype=torch.int64).float() * -step)
    start = FAIRSEQ_FIRST_POSITION
    angle = torch.arange(start, start + length, dtype=torch.int64).float().unsqueeze(1) * freq.unsqueeze(0)
    table = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
    if dim % 2:
        table = torch.cat([table, torch.zeros(length, 1)], dim=1)
    return table


class LearnedPositions(nn.Module):
    """One learned vector per absolute position, up to ``max_positions``."""

    def __init__(self, dim: int, max_positions: int) -> None:
        super().__init__()
        self.max_positions = max_positions
        self.embedding = nn.Embedding(max_positions, dim)
        nn.init.normal_(self.embedding.weight, std=dim ** -0.5)

    def forward(self, length: int, offset: int = 0, device: torch.device | None = None) -> Tensor:
        if offset + length > self.max_positions:
            raise MtkitError(
                f"a sequence of {offset + length} tokens is longer than model.max_positions="
                f"{self.max_positions} (learned positions); split the input or retrain with a larger value"
            )
        return self.embedding.weight[offset: offset + length]


class RelativePositions(nn.Module):
    """Shaw, Uszkoreit & Vaswani (2018): learned a^K, a^V for distances clip(j - i, -δ, δ).

    One pair of tables per attention layer, shared by the heads (as in the paper). ``relative_index``
    maps (query i, key j) to a row of the tables; the attention adds q_i·a^K_ij to the score and
    Σ_j α_ij a^V_ij to the output.
    """

    def __init__(self, head_dim: int, max_distance: int) -> None:
        super().__init__()
        self.max_distance = max_distance
        self.key_table = nn.Embedding(2 * max_distance + 1, head_dim)
        self.value_table = nn.Embedding(2 * max_distance + 1, head_dim)
        nn.init.normal_(self.key_table.weight, std=head_dim ** -0.5)
        nn.init.normal_(self.value_table.weight, std=head_dim ** -0.5)

    def relative_index(self, q_len: int, k_len: int, q_offset: int, device: torch.device) -> Tensor:
        """[q_len, k_len] row indices for queries at q_offset… and keys at 0…k_len-1."""
        q_pos = torch.arange(q_offset, q_offset + q_len, device=device).unsqueeze(1)
        k_pos = torch.arange(k_len, device=device).unsqueeze(0)
        return (k_pos - q_pos).clamp(-self.max_distance, self.max_distance) + self.max_distance

    def key_scores(self, q: Tensor, index: Tensor) -> Tensor:
        """q [B, H, T, dk] → q_i·a^K_{ij} as [B, H, T, S] (one small matmul, then a gather)."""
        per_bucket = torch.matmul(q, self.key_table.weight.to(q.dtype).t())  # [B, H, T, 2δ+1]
        return per_bucket.gather(-1, index.expand(*q.shape[:2], *index.shape))

    def value_output(self, weights: Tensor, index: Tensor) -> Tensor:
        """weights [B, H, T, S] → Σ_j α_ij a^V_ij as [B, H, T, dk] (bucket the weights, then a matmul)."""
        buckets = weights.new_zeros(*weights.shape[:-1], self.value_table.num_embeddings)
        buckets.scatter_add_(-1, index.expand(*weights.shape[:2], *index.shape), weights)
        return torch.matmul(buckets, self.value_table.weight.to(weights.dtype))
