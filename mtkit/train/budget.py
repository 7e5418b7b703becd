"""How many updates a budgeted run will make: the total a budget schedule (linear, cosine) decays over.

A run bounded by ``max_steps`` or ``max_epochs`` knows its total before it starts. A run bounded by
``max_time`` does not: its total is what the minutes left allow at the speed the run measures. The
estimate starts after a short probe (``PROBE_UPDATES`` updates, timed after the first
``SETTLE_UPDATES`` of this process, which pay one-off costs: allocations, kernel selection, CUDA
graph capture) and is redone at every log step, so it follows the machine's real speed as the run goes:

    updates left = (seconds left − one validation)
                   / (seconds per update + seconds per validation / validate_every)

Seconds per update are this process's training seconds (validation excluded) over its updates since
the probe began; seconds per validation the mean of the validations measured so far (none measured:
taken as 0 until the first, which then corrects the total). Where several bounds are set, the smallest
total wins. Every estimate moves the schedule's plan without a jump (`LRSchedule.plan`); the plan is
saved in checkpoints, so a resumed run continues the schedule it had at its last checkpoint, and a run
bounded by steps or epochs only has the same schedule with or without interruptions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: updates of each process whose time is not counted (start-up costs) and updates timed before the
#: first estimate of a time-budgeted run
SETTLE_UPDATES = 2
PROBE_UPDATES = 10


@dataclass
class BudgetEstimate:
    """One estimate of a run's total updates and what it was made from."""

    total: int
    seconds_per_update: float | None = None
    seconds_per_validation: float | None = None


class BudgetPlanner:
    """Estimates the total updates of a run from its bounds and, for max_time, its measured speed.

    ``fixed_total``: the total that max_steps / max_epochs give (None: no such bound);
    ``max_seconds``: max_time in seconds (0: none); ``validate_every``: updates between validations."""

    def __init__(self, fixed_total: int | None, max_seconds: float, validate_every: int):
        self.fixed_total = fixed_total
        self.max_seconds = max_seconds
        self.validate_every = validate_every
        self.mark: tuple[int, float] | None = None  # (update, training seconds) where timing started
        self.first_step: int | None = None  # the first update of this process
        self.valid_seconds = 0.0
        self.validations = 0

    @property
    def timed(self) -> bool:
        return self.max_seconds > 0

    def initial(self) -> BudgetEstimate | None:
        """The estimate before any update: a step or epoch bound's total (a time bound needs a probe)."""
        return BudgetEstimate(self.fixed_total) if self.fixed_total and not self.timed else None

    def note_validation(self, seconds: float) -> None:
        self.valid_seconds += seconds
        self.validations += 1

    def due(self, step: int, log_every: int) -> bool:
        """Whether update `step` re-estimates (the same answer on every rank: it depends on steps only)."""
        if not self.timed:
            return False
        if self.first_step is None:
            self.first_step = step
        probe_end = self.first_step - 1 + SETTLE_UPDATES + PROBE_UPDATES
        return step == probe_end or (step > probe_end and step % log_every == 0)

    def observe(self, step: int, train_seconds: float) -> None:
        """Called after every update with the process's training seconds so far (validation excluded)."""
        if self.first_step is None:
            self.first_step = step
        if self.mark is None and step >= self.first_step - 1 + SETTLE_UPDATES:
            self.mark = (step, train_seconds)

    def estimate(self, step: int, train_seconds: float, elapsed: float) -> BudgetEstimate | None:
        """The total updates of the run, as measured at update `step` (`elapsed`: the run's seconds so
        far, earlier processes and validations included). None: too early to tell."""
        if self.mark is None or step <= self.mark[0]:
            return None
        per_update = (train_seconds - self.mark[1]) / (step - self.mark[0])
        per_valid = self.valid_seconds / self.validations if self.validations else 0.0
        left = self.max_seconds - elapsed - per_valid  # the last validation runs after the last update
        cost = per_update + per_valid / self.validate_every
        more = max(0, math.floor(left / cost)) if cost > 0 else 0
        total = step + more
        if self.fixed_total:
            total = min(total, self.fixed_total)
        return BudgetEstimate(total, per_update, per_valid if self.validations else None)
