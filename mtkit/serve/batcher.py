"""Batching across requests: concurrent requests for one model are translated together.

A model translates a batch of 64 sentences in far less than 64 times one sentence's time, so a server
that answered each request on its own would reach a fraction of `mtkit translate`'s speed as soon as
several clients call it. Each model has one worker thread and a queue. A request puts a ``Job`` (its
sentences and search settings) in the queue; the worker takes the oldest job, then waits at most
``max_wait`` seconds for more jobs with the same settings until ``max_sentences`` are gathered, and
translates them all in one `Translator.translate_chunk` call (which sorts them by length and cuts
token-budget batches as `mtkit translate` does). Each job's future then gets its own slice of the
results: answers never mix, because a job's sentences stay together and in order.

The queue is bounded in sentences (``capacity``): a request that does not fit is refused at once
(the server answers 503 with Retry-After) instead of letting memory grow. A job whose caller gave up
(timeout, disconnect) before the worker reached it is skipped.
"""

from __future__ import annotations

import collections
import concurrent.futures
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mtkit.decode.translation import Translation


class QueueFull(Exception):
    """The model's queue holds ``capacity`` sentences already."""


@dataclass(frozen=True)
class Settings:
    """What must be equal for two jobs to share a batch."""

    beam_size: int
    nbest: int = 1
    attention: bool = False
    glossary: bool = True  # the server's --glossary applies; off on the legs of a pivot (app.translate_route)


@dataclass
class Job:
    sentences: list[str]
    settings: Settings
    constraints: list[list[str]] | None = None  # per sentence: target strings it must contain
    future: concurrent.futures.Future = field(default_factory=concurrent.futures.Future)
    queued_at: float = field(default_factory=time.monotonic)


TranslateFn = Callable[[list[str], Settings, "list[list[str]] | None"], list[Translation]]


@dataclass
class BatchStats:
    """What the worker did, for /metrics (read without locking: monotonic counters)."""

    batches: int = 0
    sentences: int = 0
    jobs: int = 0
    skipped: int = 0
    translating: int = 0  # sentences of the batch in the model now
    batch_sizes: collections.deque = field(default_factory=lambda: collections.deque(maxlen=1000))


class Batcher:
    """One model's queue and worker thread (see the module docstring)."""

    def __init__(self, translate: TranslateFn, max_wait: float = 0.005, max_sentences: int = 256,
                 capacity: int = 10_000, name: str = "model"):
        self.translate = translate
        self.max_wait, self.max_sentences, self.capacity = max_wait, max_sentences, capacity
        self.stats = BatchStats()
        self._jobs: collections.deque[Job] = collections.deque()
        self._queued = 0  # sentences in _jobs
        self._lock = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"mtkit-serve-{name}", daemon=True)
        self._thread.start()

    @property
    def queued_sentences(self) -> int:
        return self._queued

    def submit(self, sentences: list[str], settings: Settings,
               constraints: list[list[str]] | None = None) -> concurrent.futures.Future:
        """Queue ``sentences`` (with ``constraints``: per sentence, target strings its translation must
        contain); the future's result is one Translation per sentence, in order."""
        job = Job(list(sentences), settings, constraints)
        if not job.sentences:
            job.future.set_result([])
            return job.future
        with self._lock:
            if self._stopping:
                raise QueueFull("the server is shutting down")
            if self._queued + len(job.sentences) > self.capacity and self._queued > 0:
                raise QueueFull(f"{self._queued} sentences are waiting (capacity {self.capacity})")
            self._jobs.append(job)
            self._queued += len(job.sentences)
            self._lock.notify()
        return job.future

    def close(self, timeout: float | None = None) -> None:
        """Translate what is queued, then stop the worker."""
        with self._lock:
            self._stopping = True
            self._lock.notify()
        self._thread.join(timeout)

    # ---------------------------------------------------------------------------------- the worker
    def _take(self) -> list[Job] | None:
        """The next group of jobs with one settings, oldest first; None when stopping and empty."""
        with self._lock:
            while not self._jobs:
                if self._stopping:
                    return None
                self._lock.wait()
            first = self._jobs.popleft()
            group, count = [first], len(first.sentences)
            deadline = time.monotonic() + self.max_wait
            while count < self.max_sentences:
                match = next((j for j in self._jobs if j.settings == first.settings
                              and count + len(j.sentences) <= self.max_sentences), None)
                if match is not None:
                    self._jobs.remove(match)
                    group.append(match)
                    count += len(match.sentences)
                    continue
                left = deadline - time.monotonic()
                if left <= 0 or self._stopping:
                    break
                self._lock.wait(left)
            self._queued -= count
            return group

    def _run(self) -> None:
        while (group := self._take()) is not None:
            live = [job for job in group if job.future.set_running_or_notify_cancel()]
            self.stats.skipped += len(group) - len(live)
            if not live:
                continue
            sentences = [s for job in live for s in job.sentences]
            constraints = None
            if any(job.constraints for job in live):
                constraints = [c for job in live for c in (job.constraints or [[] for _ in job.sentences])]
            self.stats.translating = len(sentences)
            try:
                results = self.translate(sentences, live[0].settings, constraints)
            except BaseException as exc:  # every waiting request learns of it
                for job in live:
                    job.future.set_exception(exc)
                continue
            finally:
                self.stats.translating = 0
            self.stats.batches += 1
            self.stats.jobs += len(live)
            self.stats.sentences += len(sentences)
            self.stats.batch_sizes.append(len(sentences))
            start = 0
            for job in live:
                job.future.set_result(results[start:start + len(job.sentences)])
                start += len(job.sentences)
