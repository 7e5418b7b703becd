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
    """Append sentences to a .bin file and their offsets to an .idx file as they stream by: memory
    holds one small block of offsets, whatever the number of sentences (8 bytes each in the file)."""

    _BLOCK = 1 << 16  # offsets buffered between writes

    def __init__(self, prefix: Path, dtype: np.dtype):
        self.prefix = Path(prefix)
        self.dtype = dtype
        # f-strings, not with_suffix: "train.src" already has a suffix that with_suffix would replace
        self._tmp_bin = Path(f"{self.prefix}.bin.tmp")
        self._tmp_idx = Path(f"{self.prefix}.idx.tmp")
        self._bin = open(self._tmp_bin, "wb")  # noqa: SIM115 - stays open while sentences stream in
        self._idx = open(self._tmp_idx, "wb")  # noqa: SIM115
        self._pending = array("q", [0])  # offsets not yet written
        self._count = 0
        self._tokens = 0

    def add(self, ids: list[int]) -> None:
        self._bin.write(np.asarray(ids, dtype=self.dtype).tobytes())
        self._tokens += len(ids)
        self._count += 1
        self._pending.append(self._tokens)
        if len(self._pending) >= self._BLOCK:
            self._flush_offsets()

    def _flush_offsets(self) -> None:
        self._idx.write(self._pending.tobytes())  # native byte order, int64, as np.fromfile reads it
        self._pending = array("q")

    def __len__(self) -> int:
        return self._count

    @property
    def num_tokens(self) -> int:
        return self._tokens

    def close(self) -> None:
        self._flush_offsets()
        for f in (self._bin, self._idx):
            f.flush()
            os.fsync(f.fileno())
            f.close()
        os.replace(self._tmp_bin, Path(f"{self.prefix}.bin"))
        os.replace(self._tmp_idx, Path(f"{self.prefix}.idx"))


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
