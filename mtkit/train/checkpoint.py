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


def capture_rng_state() -> dict[str, Any]:
    """torch (CPU and CUDA), Python `random` and numpy generator states as tensors and plain lists,
    so they survive ``weights_only=True`` loading."""
    import random

    import numpy as np

    py_version, py_internal, py_gauss = random.getstate()
    np_name, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "python": [py_version, list(py_internal), py_gauss],
        "numpy": [np_name, torch.from_numpy(np.asarray(np_keys, dtype=np.int64)), int(np_pos),
                  int(np_has_gauss), float(np_gauss)],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict[str, Any]) -> None:
    import random

    import numpy as np

    torch.set_rng_state(state["torch"].cpu())
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, gauss_np = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss_np))
    if "cuda" in state and torch.cuda.is_available():
        cuda_states = [s.cpu() for s in state["cuda"]]
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)


def checkpoint_step(path: str | Path) -> int | None:
    """The update number in a `checkpoint_step{N}.pt` file name."""
    name = Path(path).name
    if name.startswith("checkpoint_step") and name.endswith(".pt"):
        digits = name[len("checkpoint_step"):-3]
        if digits.isdigit():
            return int(digits)
    return None
