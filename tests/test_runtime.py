"""mtkit/train/runtime.py: the memory of the training process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

GLIBC = sys.platform.startswith("linux") and Path("/proc/self/statm").exists()


_PROBE = """
import ctypes, os, sys, torch
from mtkit.train.runtime import release_freed_memory, resident_mib

class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
page = os.sysconf("SC_PAGE_SIZE")
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * page / 2**20
libc.mallopt(-4, ctypes.c_int(0))  # M_MMAP_MAX 0: every block from the heap, as blocks below glibc's
                                   # mmap threshold are (the fragments a run leaves behind)
big = torch.ones(64 * 2**20)  # 256 MB, touched
pin = torch.ones(2**18)  # allocated after it: the big block is no longer the heap top
del big
kept = rss_mb()
now, peak = resident_mib()
assert abs(now - kept) < 8 and peak > kept - 8, (now, kept, peak)  # the kernel updates peaks lazily
assert release_freed_memory()
print(kept, rss_mb())
"""


@pytest.mark.skipif(not GLIBC, reason="glibc heap behaviour on Linux")
def test_freed_heap_pages_are_handed_back():
    """A block freed below the heap top stays resident until release_freed_memory hands it back (the
    trainer does after each validation); resident_mib reads the same size as /proc."""
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True)
    kept, trimmed = map(float, out.stdout.split())
    assert kept - trimmed > 200, (kept, trimmed)
