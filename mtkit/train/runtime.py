"""How fast training runs on its device: the optimizer kernel and the CPU allocator."""

from __future__ import annotations

import ctypes

import torch
from torch import nn

from mtkit.config import TrainingConfig

_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc mallopt parameters


def make_optimizer(model: nn.Module, tc: TrainingConfig, device: torch.device) -> torch.optim.Optimizer:
    """Adam/AdamW with the fused kernel where the device has one (on CPU ~7× faster than foreach)."""
    cls = torch.optim.AdamW if tc.optimizer == "adamw" else torch.optim.Adam
    kwargs = {"lr": tc.lr, "betas": (tc.betas[0], tc.betas[1]), "eps": tc.eps,
              "weight_decay": tc.weight_decay}
    params = [p for p in model.parameters() if p.requires_grad]
    if device.type in ("cuda", "cpu", "mps"):
        try:
            return cls(params, fused=True, **kwargs)
        except (RuntimeError, ValueError, TypeError):
            pass
    return cls(params, **kwargs)


def heap_allocation() -> bool:
    """Serve large tensors from glibc's heap instead of a fresh mmap each, trimming only the heap top.

    By default glibc maps every allocation above a few MB afresh and unmaps it on free, so each
    step's big temporaries ([tokens, vocab] logits and their gradient, ~128 MB for a 4096-token
    batch) pay page faults on first touch; this made zero-filling such a tensor 8× and a softmax
    over it 4× slower. The trim threshold stays 0: free memory at the top of the heap goes back to
    the kernel at once. (Earlier versions asked for a threshold of 2**40, which the C ``int``
    argument truncated to this same 0; measured on deb-en-de transformer-small, 100 updates, 2 cores:
    never trimming trains 2-15% faster but peaks 300-650 MiB higher, glibc's defaults peak ~400 MiB
    lower and train ~10% slower; docs/results.md.) A no-op (False) where glibc is not the C library.
    """
    try:
        libc = ctypes.CDLL("libc.so.6")
        no_mmap = libc.mallopt(_M_MMAP_MAX, ctypes.c_int(0))
        return bool(no_mmap) and bool(libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(0)))
    except (OSError, AttributeError):
        return False


def release_freed_memory() -> bool:
    """Hand the heap's free pages back to the kernel (glibc ``malloc_trim``).

    The price of ``heap_allocation``: batches of ever new shapes fragment a heap that never shrinks,
    and the process's resident size crept up (transformer-small: 4.6 GB after 8 minutes, 5.3 GB after
    30). The trainer calls this after each validation, for the cost of page faults in the next step.
    Measured: it drops by 0.5-1.6 GB there but climbs again in between (an en-es run still peaked at
    5.8 GB), so it trims the peak's aftermath, not the peak. False where glibc is missing.
    """
    try:
        return bool(ctypes.CDLL("libc.so.6").malloc_trim(0))
    except (OSError, AttributeError):
        return False
