"""Work done ahead on a background thread: the next batches are read, collated and pinned while the
accelerator computes the current update.

On a GPU an update of transformer-small takes a few milliseconds, about as long as collating its
batch in Python (reading ~160 sentences from the shards, padding, pinning). Done in line, the GPU
waits for the host every update; done here, the host work overlaps the GPU's. The thread only runs
an iterator the caller gives it, so the order of the items (and with it resumption) is the caller's.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

_DONE = object()


class Prefetcher(Generic[T]):
    """Iterates over ``source`` on a daemon thread, at most ``depth`` items ahead of the consumer.

    An exception raised by ``source`` is raised again by ``__next__`` in the consumer's thread.
    ``close`` stops the thread (it may have made up to ``depth`` items nobody takes)."""

    def __init__(self, source: Iterator[T], depth: int = 4, name: str = "mtkit-prefetch"):
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self._queue: queue.Queue = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._source = source
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _put(self, item: object) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for item in self._source:
                if not self._put(item):
                    return
        except BaseException as exc:  # handed to the consumer, who raises it
            self._put(exc)
            return
        self._put(_DONE)

    def __iter__(self) -> Prefetcher[T]:
        return self

    def __next__(self) -> T:
        item = self._queue.get()
        if item is _DONE:
            self._queue.put(_DONE)  # later calls stop too
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        return item  # type: ignore[return-value]

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def __enter__(self) -> Prefetcher[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
