"""Which way is better for each dev metric: the one rule that ranks checkpoints, picks the best,
drives plateau decay and early stopping."""

from __future__ import annotations

import math

#: metrics where a larger value is better
HIGHER_IS_BETTER = {"bleu": True, "chrf": True, "loss": False, "ppl": False}


def is_better(metric: str, value: float | None, best: float | None) -> bool:
    """True when ``value`` beats ``best`` (any finite value beats no best yet). A missing or
    non-finite value never counts as better: a diverged model must not become "best"."""
    if value is None or not math.isfinite(value):
        return False
    if best is None:
        return True
    return value > best if HIGHER_IS_BETTER[metric] else value < best


def rank_key(metric: str, value: float) -> float:
    """A key that sorts best first under ``sorted(..., key=..., reverse=True)``."""
    return value if HIGHER_IS_BETTER[metric] else -value
