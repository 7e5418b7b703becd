"""How many CPU cores this process may use: the one count behind PyTorch's threads, sentencepiece's
threads and the scorer's worker processes. Torch-free, so light stages can ask too."""

from __future__ import annotations

import os


def allowed_cpus() -> int:
    """Cores this process may run on: its affinity mask where the OS has one (taskset, a container's
    CPU set), else the machine's count (macOS and Windows have no ``os.sched_getaffinity``)."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    if getaffinity is not None:
        try:
            return max(1, len(getaffinity(0)))
        except OSError:
            pass
    return max(1, os.cpu_count() or 1)
