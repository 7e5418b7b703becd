"""Checkpoints: written atomically, loaded without executing pickled code.

A checkpoint is a dict of tensors and plain Python values (str, int, float, bool, list, dict, tuple,
None), saved by torch.save and read with ``weights_only=True``: a tampered file cannot run code.
Keys: "model" (state dict), "config" (resolved config as a dict), "vocab" (meta.json of the data),
and for training state "optimizer", "scheduler", "step", "epoch", "rng", "data_state", "metrics".
"""

from __future__ import annotations

import os
import pickle
import zipfile
from pathlib import Path
from typing import Any

import torch

from mtkit.errors import CheckpointError


def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over the target."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    try:  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except (RuntimeError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{path}: corrupt or truncated checkpoint ({reason[:200]})") from None
    if not isinstance(state, dict) or "model" not in state or "config" not in state:
        raise CheckpointError(f"{path}: not an mtkit checkpoint (no model/config inside)")
    return state
