"""Vocabulary shortlists: which target subwords a sentence's translation may use, from its source.

A small student spends much of each decoding step on the output layer (d_model × the whole target
vocabulary). A lexical shortlist limits that product to the subwords the source makes likely: the
``frequent`` most frequent target subwords, always, plus for each source subword the ``per_source``
target subwords that most often appear in the translations of sentences that contain it (p(t | s)
by sentence co-occurrence in the training corpus, the frequent ones left out since they are in
anyway). CTranslate2 takes it as a vocabulary map (``vmap.txt`` in the model directory, used with
``translate_batch(use_vmap=True)``): for a batch it allows the union of the candidates of every source
subword in the batch, the always-included ones, and unk/bos/eos.

The shortlist can only remove words: where the translation the full model would choose lies inside
the list, greedy search finds the same one (each step's best subword is among the allowed), and where
it does not, the model chooses among the allowed subwords — a different translation, never broken
text. `mtkit export --shortlist K` writes it (docs/export.md); `coverage` measures how much of a
reference fits in it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mtkit.data.meta import read_meta
from mtkit.data.shards import Shard
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

SPECIAL = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)
_MERGE_EVERY = 20_000  # sentences between merges of the co-occurrence counts (bounds memory)


@dataclass
class Shortlist:
    """``always``: target ids allowed in every sentence; ``candidates``: source id → target ids."""

    always: list[int]
    candidates: dict[int, list[int]] = field(default_factory=dict)
    sentences: int = 0  # training pairs counted

    def allowed(self, source: Iterable[int]) -> set[int]:
        """The target ids a sentence (or a batch: all its source ids) may use."""
        out = set(self.always) | {UNK_ID, BOS_ID, EOS_ID}
        for s in source:
            out.update(self.candidates.get(int(s), ()))
        return out


def _sentences(prefix: Path, dtype: np.dtype, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """All tokens of a shard and the offsets of its first ``limit`` sentences (0 = all), read and
    checked by the shard reader."""
    shard = Shard(prefix, dtype)
    lengths = shard.lengths[:limit] if limit else shard.lengths
    offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    return shard.all_tokens()[: int(offsets[-1])].astype(np.int64), offsets


def _merge(keys: list[np.ndarray], counts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    k = np.concatenate(keys)
    c = np.concatenate(counts)
    uniq, inverse = np.unique(k, return_inverse=True)
    return uniq, np.bincount(inverse, weights=c).astype(np.int64)


def build_shortlist(data_dir: str | Path, per_source: int = 50, frequent: int = 100,
                    max_sentences: int = 0) -> Shortlist:
    """Count the training split of a prepared data directory (its first ``max_sentences`` pairs; 0 =
    all) into a shortlist."""
    if per_source < 1 or frequent < 0:
        raise ValueError("per_source must be at least 1 and frequent at least 0")
    data_dir = Path(data_dir)
    meta = read_meta(data_dir)
    dtype = np.dtype(meta.dtype)
    src_tokens, src_off = _sentences(data_dir / "train.src", dtype, max_sentences)
    tgt_tokens, tgt_off = _sentences(data_dir / "train.tgt", dtype, max_sentences)
    n = min(len(src_off), len(tgt_off)) - 1
    n_tgt = meta.tgt_vocab_size
    special = np.array(SPECIAL, dtype=np.int64)
    freq = np.bincount(tgt_tokens[: int(tgt_off[n])], minlength=n_tgt)
    freq[special] = 0
    always = [int(t) for t in np.argsort(-freq, kind="stable")[:frequent] if freq[t] > 0]
    skip = np.zeros(n_tgt, dtype=bool)
    skip[special] = True
    skip[always] = True
    src_count = np.zeros(meta.src_vocab_size, dtype=np.int64)  # sentences holding each source id
    merged: tuple[np.ndarray, np.ndarray] | None = None
    keys: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    for i in range(n):
        s = np.unique(src_tokens[src_off[i] : src_off[i + 1]])
        t = np.unique(tgt_tokens[tgt_off[i] : tgt_off[i + 1]])
        src_count[s] += 1
        t = t[~skip[t]]
        if len(s) and len(t):
            keys.append((s[:, None] * n_tgt + t[None, :]).ravel())
            counts.append(np.ones(len(keys[-1]), dtype=np.int64))
        if (i + 1) % _MERGE_EVERY == 0 and keys:
            if merged is not None:
                keys.append(merged[0])
                counts.append(merged[1])
            merged, keys, counts = _merge(keys, counts), [], []
    if merged is not None:
        keys.append(merged[0])
        counts.append(merged[1])
    if not keys:
        return Shortlist(always, {}, n)
    pair_keys, pair_counts = _merge(keys, counts)
    src_ids, tgt_ids = pair_keys // n_tgt, pair_keys % n_tgt
    prob = pair_counts / np.maximum(src_count[src_ids], 1)
    # by source id, then best p(t|s) first (ties: the more frequent pair, then the lower target id)
    order = np.lexsort((tgt_ids, -pair_counts, -prob, src_ids))
    src_sorted, tgt_sorted = src_ids[order], tgt_ids[order]
    starts = np.flatnonzero(np.r_[True, src_sorted[1:] != src_sorted[:-1]])
    ends = np.r_[starts[1:], len(src_sorted)]
    candidates = {int(src_sorted[a]): [int(x) for x in tgt_sorted[a : min(b, a + per_source)]]
                  for a, b in zip(starts, ends, strict=True) if int(src_sorted[a]) not in SPECIAL}
    return Shortlist(always, candidates, n)


def write_vmap(shortlist: Shortlist, src_pieces: Sequence[str], tgt_pieces: Sequence[str],
               path: str | Path) -> int:
    """Write CTranslate2's vocabulary map: a line ``<TAB>always…`` (the empty source n-gram: always
    included), then ``source_piece<TAB>target pieces`` per source subword. Pieces with white space
    cannot be written in this format and are left out (sentencepiece writes spaces as ▁, so there are
    normally none). Returns the number of source lines."""

    def fine(piece: str) -> bool:
        return bool(piece) and not any(c.isspace() for c in piece)

    lines = ["\t" + " ".join(tgt_pieces[t] for t in shortlist.always if fine(tgt_pieces[t]))]
    for s in sorted(shortlist.candidates):
        targets = [tgt_pieces[t] for t in shortlist.candidates[s] if fine(tgt_pieces[t])]
        if fine(src_pieces[s]) and targets:
            lines.append(f"{src_pieces[s]}\t{' '.join(targets)}")
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines) - 1


def coverage(shortlist: Shortlist, pairs: Iterable[tuple[Sequence[int], Sequence[int]]]) -> float:
    """The fraction of target subwords (of (source ids, target ids) pairs, each pair on its own) that
    the pair's shortlist allows: 1.0 means every reference could be produced word for word."""
    inside = total = 0
    for src, tgt in pairs:
        allowed = shortlist.allowed(src)
        inside += sum(1 for t in tgt if t in allowed)
        total += len(tgt)
    return inside / total if total else 1.0


__all__ = ["Shortlist", "build_shortlist", "coverage", "write_vmap"]
