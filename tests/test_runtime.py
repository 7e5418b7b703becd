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


# -------------------------------------------------------------- the optimizer a CUDA graph records
def test_a_learning_rate_held_in_a_tensor_trains_like_a_float_and_saves_as_one():
    """CUDA graphs read the LR from a device tensor (learning_rate_on_device) that the trainer
    fills every update: the same updates as a float LR; a checkpoint holds plain floats, so a run
    without graphs (or on another device) resumes it exactly."""
    import torch
    from torch import nn

    from mtkit.config.experiment import TrainingConfig
    from mtkit.train.runtime import learning_rate_on_device, make_optimizer, plain_optimizer_state

    torch.manual_seed(0)
    plain_model, tensor_model = nn.Linear(6, 4), nn.Linear(6, 4)
    tensor_model.load_state_dict(plain_model.state_dict())
    tc = TrainingConfig(lr=0.01)
    cpu = torch.device("cpu")
    plain = make_optimizer(plain_model, tc, cpu)
    held = make_optimizer(tensor_model, tc, cpu, capturable=True)
    learning_rate_on_device(held, cpu)
    x = torch.randn(16, 6)

    def step(model, optimizer, lr):
        for group in optimizer.param_groups:
            if isinstance(group["lr"], torch.Tensor):
                group["lr"].fill_(lr)
            else:
                group["lr"] = lr
        optimizer.zero_grad()
        model(x).pow(2).mean().backward()
        optimizer.step()

    for n in range(6):
        step(plain_model, plain, 0.01 * (n + 1) / 6)
        step(tensor_model, held, 0.01 * (n + 1) / 6)
    # (the tensor holds the LR in float32, a float is a double: equal to rounding)
    pairs = zip(plain_model.parameters(), tensor_model.parameters(), strict=True)
    assert all(torch.allclose(p, q, rtol=1e-5, atol=1e-7) for p, q in pairs)
    saved = plain_optimizer_state(held)
    assert all(type(g["lr"]) is float and not g["capturable"] for g in saved["param_groups"])
    assert isinstance(held.param_groups[0]["lr"], torch.Tensor)  # the live optimizer keeps its tensor
    resumed = make_optimizer(plain_model, tc, cpu)
    resumed.load_state_dict(plain_optimizer_state(plain))
    continued = nn.Linear(6, 4)
    continued.load_state_dict(tensor_model.state_dict())
    again = make_optimizer(continued, tc, cpu)
    again.load_state_dict(saved)
    step(plain_model, resumed, 0.005)
    step(continued, again, 0.005)
    pairs = zip(plain_model.parameters(), continued.parameters(), strict=True)
    assert all(torch.allclose(p, q, rtol=1e-5, atol=1e-7) for p, q in pairs)


@pytest.mark.skipif(not GLIBC, reason="reads /proc/self/statm")
def test_the_peak_is_never_below_the_size_now(monkeypatch):
    """The kernel's high-water mark lags, and is read first: a log line once said 998 MiB now, 997 peak."""
    import resource

    from mtkit.train import runtime

    class Stale:
        ru_maxrss = 1  # KiB: a high-water mark far behind
    monkeypatch.setattr(resource, "getrusage", lambda who: Stale())
    now, peak = runtime.resident_mib()
    assert now is not None and now > 1 and peak >= now
