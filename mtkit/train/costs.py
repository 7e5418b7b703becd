"""Sentence-level costs of MRT candidates (`mtkit.train.mrt`), optionally in worker processes.

Scoring a candidate with sacrebleu is Python, and an MRT update scores every candidate of every
sentence (thousands per update): on a GPU it takes as long as the candidates' search (measured in
docs/results.md). On a GPU machine the CPU cores are otherwise idle, so ``workers`` processes score
the sentences in parallel; the result is the same list in the same order, so a run scores
identically with or without them.

This module imports sacrebleu only (no torch), so a worker process starts quickly.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

_METRICS: dict[str, Any] = {}  # per process: the sacrebleu metric of each name, built once


def _metric(name: str) -> Any:
    if name not in _METRICS:
        from sacrebleu.metrics import BLEU, CHRF

        _METRICS[name] = BLEU(effective_order=True) if name == "bleu" else CHRF()
    return _METRICS[name]


def sentence_costs(name: str, hypotheses: list[str], reference: str) -> list[float]:
    """1 − sentence BLEU/100 (exponential smoothing, effective order) or 1 − sentence chrF/100 of each
    hypothesis against one reference, all detokenised text."""
    metric = _metric(name)
    return [1.0 - metric.sentence_score(h, [reference]).score / 100.0 for h in hypotheses]


def _costs_of(name: str, work: list[tuple[list[str], str]]) -> list[list[float]]:
    return [sentence_costs(name, hyps, ref) for hyps, ref in work]


def auto_workers(device_type: str, local_processes: int = 1) -> int:
    """Worker processes for ``mrt_cost_workers: 0``: on a GPU, the CPU cores this process's share of
    the machine leaves after its own two (main and batch-preparing threads), at most 8; on a CPU none
    (there the cores train)."""
    if device_type != "cuda":
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    spare = cores // max(1, local_processes) - 2
    return max(0, min(8, spare))


class SentenceCost:
    """The costs (`sentence_costs`, ``metric``) of a batch's candidates against their references;
    ``workers`` > 1 scores the batch's sentences in that many processes."""

    def __init__(self, metric: str, workers: int = 0):
        self.metric = metric
        self.workers = workers if workers > 1 else 0
        self._pool: ProcessPoolExecutor | None = None

    def batch(self, candidates: list[list[str]], references: list[str]) -> list[list[float]]:
        """The costs of each sentence's candidates, in order."""
        work = list(zip(candidates, references, strict=True))
        if not self.workers or len(work) < 2 * self.workers:
            return _costs_of(self.metric, work)
        if self._pool is None:  # spawn: the trainer's threads and CUDA context stay out of the workers
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        size = -(-len(work) // self.workers)
        parts = [work[i: i + size] for i in range(0, len(work), size)]
        return [c for part in self._pool.map(_costs_of, [self.metric] * len(parts), parts) for c in part]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


__all__ = ["SentenceCost", "auto_workers", "sentence_costs"]
