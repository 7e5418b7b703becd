"""int8 weights for the torch engine on CPU (``--precision int8``, or ``--int8``).

Every ``nn.Linear`` becomes PyTorch's dynamically quantized linear layer: int8 weights packed once at
load time, activations quantized on the fly per matrix product, outputs in fp32. The rest (embeddings,
layer norms, attention over the cache, log-probabilities) stays fp32, as in CTranslate2's
``int8_float32``.

PyTorch packs the weights for one of its quantized backends, and they differ in speed by CPU: oneDNN
uses AMX and AVX512-VNNI int8 instructions, fbgemm (PyTorch's ``x86`` default) is tuned for AVX2. The
backend is chosen from the CPU's flags when the model is quantized; the packed weights keep their
backend's kernels afterwards, so the process-wide setting is restored at once.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn

from mtkit.device import cpu_flags, onednn_below_avx512

#: CPU flags whose int8 instructions oneDNN's kernels use and fbgemm's do not
ONEDNN_INT8_FLAGS = frozenset({"amx_int8", "avx512_vnni"})


def int8_backend(flags: frozenset[str] | None = None) -> str:
    """The quantized backend to pack int8 weights for: oneDNN on CPUs with AMX or AVX512-VNNI (unless
    oneDNN is capped below AVX-512: it then runs as on an AVX2 CPU, where fbgemm is the one tuned),
    else PyTorch's default (fbgemm through ``x86``), among those this PyTorch build supports."""
    supported = torch.backends.quantized.supported_engines
    if flags is None:
        flags = frozenset() if onednn_below_avx512() else cpu_flags()
    if flags & ONEDNN_INT8_FLAGS and "onednn" in supported:
        return "onednn"
    return "x86" if "x86" in supported else torch.backends.quantized.engine


def quantize_int8(model: nn.Module, backend: str | None = None) -> nn.Module:
    """``model`` with int8 weights in every linear layer (dynamic quantization) for ``backend``
    (default: ``int8_backend()``); the process-wide quantized engine is left as it was."""
    chosen = backend or int8_backend()
    before = torch.backends.quantized.engine
    torch.backends.quantized.engine = chosen
    try:
        with warnings.catch_warnings():  # torch marks the eager API deprecated in favour of torchao
            warnings.simplefilter("ignore")
            return torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    finally:
        torch.backends.quantized.engine = before


__all__ = ["ONEDNN_INT8_FLAGS", "cpu_flags", "int8_backend", "quantize_int8"]
