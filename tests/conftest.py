"""Suite-wide settings: tiny models run fastest (and most repeatably) on one thread."""

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch


@contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@pytest.fixture(autouse=True, scope="session")
def _one_thread_for_shared_fixtures() -> Iterator[None]:
    """Module-scoped fixtures (models built once per file) run on one thread too."""
    with _torch_threads(1):
        yield


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Each test starts on one thread, and a test that changes the count does not leak it."""
    with _torch_threads(1):
        yield
