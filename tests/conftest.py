"""Suite-wide settings: tiny models run fastest (and most repeatably) on one thread."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
