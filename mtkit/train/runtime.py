"""How training runs on its device: the optimizer kernel, and the memory of the process (the heap's
free pages handed back after a validation, the resident size for the log)."""

from __future__ import annotations

import ctypes
import os
import resource
import sys

import torch
from torch import nn

from mtkit.config.experiment import TrainingConfig


def make_optimizer(model: nn.Module, tc: TrainingConfig, device: torch.device,
                   capturable: bool = False) -> torch.optim.Optimizer:
    """Adam/AdamW with the fused kernel where the device has one (on CPU much faster than foreach);
    ``capturable`` for a step recorded into a CUDA graph (see ``learning_rate_on_device``)."""
    cls = torch.optim.AdamW if tc.optimizer == "adamw" else torch.optim.Adam
    kwargs = {"lr": tc.lr, "betas": (tc.betas[0], tc.betas[1]), "eps": tc.eps,
              "weight_decay": tc.weight_decay}
    params = [p for p in model.parameters() if p.requires_grad]
    if capturable:
        return cls(params, fused=True, capturable=True, **kwargs)
    if device.type in ("cuda", "cpu", "mps"):
        try:
            return cls(params, fused=True, **kwargs)
        except (RuntimeError, ValueError, TypeError):
            pass
    return cls(params, **kwargs)


def learning_rate_on_device(optimizer: torch.optim.Optimizer, device: torch.device) -> None:
    """Hold each group's learning rate in a device tensor, which a captured step reads at every replay
    (a Python float would be frozen into the graph); the trainer then sets it with ``fill_``."""
    for group in optimizer.param_groups:
        group["capturable"] = True
        if not isinstance(group["lr"], torch.Tensor):
            group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)


def plain_optimizer_state(optimizer: torch.optim.Optimizer) -> dict:
    """``optimizer.state_dict()`` with learning rates as floats and no capture flag, so that a
    checkpoint written with CUDA graphs resumes anywhere (the resuming run sets its own flags)."""
    state = optimizer.state_dict()
    for group in state["param_groups"]:
        if isinstance(group.get("lr"), torch.Tensor):
            group["lr"] = float(group["lr"])
        if group.get("capturable"):
            group["capturable"] = False
    return state


def release_freed_memory() -> bool:
    """Hand the heap's free pages back to the kernel (glibc ``malloc_trim``).

    Training keeps glibc's own heap policy: tensors above its (adaptive) mmap threshold are mapped
    and unmapped, smaller ones come from the heap, which batches of ever new shapes fragment. A
    validation makes many shapes of its own (greedy search over the dev set); the trainer calls this
    before each one, so that its tensors take pages handed back rather than new ones on top of the
    free pages training left in the heap (validations were where the resident size peaked), and
    after it, so that the pages its tensors left free do not stay resident for the rest of the run.
    (Serving every tensor from the heap and never trimming it is somewhat faster, but the resident
    size grows without bound.) False where glibc is missing.
    """
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False


def resident_mib() -> tuple[float | None, float]:
    """(resident set size now, peak so far) of this process in MiB, for the training log: memory that
    grows shows there, update by update. The current size is read where the system tells it
    (/proc on Linux; None elsewhere); the peak is the kernel's high-water mark."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak_mib = peak / (2**20 if sys.platform == "darwin" else 2**10)  # bytes on macOS, KiB on Linux
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            now = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        now = None
    # the kernel updates its high-water mark lazily, and the size now is read after it: the peak is at
    # least the size now (else a log line could read a peak below the size now)
    return now, max(peak_mib, now or 0.0)


def resident_fields() -> dict[str, int | None]:
    """``rss_mib`` and ``peak_rss_mib`` (see ``resident_mib``), rounded, for log lines and events."""
    rss, peak = resident_mib()
    return {"rss_mib": None if rss is None else round(rss), "peak_rss_mib": round(peak)}
