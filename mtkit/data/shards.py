"""Binarized corpora: one flat token array plus offsets per split and side.

Layout in the data directory, for split in train/dev/test and side in src/tgt:
  {split}.{side}.bin   token ids (no BOS/EOS), dtype uint16 when the vocabulary fits, else int32
  {split}.{side}.idx   int64 offsets, n+1 entries: sentence i is bin[idx[i]:idx[i+1]]
  meta.json            vocabulary sizes, BPE model file names, dtype, sentence and token counts
Nothing is read into Python lists: training holds each sentence's length and reads its tokens
from the .bin file when a batch is collated.
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
    """Read-only view of one split and side: compact lengths in memory, tokens read from the file.

    Memory per sentence is its length (2 bytes while sentences are shorter than 65,536 tokens) plus
    one offset per block of ``BLOCK`` sentences; the tokens of a sentence are read (``pread``) when a
    batch is collated. Nothing grows with the corpus but those few bytes a sentence: not a
    memory map either, whose touched pages count in the process's resident size (training on a large
    corpus through a map grew by gigabytes within a few hundred updates).
    """

    BLOCK = 64  # sentences per stored offset

    def __init__(self, prefix: Path, dtype: np.dtype):
        bin_path, idx_path = Path(f"{prefix}.bin"), Path(f"{prefix}.idx")
        for p in (bin_path, idx_path):
            if not p.is_file():
                raise DataError(f"missing shard file {p}: run `mtkit prepare` first")
        self.dtype = np.dtype(dtype)
        count = idx_path.stat().st_size // 8 - 1
        if count < 0:
            raise DataError(f"{idx_path}: empty offsets file (re-run prepare)")
        offsets = np.memmap(idx_path, dtype=np.int64, mode="r")  # read once, block by block
        self.block_starts = np.asarray(offsets[:: self.BLOCK], dtype=np.int64).copy()
        lengths = np.empty(count, dtype=np.uint32)
        for start in range(0, count, 1 << 20):
            part = np.diff(np.asarray(offsets[start : min(count, start + (1 << 20)) + 1]))
            if len(part) and part.min() < 0:
                raise DataError(f"{idx_path}: offsets go backwards at sentence {start + int(part.argmin())}")
            lengths[start : start + len(part)] = part
        n_tokens = int(offsets[-1])
        del offsets
        short = not len(lengths) or lengths.max() <= np.iinfo(np.uint16).max
        self.lengths = lengths.astype(np.uint16) if short else lengths  # 2 bytes a sentence if they fit
        if bin_path.stat().st_size != n_tokens * self.dtype.itemsize:
            raise DataError(f"{bin_path}: size does not match {idx_path} (truncated? re-run prepare)")
        self.num_tokens = n_tokens
        self._path = bin_path
        self._fd = os.open(bin_path, os.O_RDONLY)

    def __del__(self) -> None:
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)

    def __len__(self) -> int:
        return len(self.lengths)

    def start(self, i: int) -> int:
        """Offset (in tokens) of sentence ``i``."""
        block = i // self.BLOCK
        return int(self.block_starts[block]) + int(self.lengths[block * self.BLOCK : i].sum(dtype=np.int64))

    def __getitem__(self, i: int) -> np.ndarray:
        if not 0 <= i < len(self):
            raise IndexError(f"sentence {i} of {len(self)}")
        size = int(self.lengths[i]) * self.dtype.itemsize
        data = os.pread(self._fd, size, self.start(i) * self.dtype.itemsize) if size else b""
        if len(data) != size:
            raise DataError(f"{self._path}: short read at sentence {i} (file changed? re-run prepare)")
        return np.frombuffer(data, dtype=self.dtype)

    def all_tokens(self) -> np.ndarray:
        """Every token of the split, in order (for checks and small splits)."""
        return np.fromfile(self._path, dtype=self.dtype)


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

    @property
    def decoder_tagged(self) -> bool:
        """Whether each target begins with its language tag, the decoder's first input in place of
        BOS (a multilingual model with data.language_tag decoder: `mtkit.data.corpora`)."""
        return self.meta.languages.get("tag") == "decoder"

    def __len__(self) -> int:
        return len(self.src)
