"""Token-budget batches over binary shards: length-sorted, seeded, resumable, DDP-sharded.

A batch's cost is its padded size, ``n_sentences × max(src_len, tgt_len + 1)`` (the +1 is the BOS of
``tgt_in`` / EOS of ``tgt_out``), and it never exceeds ``max_tokens`` (a single sentence longer than
the budget forms a batch of its own). Sentences are sorted by that length, with ties broken by a
permutation drawn from (seed, epoch), so batches hold similar lengths and padding stays small while
their members still change from epoch to epoch. The order of the batches is then shuffled from the
same (seed, epoch) generator.

With ``buckets`` (the default on a GPU, ``training.shape_buckets``) every batch is padded to one of a
small set of shapes: its length is rounded up to a bucket (``bucket_length``: multiples of 8 up to 64,
then steps of an eighth of the next power of two) and its row count is the bucket's fixed
``max_tokens // length``, the last batch of a bucket filled up with empty (all-PAD) rows. Sentences
are grouped by bucket instead of sorted one by one. A GPU then sees ~16 shapes instead of thousands,
so each kernel choice, allocation and captured CUDA graph is made once per shape, not once per batch.

A multilingual model's training split holds each corpus once, and its repetitions by temperature
(`mtkit.data.corpora`) are drawn per epoch (``draws``: each corpus's sentences ``times`` over, whole passes
plus a sample drawn from the same (seed, epoch) generator), so every epoch has the temperature's
shares and the partial pass of a corpus differs from epoch to epoch.

Resumption needs no saved list: the position is (epoch, index of the next batch), and
``epoch_batches(epoch)`` rebuilds the identical list from the seed. Only the length arrays are held
in memory (numpy, 4 bytes a sentence), with the batch lists (4 bytes a sentence); tokens are read
from the shard files when a batch is collated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from mtkit.data.corpora import epoch_draw, train_draws
from mtkit.data.shards import ParallelData
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID

if TYPE_CHECKING:  # batches are tensors; packing (the ct2 engine's use) needs only numpy
    import torch


def batch_cost_lengths(src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> np.ndarray:
    """Per-sentence length that a batch's padded size is counted in: max(src, tgt + 1) (4 bytes a
    sentence: a corpus of 15M pairs keeps 60 MB of them)."""
    return np.maximum(src_lengths.astype(np.uint32), tgt_lengths.astype(np.uint32) + 1)


def bucket_length(lengths: np.ndarray | int) -> np.ndarray:
    """The padded length each length is rounded up to: a multiple of max(8, next power of two / 8),
    so 1-8 → 8, 9-16 → 16, …, 57-64 → 64, 65-80 → 80, …, 225-256 → 256 (≤ 12.5% padding above 64,
    a multiple of 8 everywhere, as tensor cores like)."""
    x = np.maximum(np.asarray(lengths, dtype=np.int64), 1)
    power = np.left_shift(1, np.ceil(np.log2(x)).astype(np.int64))
    step = np.maximum(8, power // 8)
    return (x + step - 1) // step * step


def bucket_rows(length: int, max_tokens: int) -> int:
    """Rows of every batch padded to ``length``: as many as the token budget holds (at least one)."""
    return max(1, max_tokens // int(length))


def pack_bucketed(order: np.ndarray, lengths: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    """Cut `order` into batches whose members share one bucket (``bucket_length``) and number at most
    ``bucket_rows`` of it; members keep their relative order within a bucket."""
    buckets = bucket_length(lengths[order])
    by_bucket = np.argsort(buckets, kind="stable")
    grouped, sorted_buckets = order[by_bucket], buckets[by_bucket]
    starts = np.flatnonzero(np.diff(sorted_buckets, prepend=-1))
    ends = np.append(starts[1:], len(grouped))
    batches: list[np.ndarray] = []
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        rows = bucket_rows(int(sorted_buckets[start]), max_tokens)
        batches.extend(grouped[i:min(i + rows, end)] for i in range(start, end, rows))
    return batches


def pack_sorted(order: np.ndarray, lengths: np.ndarray, max_tokens: int) -> list[np.ndarray]:
    """Cut `order` (indices sorted by ascending `lengths`) into consecutive batches whose
    ``count × longest`` stays within ``max_tokens``. Loops over batches, not sentences."""
    sorted_len = lengths[order]
    n = len(order)
    batches: list[np.ndarray] = []
    i = 0
    while i < n:
        # lengths only grow from i on, so no batch starting at i can hold more than this many
        upper = min(n, i + max(1, max_tokens // max(1, int(sorted_len[i]))))
        window = sorted_len[i:upper]
        cost = np.arange(1, len(window) + 1, dtype=np.int64) * window
        fits = int(np.searchsorted(cost, max_tokens, side="right"))  # cost is non-decreasing
        end = i + max(1, fits)
        batches.append(order[i:end])
        i = end
    return batches


def padding_fraction(batches: list[np.ndarray], src_lengths: np.ndarray, tgt_lengths: np.ndarray) -> float:
    """Share of padding in the padded src and tgt_in tensors of these batches."""
    real = padded = 0
    for b in batches:
        s, t = src_lengths[b].astype(np.int64), tgt_lengths[b].astype(np.int64) + 1
        real += int(s.sum()) + int(t.sum())
        padded += len(b) * (int(s.max()) + int(t.max()))
    return 1.0 - real / padded if padded else 0.0


def _index_dtype(n: int) -> type:
    """The narrowest integer type that indexes ``n`` sentences (4 bytes below 2**31)."""
    return np.int32 if n < 2**31 else np.int64


class TokenBatchSampler:
    """Deterministic per-epoch batch lists for training (or a fixed, unshuffled list for dev).

    ``rank``/``world_size`` shard the list for DistributedDataParallel: the list is padded by
    repeating its first batches until its length divides by ``world_size``, and rank r takes
    batches r, r + world_size, ... so every rank runs the same number of steps.
    """

    def __init__(self, src_lengths: np.ndarray, tgt_lengths: np.ndarray, max_tokens: int, seed: int = 1,
                 shuffle: bool = True, rank: int = 0, world_size: int = 1, buckets: bool = False,
                 draws: Sequence[tuple[int, int, float]] = ()):
        if max_tokens < 1:
            raise ValueError("max_tokens must be positive")
        self.src_lengths = np.asarray(src_lengths)  # as compact as the shards keep them
        self.tgt_lengths = np.asarray(tgt_lengths)
        self.lengths = batch_cost_lengths(self.src_lengths, self.tgt_lengths)
        self.max_tokens = max_tokens
        self.seed = seed
        self.shuffle = shuffle
        self.rank = rank
        self.world_size = world_size
        self.buckets = buckets
        self.draws = list(draws)  # (first, end, times) of each corpus: sentences drawn per epoch
        self._cache: tuple[int, list[np.ndarray]] | None = None

    def __len__(self) -> int:
        """Batches per epoch for this rank (the count does not depend on the epoch's shuffle)."""
        return len(self.epoch_batches(0))

    def _all_batches(self, epoch: int) -> list[np.ndarray]:
        pack = pack_bucketed if self.buckets else pack_sorted
        if not self.shuffle:
            order = np.argsort(self.lengths, kind="stable").astype(_index_dtype(len(self.lengths)))
            return pack(order, self.lengths, self.max_tokens)
        rng = np.random.default_rng([self.seed, epoch])
        # rng.permutation(n) drawn into 4-byte indices (the same permutation, half the memory)
        perm = self._drawn(rng) if self.draws else np.arange(len(self.lengths),
                                                             dtype=_index_dtype(len(self.lengths)))
        rng.shuffle(perm)
        order = perm if self.buckets else perm[np.argsort(self.lengths[perm], kind="stable")]
        batches = pack(order, self.lengths, self.max_tokens)
        return [batches[i] for i in rng.permutation(len(batches))]

    def _drawn(self, rng: np.random.Generator) -> np.ndarray:
        """The epoch's sentences: each corpus ``times`` over (its whole passes, then a sample of it
        without replacement for the fraction); sentences outside every corpus once."""
        dtype = _index_dtype(len(self.lengths))
        parts, covered = [], np.zeros(len(self.lengths), dtype=bool)
        for first, end, times in self.draws:
            covered[first:end] = True
            parts.append(epoch_draw(first, end, times, rng, dtype))
        parts.append(np.flatnonzero(~covered).astype(dtype))
        return np.concatenate(parts)

    def batch_shape(self, batch: np.ndarray) -> tuple[int, int] | None:
        """(rows, length) that `batch` is padded to under buckets; None without them."""
        if not self.buckets:
            return None
        length = int(bucket_length(int(self.lengths[batch].max())))
        return bucket_rows(length, self.max_tokens), length

    def shapes(self, epoch: int = 0) -> set[tuple[int, int]]:
        """The distinct padded shapes of this rank's batches of `epoch` (buckets only)."""
        return {shape for b in self.epoch_batches(epoch) if (shape := self.batch_shape(b)) is not None}

    def epoch_batches(self, epoch: int) -> list[np.ndarray]:
        """This rank's batches (arrays of sentence indices) for `epoch`, always the same list."""
        if self._cache is not None and self._cache[0] == epoch:
            return self._cache[1]
        batches = self._all_batches(epoch)
        if self.world_size > 1 and batches:
            short = (-len(batches)) % self.world_size
            batches = batches + [batches[i % len(batches)] for i in range(short)]
            batches = batches[self.rank::self.world_size]
        self._cache = (epoch, batches)
        return batches

    def padding_fraction(self, epoch: int = 0) -> float:
        batches = self.epoch_batches(epoch)
        if not self.buckets:
            return padding_fraction(batches, self.src_lengths, self.tgt_lengths)
        real = padded = 0
        for b in batches:
            rows, length = self.batch_shape(b)  # type: ignore[misc]
            real += int(self.src_lengths[b].sum(dtype=np.int64)) + len(b)
            real += int(self.tgt_lengths[b].sum(dtype=np.int64))
            padded += 2 * rows * length
        return 1.0 - real / padded if padded else 0.0


@dataclass
class Batch:
    """A collated batch. ``ids`` are the sentence indices in the split (to restore order)."""

    ids: np.ndarray
    src: torch.Tensor  # [B, S] PAD-padded
    tgt_in: torch.Tensor  # [B, T] BOS + tgt
    tgt_out: torch.Tensor  # [B, T] tgt + EOS
    num_tgt_tokens: int  # non-padding positions of tgt_out (EOS included)
    num_src_tokens: int

    def to(self, device: torch.device | str, non_blocking: bool = False) -> Batch:
        return Batch(self.ids, self.src.to(device, non_blocking=non_blocking),
                     self.tgt_in.to(device, non_blocking=non_blocking),
                     self.tgt_out.to(device, non_blocking=non_blocking),
                     self.num_tgt_tokens, self.num_src_tokens)

    def pin_memory(self) -> Batch:
        return Batch(self.ids, self.src.pin_memory(), self.tgt_in.pin_memory(), self.tgt_out.pin_memory(),
                     self.num_tgt_tokens, self.num_src_tokens)


def collate(data: ParallelData, ids: np.ndarray, shape: tuple[int, int] | None = None) -> Batch:
    """Read sentences `ids` from the shards into padded tensors (src; BOS+tgt; tgt+EOS; where each
    stored target begins with a decoder-side language tag, tag+tgt and tgt+EOS); with
    ``shape`` = (rows, length) every tensor is [rows, length] (rows past the sentences all PAD)."""
    import torch

    src_len = data.src.lengths[ids].astype(np.int64)
    tgt_len = data.tgt.lengths[ids].astype(np.int64)
    n = len(ids)
    if shape is None:
        src_shape, tgt_shape = (n, max(1, int(src_len.max()))), (n, int(tgt_len.max()) + 1)
    else:
        rows, length = shape
        if rows < n or length < max(int(src_len.max()), int(tgt_len.max()) + 1):
            raise ValueError(f"batch of {n} sentences does not fit shape {shape}")
        src_shape = tgt_shape = (rows, length)
    src = np.full(src_shape, PAD_ID, dtype=np.int64)
    tgt_in = np.full(tgt_shape, PAD_ID, dtype=np.int64)
    tgt_out = np.full_like(tgt_in, PAD_ID)
    if data.decoder_tagged:  # each stored target begins with its language tag: it stands where BOS would
        for row, i in enumerate(ids):
            s, t = data.src[i], data.tgt[i]
            src[row, : len(s)] = s
            tgt_in[row, : len(t)] = t
            tgt_out[row, : len(t) - 1] = t[1:]
        tgt_out[np.arange(n), tgt_len - 1] = EOS_ID
        return Batch(np.asarray(ids), torch.from_numpy(src), torch.from_numpy(tgt_in),
                     torch.from_numpy(tgt_out), int(tgt_len.sum()), int(src_len.sum()))
    tgt_in[:n, 0] = BOS_ID
    for row, i in enumerate(ids):
        s, t = data.src[i], data.tgt[i]
        src[row, : len(s)] = s
        tgt_in[row, 1 : len(t) + 1] = t
        tgt_out[row, : len(t)] = t
    tgt_out[np.arange(n), tgt_len] = EOS_ID
    return Batch(np.asarray(ids), torch.from_numpy(src), torch.from_numpy(tgt_in), torch.from_numpy(tgt_out),
                 int(tgt_len.sum()) + n, int(src_len.sum()))


def sampler_for(data: ParallelData, max_tokens: int, seed: int = 1, shuffle: bool = True,
                rank: int = 0, world_size: int = 1, buckets: bool = False) -> TokenBatchSampler:
    """The training sampler of ``data``: a multilingual split's corpora drawn per epoch by temperature."""
    draws = train_draws(data.meta.languages, len(data)) if shuffle else []
    return TokenBatchSampler(data.src.lengths, data.tgt.lengths, max_tokens, seed, shuffle, rank, world_size,
                             buckets, draws)
