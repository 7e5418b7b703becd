"""mtkit/train/runtime.py: the heap policy of the training process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

GLIBC = sys.platform.startswith("linux") and Path("/proc/self/statm").exists()


@pytest.mark.skipif(not GLIBC, reason="glibc heap behaviour on Linux")
def test_trimming_returns_the_kept_heap_to_the_kernel():
    """keep_freed_memory keeps a freed 256 MB tensor resident; release_freed_memory hands it back."""
    script = textwrap.dedent("""
        import os, torch
        from mtkit.train.runtime import keep_freed_memory, release_freed_memory
        page = os.sysconf("SC_PAGE_SIZE")
        def rss_mb():
            with open("/proc/self/statm") as f:
                return int(f.read().split()[1]) * page / 2**20
        assert keep_freed_memory()
        x = torch.ones(64 * 2**20)  # 256 MB, touched
        del x
        kept = rss_mb()
        release_freed_memory()
        print(kept, rss_mb())
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    kept, trimmed = map(float, out.split())
    assert kept - trimmed > 200, (kept, trimmed)
