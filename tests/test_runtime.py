"""mtkit/train/runtime.py: precision choice and the heap policy of the training process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from mtkit.errors import ConfigError
from mtkit.train.runtime import resolve_precision

GLIBC = sys.platform.startswith("linux") and Path("/proc/self/statm").exists()


def test_precision_choices():
    cpu = torch.device("cpu")
    assert resolve_precision("fp32", cpu) is None
    assert resolve_precision("bf16", cpu) is torch.bfloat16
    assert resolve_precision("auto", cpu) in (None, torch.bfloat16)
    with pytest.raises(ConfigError, match="fp16 needs a GPU"):
        resolve_precision("fp16", cpu)


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
