"""Learning-rate schedules, as plain functions of the update number (1-based) plus plateau state and,
for the budget schedules, a plan.

With ``lr`` the configured peak (for noam: the scale factor), ``w`` the warm-up steps, ``d`` the model
width and ``s`` the update number:

- ``noam``          lr · d^−0.5 · min(s^−0.5, s · w^−1.5)                (Vaswani et al. 2017)
- ``inverse_sqrt``  lr · min(s / w, sqrt(w / s));  with w = 0: lr · s^−0.5
- ``constant``      lr · min(1, s / w);            with w = 0: lr
- ``plateau``       lr · min(1, s / w) · factor^k, k = number of decays so far: the LR is multiplied by
                    ``plateau_factor`` after ``plateau_patience`` validations without improvement of
                    ``valid_metric`` (counting restarts after each decay).
- ``linear``,       the budget schedules: a linear warm-up to lr, then a decay that reaches ``min_lr``
  ``cosine``        exactly when the run's budget ends: lr · (1 − q) or lr · (1 + cos πq) / 2, where
                    q ∈ [0, 1] is the share of the decay done. Linear (or cosine) decay to zero is what
                    budgeted-training studies found best when the number of updates is fixed in
                    advance (Li, Yumer and Ramanan, ICLR 2020).

- a cooldown   any other schedule with ``cooldown_fraction`` c > 0: its own formula until the last
                share c of the budget, then that formula times (1 − q) (+ min_lr · q), q going from 0 to
                1 over the cooldown: the LR reaches min_lr at the end of the budget while the run keeps
                the schedule's shape before (warm-up-stable-decay with ``constant``: Hägele et al. 2024,
                "Scaling laws and compute-optimal training beyond fixed training durations").

A budget schedule or a cooldown needs to know how many updates the run will make: ``plan(step,
total)`` tells it (`mtkit.train.budget` estimates the total of a time-budgeted run from its measured
speed, and re-estimates it as the run goes). A new plan never makes the LR jump: once the decay has
begun, q keeps its value at the update where the plan changes and from there moves linearly to 1 at the
new total; before, the decay's start moves with the total. With ``warmup_fraction`` the warm-up of
linear/cosine is that share of the planned total (the first plan may shorten or lengthen a warm-up in
progress, never below the updates already made). Until the first plan, the warm-up ramp runs towards
``warmup_steps`` (and a cooldown has not begun). The plan is part of the schedule's state, saved in
checkpoints.

``min_lr`` bounds the LR from below once warm-up is over (it never shortens the warm-up).
Whether a validation improved is decided once, by the trainer (`TrainState.record_validation`), and
passed to ``observe``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from mtkit.config.experiment import BUDGET_SCHEDULES, TrainingConfig


@dataclass
class DecayPlan:
    """Where a decay to the budget's end stands: the update after which it starts (linear/cosine: the end
    of warm-up; a cooldown: the update before its first), the planned total, and its anchor (the update
    ``anchor`` at which the decay share was ``anchor_progress``; linear from there to 1 at ``total``)."""

    start: int
    total: int
    anchor: int
    anchor_progress: float = 0.0

    def progress(self, step: int) -> float:
        """q: the share of the decay done after update `step` (0 before it starts, 1 from `total` on)."""
        if step <= self.anchor:
            return self.anchor_progress if step >= self.start else 0.0
        span = max(1, self.total - self.anchor)
        return min(1.0, self.anchor_progress + (1.0 - self.anchor_progress) * (step - self.anchor) / span)


class LRSchedule:
    """Computes the LR for update ``step``; ``observe`` is told after each validation whether the dev
    metric improved (used by plateau); ``plan`` sets the number of updates a budget schedule decays over."""

    def __init__(self, cfg: TrainingConfig, model_dim: int):
        self.kind = cfg.schedule
        self.lr = cfg.lr
        self.warmup = cfg.warmup_steps
        self.warmup_fraction = cfg.warmup_fraction
        self.cooldown = cfg.cooldown_fraction
        self.min_lr = cfg.min_lr
        self.model_dim = model_dim
        self.factor = cfg.plateau_factor
        self.patience = cfg.plateau_patience
        # plateau state: the decay so far and the validations without improvement since the last change
        self.scale = 1.0
        self.bad = 0
        self.decay: DecayPlan | None = None  # the plan of a decay to the budget's end, once known

    @property
    def budgeted(self) -> bool:
        """Whether the LR depends on the budget (it needs a plan): linear, cosine, or a cooldown."""
        return self.kind in BUDGET_SCHEDULES or self.cooldown > 0

    def _warmup_factor(self, step: int) -> float:
        return min(1.0, step / self.warmup) if self.warmup > 0 else 1.0

    def warmup_steps(self) -> int:
        """The warm-up in force: the plan's for a planned linear/cosine schedule, else warmup_steps."""
        if self.kind in BUDGET_SCHEDULES and self.decay is not None:
            return self.decay.start
        return self.warmup

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
        elif self.kind in BUDGET_SCHEDULES:
            return self._budget_lr(step)
        else:  # pragma: no cover - config validation rejects other values
            raise ValueError(f"unknown schedule {self.kind}")
        if step >= self.warmup:
            lr = max(lr, self.min_lr)
        if self.cooldown > 0 and self.decay is not None:
            q = self.decay.progress(step)
            lr = lr * (1.0 - q) + self.min_lr * q
        return lr

    def _budget_lr(self, step: int) -> float:
        warmup = self.warmup_steps()
        if step < warmup or self.decay is None:  # warming up (before the first plan: towards warmup_steps)
            return self.lr * (min(1.0, step / warmup) if warmup > 0 else 1.0)
        q = self.decay.progress(step)
        shape = 1.0 - q if self.kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * q))
        return self.min_lr + (self.lr - self.min_lr) * shape if self.lr > self.min_lr else self.lr

    def plan(self, step: int, total: int) -> DecayPlan:
        """Decay to min_lr at update `total`, continuing from update `step` without a jump (see the
        module docstring). A total at or below `step` ends the decay at the next update."""
        total = max(int(total), step + 1)
        old = self.decay
        start = self._decay_start(step, total, old)
        if step < start:
            self.decay = DecayPlan(start=start, total=total, anchor=start, anchor_progress=0.0)
        else:
            progress = old.progress(step) if old is not None else 0.0
            self.decay = DecayPlan(start=start, total=total, anchor=step, anchor_progress=progress)
        return self.decay

    def _decay_start(self, step: int, total: int, old: DecayPlan | None) -> int:
        """The update after which the decay of a plan for `total`, made at update `step`, starts: where it
        started if it has; else the end of warm-up (linear, cosine) or of the stable part (a cooldown),
        never before `step` and never at or after `total`."""
        if old is not None and step >= old.start:
            return old.start
        if self.kind in BUDGET_SCHEDULES:
            start = round(self.warmup_fraction * total) if self.warmup_fraction > 0 else self.warmup
        else:
            start = max(self.warmup, total - round(self.cooldown * total))
        return min(max(start, step), total - 1) if step < total - 1 else step

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
        return {"scale": self.scale, "bad": self.bad,
                "decay": asdict(self.decay) if self.decay is not None else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scale = float(state["scale"])
        self.bad = int(state["bad"])
        decay = state.get("decay")  # absent in checkpoints of mtkit before the budget schedules
        self.decay = DecayPlan(**decay) if decay else None
