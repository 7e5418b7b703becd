"""The background prefetcher: same items in the same order, errors handed over, bounded read-ahead."""

from __future__ import annotations

import threading
import time

import pytest

from mtkit.data.prefetch import Prefetcher


def test_items_come_in_order_and_then_stop():
    with Prefetcher(iter(range(100)), depth=3) as items:
        assert list(items) == list(range(100))
        with pytest.raises(StopIteration):
            next(items)


def test_an_error_in_the_source_is_raised_in_the_consumer():
    def source():
        yield 1
        raise ValueError("bad shard")

    with Prefetcher(source(), depth=2) as items:
        assert next(items) == 1
        with pytest.raises(ValueError, match="bad shard"):
            next(items)


def test_it_reads_at_most_depth_items_ahead():
    """The memory cap: a slow consumer never has more than `depth` made-but-untaken items (plus the
    one the thread is waiting to hand over)."""
    made = []

    def source():
        for i in range(1000):
            made.append(i)
            yield i

    with Prefetcher(source(), depth=4) as items:
        for taken in range(1, 6):
            next(items)
            time.sleep(0.05)
            assert len(made) - taken <= 4 + 1


def test_close_stops_the_thread():
    def endless():
        while True:
            yield 0

    items = Prefetcher(endless(), depth=2, name="prefetch-under-test")
    next(items)
    items.close()
    assert not any(t.name == "prefetch-under-test" for t in threading.enumerate())
