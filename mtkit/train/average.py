"""`mtkit average`: the parameter mean of the last or best N checkpoints of a model directory.

Candidates are the ``checkpoint_step{N}.pt`` files the trainer keeps (the best ``keep_best`` by the
dev metric plus the last ``keep_last``). ``--last N`` takes the N with the highest update numbers;
``--best N`` ranks them by the dev metric stored inside each checkpoint. The result is an ordinary
checkpoint (model, config, vocab) that the translator loads like any other.
"""

from __future__ import annotations

from pathlib import Path

import torch

from mtkit.checkpoint import (
    AVERAGE,
    checkpoint_step,
    load_checkpoint,
    rank_best_first,
    save_checkpoint,
    step_checkpoints,
)
from mtkit.errors import CheckpointError, MtkitError
from mtkit.textio import warn


def average_state_dicts(states: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Element-wise mean of floating tensors (accumulated in float64); other tensors from the last."""
    if not states:
        raise MtkitError("average: no checkpoints to average")
    keys = list(states[-1].keys())
    for i, s in enumerate(states):
        if list(s.keys()) != keys:
            raise CheckpointError(f"average: checkpoint {i + 1} holds different parameters from the others")
    out: dict[str, torch.Tensor] = {}
    for key in keys:
        last = states[-1][key]
        if not torch.is_floating_point(last):
            out[key] = last.clone()
            continue
        total = torch.zeros_like(last, dtype=torch.float64)
        for s in states:
            if s[key].shape != last.shape:
                raise CheckpointError(f"average: parameter {key} has different shapes across checkpoints")
            total += s[key].to(torch.float64)
        out[key] = (total / len(states)).to(last.dtype)
    return out


def select_checkpoints(model_dir: Path, last: int | None, best: int | None) -> list[Path]:
    if (last is None) == (best is None):
        raise MtkitError("average: give exactly one of --last N or --best N")
    n = last if last is not None else best
    assert n is not None
    if n < 1:
        raise MtkitError("average: N must be at least 1")
    candidates = step_checkpoints(model_dir)
    if not candidates:
        raise MtkitError(f"average: no checkpoint_step*.pt files in {model_dir}")
    if last is not None:
        chosen = candidates[-n:]
    else:
        scored: list[tuple[int, float]] = []
        metric = None
        by_step = {checkpoint_step(p): p for p in candidates}
        for step, path in by_step.items():
            valid = (load_checkpoint(path).get("metrics") or {}).get("valid") or {}
            metric = metric or valid.get("metric")
            if metric is None or valid.get("score") is None:
                raise CheckpointError(f"{path}: no validation score inside; use --last instead")
            scored.append((step or 0, float(valid["score"])))
        assert metric is not None
        chosen = [by_step[s] for s in sorted(rank_best_first(scored, metric)[:n])]
    if len(chosen) < n:
        warn(f"average: only {len(chosen)} checkpoint(s) available, averaging those")
    return chosen


def average_checkpoints(model_dir: str | Path, last: int | None = None, best: int | None = None,
                        output: str | Path | None = None) -> Path:
    """Average the chosen checkpoints; returns the path written (default model_dir/checkpoint_avg.pt)."""
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise MtkitError(f"average: model directory not found: {model_dir}")
    paths = select_checkpoints(model_dir, last, best)
    states = [load_checkpoint(p) for p in paths]
    newest = states[-1]
    averaged = {
        "model": average_state_dicts([s["model"] for s in states]),
        "config": newest["config"],
        "vocab": newest.get("vocab"),
        "step": newest.get("step"),
        "averaged_from": [p.name for p in paths],
    }
    out = Path(output) if output is not None else model_dir / AVERAGE
    save_checkpoint(averaged, out)
    return out
