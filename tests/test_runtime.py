"""mtkit/train/runtime.py: the heap policy of the training process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

GLIBC = sys.platform.startswith("linux") and Path("/proc/self/statm").exists()


_PROBE = """
import ctypes, os, sys, torch
from mtkit.train.runtime import heap_allocation, release_freed_memory

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
page = os.sysconf("SC_PAGE_SIZE")
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page / 2**20
if sys.argv[1] == "heap":
    assert heap_allocation()
big = torch.ones(64 * 2**20)  # 256 MB, touched
mapped = libc.mallinfo2().hblkhd / 2**20
pin = torch.ones(2**18)  # allocated after it: the big block is no longer the heap top
del big
kept = rss_mb()
release_freed_memory()
print(mapped, kept, rss_mb())
"""


def _probe(mode: str) -> tuple[float, float, float]:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True)
    mapped, kept, trimmed = map(float, out.stdout.split())
    return mapped, kept, trimmed


@pytest.mark.skipif(not GLIBC, reason="glibc heap behaviour on Linux")
def test_large_tensors_come_from_the_heap_and_trimming_returns_them():
    """With heap_allocation a 256 MB tensor is not a fresh mmap (glibc's default makes it one), and once
    freed below the heap top it stays resident until release_freed_memory hands it back."""
    assert _probe("default")[0] >= 256
    mapped, kept, trimmed = _probe("heap")
    assert mapped < 64, mapped
    assert kept - trimmed > 200, (kept, trimmed)
