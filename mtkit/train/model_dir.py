"""The files of a model directory, apart from the checkpoints' contents.

``config.yaml``, ``meta.json`` and the BPE model(s) are written at the start so the Translator can
rebuild everything from the directory. Step checkpoints are kept by a simple rule: the best
``keep_best`` by the dev metric plus the last ``keep_last`` validations.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from mtkit.config import Config, save_config
from mtkit.data.shards import write_meta
from mtkit.textio import warn
from mtkit.train.checkpoint import checkpoint_step
from mtkit.train.schedules import HIGHER_IS_BETTER


def prepare_model_dir(cfg: Config, meta: dict[str, Any], model_dir: Path) -> None:
    """config.yaml, meta.json and the BPE model(s): everything the Translator needs besides weights."""
    model_dir.mkdir(parents=True, exist_ok=True)
    save_config(cfg, model_dir / "config.yaml")
    write_meta(model_dir, meta)
    data_dir = Path(cfg.data.dir)
    for key in ("src_bpe", "tgt_bpe"):
        name = meta.get(key)
        if not name:
            continue
        if not (data_dir / name).is_file():
            warn(f"BPE model {data_dir / name} not found; {model_dir} will lack it")
            continue
        for source in (data_dir / name, (data_dir / name).with_suffix(".vocab")):
            target = model_dir / source.name
            if source.is_file() and (not target.exists() or source.resolve() != target.resolve()):
                shutil.copyfile(source, target)


def step_path(model_dir: Path, step: int) -> Path:
    return model_dir / f"checkpoint_step{step}.pt"


def remove_checkpoints(model_dir: Path, newer_than: int | None = None) -> None:
    """Delete a previous run's checkpoints (all of them, or only step files after `newer_than`)."""
    if newer_than is None:
        for name in ("checkpoint_last.pt", "checkpoint_best.pt"):
            (model_dir / name).unlink(missing_ok=True)
    for path in model_dir.glob("checkpoint_step*.pt"):
        step = checkpoint_step(path)
        if step is not None and (newer_than is None or step > newer_than):
            path.unlink(missing_ok=True)


def steps_to_keep(history: list[dict[str, Any]], metric: str, keep_best: int, keep_last: int) -> set[int]:
    """history: {"step", "score"} per validation (score None without a dev set), oldest first."""
    scored = [h for h in history if h["score"] is not None]
    sign = 1.0 if HIGHER_IS_BETTER[metric] else -1.0
    ranked = sorted(scored, key=lambda h: (sign * h["score"], h["step"]), reverse=True)
    keep = {h["step"] for h in ranked[:keep_best]}
    if not scored:  # nothing to rank: keep the most recent ones
        keep_last = max(keep_last, keep_best)
    if keep_last:
        keep |= {h["step"] for h in history[-keep_last:]}
    return keep


def copy_atomically(source: Path, target: Path) -> None:
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)
