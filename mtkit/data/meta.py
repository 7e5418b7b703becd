"""``meta.json``: what `mtkit prepare` knows about a data directory (vocabularies, BPE model files,
token dtype, per-split counts, the input fingerprint), read and written in this one place.

A model directory holds the same record (it is also stored inside every checkpoint as "vocab"), so a
model can be rebuilt and its text encoded without the data directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtkit.errors import DataError

META_FILE = "meta.json"


@dataclass
class DataMeta:
    src_vocab_size: int
    tgt_vocab_size: int
    src_bpe: str  # file name of the source sentencepiece model, beside meta.json
    tgt_bpe: str  # the same name as src_bpe for a joint vocabulary
    joint: bool = False
    dtype: str = "uint16"  # numpy dtype of the token shards
    src_lang: str = "src"
    tgt_lang: str = "tgt"
    splits: dict[str, dict[str, Any]] = field(default_factory=dict)  # per split: sentences, tokens, dropped
    fingerprint: str = ""
    mtkit_version: str = ""
    # a multilingual model's languages (mtkit.data.corpora.languages): tag, src, tgt, pairs; {} for one pair
    languages: dict[str, Any] = field(default_factory=dict)
    # two BPE models (src_bpe, tgt_bpe) numbering one vocabulary, so the ids mean the same on both sides
    # and the embeddings may be shared: an imported MarianMT model's (`mtkit import-hf`)
    shared_ids: bool = False

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> DataMeta:
        """Validate a meta record; ``where`` names its file (or checkpoint) in errors."""
        if not isinstance(raw, dict):
            raise DataError(f"{where}: corrupt metadata (not a JSON object)")
        names = {f.name for f in dataclasses.fields(cls)}
        for key in ("src_vocab_size", "tgt_vocab_size", "src_bpe", "tgt_bpe"):
            if key not in raw:
                raise DataError(f"{where}: metadata lacks '{key}'")
        try:
            meta = cls(**{k: v for k, v in raw.items() if k in names})
            meta.src_vocab_size, meta.tgt_vocab_size = int(meta.src_vocab_size), int(meta.tgt_vocab_size)
        except (TypeError, ValueError) as exc:
            raise DataError(f"{where}: corrupt metadata ({exc})") from None
        return meta

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def bpe_files(self) -> list[str]:
        """The sentencepiece model file(s), once each."""
        return list(dict.fromkeys([self.src_bpe, self.tgt_bpe]))

    def one_vocabulary(self) -> bool:
        """Source and target ids mean the same pieces: what sharing the embeddings needs."""
        return self.joint or self.shared_ids

    def same_vocabulary(self, other: DataMeta) -> bool:
        return (self.src_vocab_size, self.tgt_vocab_size, self.joint) == \
            (other.src_vocab_size, other.tgt_vocab_size, other.joint)


def read_meta(directory: str | Path) -> DataMeta:
    path = Path(directory) / META_FILE
    if not path.is_file():
        raise DataError(f"{path} not found: run `mtkit prepare CONFIG` first")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: corrupt metadata ({exc})") from None
    return DataMeta.from_dict(raw, str(path))


def write_meta(directory: str | Path, meta: DataMeta) -> None:
    """Atomically (temporary file + rename): its presence marks a data directory complete."""
    path = Path(directory) / META_FILE
    tmp = path.with_name(f".{META_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(meta.to_dict(), indent=2, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)
