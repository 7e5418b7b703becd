"""An exported model directory: what `mtkit export --format ct2` writes beside CTranslate2's own files
(the manifest, ``mtkit_export.json``: the model's config and vocabulary meta, how text is tokenized),
written and read here in one place, and how such a directory is recognised. Nothing here imports
ctranslate2 except `require_ctranslate2`, so a directory can be recognised and its manifest read
without it.

Library, not stage, though it lives with the exporter: `mtkit.interop.export` writes what the ct2 engine
(`mtkit.decode.ct2`) reads, and the library imports no stage.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from mtkit import __version__
from mtkit.config.experiment import Config, apply_overrides, from_dict, to_dict
from mtkit.data.meta import DataMeta
from mtkit.errors import CheckpointError, ConfigError, DataError, MtkitError
from mtkit.textio import warn
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

MANIFEST = "mtkit_export.json"
VMAP = "vmap.txt"  # the vocabulary map (shortlist) `mtkit export --shortlist` writes (mtkit.decode.shortlist)
FORMAT = "mtkit-ct2"
FORMAT_VERSION = 2  # 2: the manifest's config holds data.max_len (version 1 exports lacked it)


def require_ctranslate2() -> ModuleType:
    """The ctranslate2 module, or one line saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise MtkitError("the ct2 engine needs the optional package ctranslate2: "
                         "pip install 'mtkit[ct2]' (or pip install 'ctranslate2>=4.5,<5')") from None
    return ctranslate2


def is_exported(path: str | Path) -> bool:
    """True for a directory written by `mtkit export --format ct2` (checked without ctranslate2)."""
    path = Path(path)
    return path.is_dir() and (path / MANIFEST).is_file() and (path / "model.bin").is_file()


@dataclass
class ExportManifest:
    """What ``mtkit_export.json`` records beside the CTranslate2 files."""

    config: Config  # the exported model's config (its decoding section is the default search)
    meta: DataMeta  # vocabulary sizes, languages, sentencepiece file names (beside the manifest)
    max_positions: int | None  # longest sequence the exported position table covers (None: any)
    quantization: str
    checkpoint: str
    step: int | None


def new_manifest(config: Config, meta: DataMeta, checkpoint: Path, quantization: str,
                 max_positions: int | None, tgt_pieces: list[str]) -> dict[str, Any]:
    """The manifest of a model exported from ``checkpoint`` (``tgt_pieces``: its target vocabulary)."""
    stored = to_dict(config)
    return {
        "format": FORMAT, "version": FORMAT_VERSION, "mtkit_version": __version__,
        "checkpoint": str(checkpoint.resolve()), "quantization": quantization, "max_positions": max_positions,
        "tokenize": {
            "method": "sentencepiece", "source_model": meta.src_bpe, "target_model": meta.tgt_bpe,
            "source_bos": False, "source_eos": config.model.source_eos,
            "decoder_start": tgt_pieces[BOS_ID],
            "how": "encode each source line with source_model into pieces (no BOS/EOS added); translate "
                   "the pieces; decode the output pieces (without </s>) with target_model",
        },
        "special_tokens": {"pad": tgt_pieces[PAD_ID], "unk": tgt_pieces[UNK_ID], "bos": tgt_pieces[BOS_ID],
                           "eos": tgt_pieces[EOS_ID]},
        "meta": meta.to_dict(),
        # what changes a translation travels with the model: the architecture, the decoding defaults and
        # the input limit (data.max_len: longer sentences are cut into parts, as the torch engine does);
        # the rest of the data section names the user's training files and stays behind
        "config": {"model": stored["model"], "decoding": stored["decoding"],
                   "data": {"max_len": stored["data"]["max_len"]}},
    }


def write_manifest(directory: Path, manifest: dict[str, Any]) -> None:
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                      encoding="utf-8")


def manifest_json(directory: Path) -> dict[str, Any]:
    """The manifest as written (for the exporter's later additions: the shortlist, one direction)."""
    return json.loads((directory / MANIFEST).read_text(encoding="utf-8"))


def read_manifest(directory: str | Path, overrides: Sequence[str] = ()) -> ExportManifest:
    """Read and check the manifest of an exported directory; ``overrides`` are ``decoding.key=value``
    strings applied over the stored decoding section (as for a model directory)."""
    path = Path(directory) / MANIFEST
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable export manifest ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an mtkit export manifest")
    if raw.get("version") not in (1, FORMAT_VERSION):
        raise CheckpointError(f"{path}: export format version {raw.get('version')} is not "
                              f"{FORMAT_VERSION}; export the model again with this mtkit")
    try:
        if raw["version"] == 1 or "max_len" not in dict(raw["config"]).get("data", {}):
            warn(f"{path}: written by an older mtkit without the model's input limit (data.max_len), so "
                 "long sentences are cut at decoding.max_input_tokens only, unlike the model directory; "
                 "export the model again")
        config = from_dict(apply_overrides(raw["config"], list(overrides)), stored=True)
        meta = DataMeta.from_dict(raw["meta"], str(path))
        positions = raw.get("max_positions")
        return ExportManifest(config, meta, int(positions) if positions is not None else None,
                              str(raw["quantization"]), str(raw["checkpoint"]), raw.get("step"))
    except (KeyError, TypeError, ValueError, DataError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise CheckpointError(f"{path}: corrupt export manifest ({exc})") from None
