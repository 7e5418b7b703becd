"""The files of a Hugging Face model directory, read for `mtkit import-hf` (`mtkit.interop.hf` for
MarianMT and Pegasus, `mtkit.interop.hf_m2m100` for M2M100 and NLLB): a JSON object, the weights
(safetensors, or a PyTorch file loaded without running its pickles), a sentencepiece model's own
pieces. Library: each bad file is one line naming it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from mtkit.errors import CheckpointError, DataError, MtkitError
from mtkit.interop.spm_proto import CONTROL, UNKNOWN, read_pieces

INSTALL = "pip install 'mtkit[hf]'"


def _safetensors() -> Any:
    try:
        import safetensors.torch
    except ImportError:
        raise MtkitError(f"reading and writing Hugging Face models needs safetensors: {INSTALL}") from None
    return safetensors.torch


def read_json(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable JSON file ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(value, dict):
        raise DataError(f"{path}: expected a JSON object")
    return value


def read_weights(source: Path) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors: safetensors, or a PyTorch file loaded without running its pickles."""
    file = source / "model.safetensors"
    if file.is_file():
        try:
            return _safetensors().load_file(str(file))
        except MtkitError:
            raise
        except Exception as exc:  # noqa: BLE001 - untrusted bytes: one line, never a traceback
            raise CheckpointError(f"{file}: not a readable safetensors file ({str(exc)[:120]})") from None
    file = source / "pytorch_model.bin"
    if not file.is_file():
        sharded = any(source.glob("*.index.json"))
        raise CheckpointError(f"{source}: no model.safetensors or pytorch_model.bin"
                              + (" (sharded checkpoints are not supported)" if sharded else ""))
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001
        raise CheckpointError(f"{file}: refused or unreadable with weights_only=True "
                              f"({str(exc).strip().splitlines()[0][:120]})") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{file}: not a state dict")
    return state


def own_pieces(data: bytes, where: str) -> list[str]:
    """The pieces a sentencepiece model segments text into (not its control and unknown pieces)."""
    return [p.piece for p in read_pieces(data, where) if p.type not in (CONTROL, UNKNOWN)]


__all__ = ["INSTALL", "own_pieces", "read_json", "read_weights"]
