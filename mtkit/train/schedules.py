"""Learning-rate schedules, as plain functions of the update number (1-based) plus plateau state.

With ``lr`` the configured peak (for noam: the scale factor), ``w`` the warm-up steps, ``d`` the model
width and ``s`` the update number:

- ``noam``          lr · d^−0.5 · min(s^−0.5, s · w^−1.5)                (Vaswani et al. 2017)
- ``inverse_sqrt``  lr · min(s / w, sqrt(w / s));  with w = 0: lr · s^−0.5
- ``constant``      lr · min(1, s / w);            with w = 0: lr
- ``plateau``       lr · min(1, s / w) · factor^k, k = number of decays so far: the LR is multiplied by
                    ``plateau_factor`` after ``plateau_patience`` validations without improvement of
                    ``valid_metric`` (counting restarts after each decay).

``min_lr`` bounds the LR from below once warm-up is over (it never shortens the warm-up).
Whether a validation improved is decided once, by the trainer (`TrainState.record_validation`), and
passed to ``observe``. The schedule's state (only plateau has any) is saved in checkpoints.
"""

from __future__ import annotations

import math
from typing import Any

from mtkit.config.experiment import TrainingConfig


class LRSchedule:
    """Computes the LR for update ``step``; ``observe`` is told after each validation whether the dev
    metric improved (used by plateau)."""

    def __init__(self, cfg: TrainingConfig, model_dim: int):
        self.kind = cfg.schedule
        self.lr = cfg.lr
        self.warmup = cfg.warmup_steps
        self.min_lr = cfg.min_lr
        self.model_dim = model_dim
        self.factor = cfg.plateau_factor
        self.patience = cfg.plateau_patience
        # plateau state: the decay so far and the validations without improvement since the last change
        self.scale = 1.0
        self.bad = 0

    def _warmup_factor(self, step: int) -> float:
        return min(1.0, step / self.warmup) if self.warmup > 0 else 1.0

    def __call__(self, step: int) -> float:
        step = max(1, step)
        if self.kind == "noam":
            peak_at = step ** -0.5 if self.warmup == 0 else min(step ** -0.5, step * self.warmup ** -1.5)
            lr = self.lr * self.model_dim ** -0.5 * peak_at
        elif self.kind == "inverse_sqrt":
            lr = (self.lr * step ** -0.5 if self.warmup == 0
                  else self.lr * min(step / self.warmup, math.sqrt(self.warmup / step)))
        elif self.kind == "constant":
            lr = self.lr * self._warmup_factor(step)
        elif self.kind == "plateau":
            lr = self.lr * self._warmup_factor(step) * self.scale
        else:  # pragma: no cover - config validation rejects other values
            raise ValueError(f"unknown schedule {self.kind}")
        if step >= self.warmup:
            lr = max(lr, self.min_lr)
        return lr

    def observe(self, improved: bool) -> None:
        """Record a validation; plateau decays the LR when it stalls."""
        if improved:
            self.bad = 0
            return
        self.bad += 1
        if self.kind == "plateau" and self.bad > self.patience:
            self.scale *= self.factor
            self.bad = 0

    def state_dict(self) -> dict[str, Any]:
        return {"scale": self.scale, "bad": self.bad}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scale = float(state["scale"])
        self.bad = int(state["bad"])
