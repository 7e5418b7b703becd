"""``TrainState``: where a training run is, saved whole in checkpoint_last.pt and restored whole.

Everything a resumed run needs besides the model, optimizer, schedule, grad scaler and RNG states:
the update counter, the position in the data (epoch, next batch), time spent, the validation history
behind the kept step checkpoints, the best validation so far and the early-stopping count; and, for a
fine-tuned run (`mtkit.train.init_from`), where its LR schedule stands relative to its update counter.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from mtkit.errors import CheckpointError
from mtkit.metric import is_better


@dataclass
class Validation:
    """A scored validation: the update it was made at and its dev metric value."""

    step: int
    score: float


@dataclass
class TrainState:
    step: int = 0  # updates done
    epoch: int = 1  # the epoch in progress (1-based)
    batch: int = 0  # index of the next batch in that epoch, counted in batches of ``world_size`` ranks
    world_size: int = 1
    max_tokens: int = 0  # batching settings the position was counted under
    seed: int = 0
    elapsed: float = 0.0  # seconds of training before this process started
    history: list[dict[str, Any]] = field(default_factory=list)  # {"step", "score"} of kept step files
    best: Validation | None = None
    bad_validations: int = 0  # validations since the best (early stopping, plateau decay)
    last_valid: dict[str, Any] | None = None  # the last validation's full result
    validated_step: int = -1
    # the LR of update s is the schedule's value at s + lr_offset: a fine-tune that keeps the parent's
    # schedule but not its step counter continues the parent's LR curve (and vice versa restarts it)
    lr_offset: int = 0

    def record_validation(self, metric: str, score: float | None) -> bool:
        """Count a validation at the current step; True when it is the new best. A score that is
        missing or not finite is never best (a diverged model must not be picked)."""
        self.validated_step = self.step
        if score is None:
            return False
        if is_better(metric, score, self.best.score if self.best else None):
            self.best = Validation(self.step, score)
            self.bad_validations = 0
            return True
        self.bad_validations += 1
        return False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> TrainState:
        if not isinstance(raw, dict):
            raise CheckpointError(f"{where}: holds no training state; cannot resume")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(raw) - names
        if unknown:
            raise CheckpointError(f"{where}: unknown training state {sorted(unknown)} (written by a newer "
                                  "mtkit?)")
        state = cls(**raw)
        if isinstance(state.best, dict):
            state.best = Validation(int(state.best["step"]), float(state.best["score"]))
        return state
