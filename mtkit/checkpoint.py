"""The model directory: its file names, atomic checkpoint writes, safe loading, and which step
checkpoints to keep.

A model directory holds everything `Translator` needs: ``config.yaml`` (the resolved config),
``meta.json`` (vocabularies, see `mtkit.data.meta`), the sentencepiece model(s), and checkpoints:
``checkpoint_last.pt`` (with the training state), ``checkpoint_best.pt``, ``checkpoint_step{N}.pt``
(the best ``keep_best`` by the dev metric plus the last ``keep_last``) and ``checkpoint_avg.pt``.

A checkpoint is a dict of tensors and plain Python values (str, int, float, bool, list, dict, tuple,
None), saved by torch.save and read with ``weights_only=True``: a tampered file cannot run code.
Keys: "model" (state dict), "config" (resolved config as a dict), "vocab" (meta.json of the data),
"step", "epoch", "metrics" {"valid": ...}; checkpoint_last.pt adds "optimizer", "scheduler", "scaler",
"rng" and "train_state" (`mtkit.train.state.TrainState`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pickle
import shutil
import socket
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from mtkit.errors import CheckpointError
from mtkit.metric import rank_key

METRICS_FILE = "metrics.jsonl"
LAST = "checkpoint_last.pt"
BEST = "checkpoint_best.pt"
AVERAGE = "checkpoint_avg.pt"
_STEP_PREFIX = "checkpoint_step"


# ------------------------------------------------------------------------------------------- names
def step_path(model_dir: Path, step: int) -> Path:
    return Path(model_dir) / f"{_STEP_PREFIX}{step}.pt"


def checkpoint_step(path: str | Path) -> int | None:
    """The update number in a ``checkpoint_step{N}.pt`` file name."""
    name = Path(path).name
    if name.startswith(_STEP_PREFIX) and name.endswith(".pt"):
        digits = name[len(_STEP_PREFIX):-3]
        if digits.isdigit():
            return int(digits)
    return None


def step_checkpoints(model_dir: Path) -> list[Path]:
    """``checkpoint_step{N}.pt`` files, oldest update first."""
    found = [(checkpoint_step(p), p) for p in Path(model_dir).glob(f"{_STEP_PREFIX}*.pt")]
    return [p for step, p in sorted((s, p) for s, p in found if s is not None)]


def resolve_checkpoint(model: str | Path, checkpoint: str = "best") -> tuple[Path, Path]:
    """(checkpoint file, model directory) for a model directory or a checkpoint file; ``checkpoint``
    is best, last, or a file (absolute, or relative to the model directory)."""
    from mtkit.textio import warn

    path = Path(model)
    if path.is_file():
        return path, path.parent
    if not path.is_dir():
        raise CheckpointError(f"model not found: {path} (expected a model directory or a checkpoint file)")
    if checkpoint in ("best", "last"):
        file = path / (BEST if checkpoint == "best" else LAST)
        if not file.is_file() and checkpoint == "best" and (path / LAST).is_file():
            warn(f"{path}: no {BEST}, using {LAST}")
            file = path / LAST
        if not file.is_file():
            raise CheckpointError(f"{path}: no checkpoint_{checkpoint}.pt in the model directory")
        return file, path
    file = Path(checkpoint)
    if not file.is_file() and (path / checkpoint).is_file():
        file = path / checkpoint
    return file, path


# ---------------------------------------------------------------------------------- save and load
def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    """Write to a temporary file in the same directory, fsync, then rename over the target: a kill or
    a full disk leaves the previous checkpoint whole and no temporary file behind."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:  # torch.save reports a failed write as RuntimeError
        tmp.unlink(missing_ok=True)
        raise CheckpointError(f"cannot write {path}: {_write_failure(exc, path.parent)}") from None
    try:  # make the rename itself durable
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def _write_failure(exc: BaseException, directory: Path) -> str:
    """Why a write failed, in words: torch.save's own message for a full disk is "unexpected pos"."""
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        free = None
    if getattr(exc, "errno", None) == errno.ENOSPC or (free is not None and free < 16 * 2**20):
        return "no space left on device (the previous checkpoint is kept)"
    return getattr(exc, "strerror", None) or _first_line(exc)


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Read a checkpoint with ``weights_only=True``: tensors and plain values only, so a tampered file
    is refused rather than run. Any file that is not an mtkit checkpoint is one clear error."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    if not zipfile.is_zipfile(path):  # torch.save writes a zip archive; text, random bytes … are not
        with open(path, "rb") as f:
            if f.read(4) == b"PK\x03\x04":  # the archive's start without its end: cut short
                raise CheckpointError(f"{path}: corrupt or truncated checkpoint (the archive is cut short)")
        raise CheckpointError(f"{path}: not an mtkit checkpoint (not a PyTorch checkpoint archive)")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as exc:
        if "weights only load failed" in str(exc).lower():
            raise CheckpointError(f"{path}: refused: it holds pickled objects other than tensors and plain "
                                  "values, which could run code (not an mtkit checkpoint, or tampered "
                                  "with)") from None
        raise CheckpointError(f"{path}: corrupt or truncated checkpoint ({_first_line(exc)})") from None
    except Exception as exc:  # noqa: BLE001 - untrusted bytes: every failure is "corrupt", never a traceback
        raise CheckpointError(f"{path}: corrupt or truncated checkpoint ({_first_line(exc)})") from None
    if not isinstance(state, dict) or "model" not in state or "config" not in state:
        raise CheckpointError(f"{path}: not an mtkit checkpoint (no model/config inside)")
    return state


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]


# -------------------------------------------------------------------------------------- RNG state
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


def copy_atomically(source: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)


def remove_checkpoints(model_dir: Path, newer_than: int | None = None) -> None:
    """Delete a previous run's checkpoints (all of them, or only step files after ``newer_than``)."""
    if newer_than is None:
        for name in (LAST, BEST):
            (Path(model_dir) / name).unlink(missing_ok=True)
    for path in step_checkpoints(model_dir):
        step = checkpoint_step(path)
        if step is not None and (newer_than is None or step > newer_than):
            path.unlink(missing_ok=True)


# ------------------------------------------------------------------------------------ best-k ranking
def rank_best_first(scored: Sequence[tuple[int, float]], metric: str) -> list[int]:
    """Steps of (step, score) pairs, best score first; ties go to the later step."""
    ranked = sorted(scored, key=lambda item: (rank_key(metric, item[1]), item[0]), reverse=True)
    return [step for step, _ in ranked]


def steps_to_keep(history: list[dict[str, Any]], metric: str, keep_best: int, keep_last: int) -> set[int]:
    """history: {"step", "score"} per validation (score None without a dev set), oldest first."""
    scored = [(h["step"], h["score"]) for h in history if h["score"] is not None]
    keep = set(rank_best_first(scored, metric)[:keep_best])
    if not scored:  # nothing to rank: keep the most recent ones
        keep_last = max(keep_last, keep_best)
    if keep_last:
        keep |= {h["step"] for h in history[-keep_last:]}
    return keep


# ------------------------------------------------------------------------------------------- lock
LOCK_FILE = ".lock"


@contextlib.contextmanager
def locked(model_dir: Path, what: str = "training") -> Iterator[None]:
    """Hold an advisory lock on a model directory for a block: a second `mtkit train` on the same
    directory stops at once and says which process holds it. The kernel drops the lock when the
    process dies (kill -9 included), so nothing is ever left to clean up."""
    model_dir = Path(model_dir)
    model_dir.mkdir(parents=True, exist_ok=True)
    path = model_dir / LOCK_FILE
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no advisory locks
        yield
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            raise CheckpointError(f"{model_dir} is in use by {holder}; wait for it to finish or "
                                  "train into another training.model_dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{what} (pid {os.getpid()} on {socket.gethostname()})".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
