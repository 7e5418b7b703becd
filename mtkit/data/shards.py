"""Binarized corpora: one flat token array plus offsets per split and side, memory-mapped on read.

Layout in the data directory, for split in train/dev/test and side in src/tgt:
  {split}.{side}.bin   token ids (no BOS/EOS), dtype uint16 when the vocabulary fits, else int32
  {split}.{side}.idx   int64 offsets, n+1 entries: sentence i is bin[idx[i]:idx[i+1]]
  meta.json            vocabulary sizes, BPE model file names, dtype, sentence and token counts
Nothing is read into Python lists: training indexes the memmaps directly.
"""

from __future__ import annotations

import os
from array import array
from pathlib import Path

import numpy as np

from mtkit.data.meta import read_meta
from mtkit.errors import DataError


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.int32)


class ShardWriter:
    """Append sentences to a .bin file as they stream by; offsets are kept (8 bytes a sentence)."""

    def __init__(self, prefix: Path, dtype: np.dtype):
        self.prefix = Path(prefix)
        self.dtype = dtype
        # f-strings, not with_suffix: "train.src" already has a suffix that with_suffix would replace
        self._tmp_bin = Path(f"{self.prefix}.bin.tmp")
        self._bin = open(self._tmp_bin, "wb")  # noqa: SIM115 - stays open while sentences stream in
        self._offsets = array("q", [0])  # 8 bytes a sentence (a list of ints would take ~36)

    def add(self, ids: list[int]) -> None:
        self._bin.write(np.asarray(ids, dtype=self.dtype).tobytes())
        self._offsets.append(self._offsets[-1] + len(ids))

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @property
    def num_tokens(self) -> int:
        return self._offsets[-1]

    def close(self) -> None:
        self._bin.flush()
        os.fsync(self._bin.fileno())
        self._bin.close()
        tmp_idx = Path(f"{self.prefix}.idx.tmp")
        np.frombuffer(self._offsets, dtype=np.int64).tofile(tmp_idx)
        os.replace(self._tmp_bin, Path(f"{self.prefix}.bin"))
        os.replace(tmp_idx, Path(f"{self.prefix}.idx"))


class Shard:
    """Read-only, memory-mapped view of one split and side."""

    def __init__(self, prefix: Path, dtype: np.dtype):
        bin_path, idx_path = Path(f"{prefix}.bin"), Path(f"{prefix}.idx")
        for p in (bin_path, idx_path):
            if not p.is_file():
                raise DataError(f"missing shard file {p}: run `mtkit prepare` first")
        self.offsets = np.fromfile(idx_path, dtype=np.int64)
        n_tokens = int(self.offsets[-1]) if len(self.offsets) else 0
        if bin_path.stat().st_size != n_tokens * dtype.itemsize:
            raise DataError(f"{bin_path}: size does not match {idx_path} (truncated? re-run prepare)")
        self.tokens = (np.memmap(bin_path, dtype=dtype, mode="r") if n_tokens
                       else np.zeros(0, dtype=dtype))
        self.lengths = np.diff(self.offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]


class ParallelData:
    """Source and target shards of one split, with the metadata written by prepare."""

    def __init__(self, data_dir: str | Path, split: str):
        self.dir = Path(data_dir)
        self.meta = read_meta(self.dir)
        dtype = np.dtype(self.meta.dtype)
        self.src = Shard(self.dir / f"{split}.src", dtype)
        self.tgt = Shard(self.dir / f"{split}.tgt", dtype)
        if len(self.src) != len(self.tgt):
            raise DataError(f"{self.dir}: {split}.src and {split}.tgt hold different sentence counts")

    def __len__(self) -> int:
        return len(self.src)
