"""Where and in what precision PyTorch computes, and on how many CPU threads: one set of rules for
every stage (train, translate, export) and for the Python API.

- ``resolve_device``: ``auto`` → CUDA (this process's local rank under torchrun), else MPS, else CPU;
  an explicit name is checked against what the machine has.
- ``autocast_dtype`` / ``decode_dtype``: what ``auto``, ``fp32``, ``bf16`` and ``fp16`` mean on a device.
- ``allowed_cpus`` / ``threads``: the cores this process may use, and a context manager that sets
  PyTorch's thread count for a block and restores it (library objects never change it for good).
- ``dist_info_from_env``: this process's place in a torchrun job, for training and translation.
- ``ct2_device`` / ``ct2_compute_type``: the same options in CTranslate2's terms, for the ct2 engine.

PyTorch is imported by the functions that need it, not with the module: the ct2 engine (an exported
model run by CTranslate2) checks precisions, counts threads and reads torchrun ranks from here and
runs without loading torch (and its resident memory).
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from mtkit.cpus import allowed_cpus
from mtkit.errors import ConfigError

if TYPE_CHECKING:
    import torch

PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def _mps_available() -> bool:
    import torch
    mps = getattr(torch.backends, "mps", None)
    return mps is not None and mps.is_available()


def resolve_device(name: str, local_rank: int | None = None, setting: str = "--device ") -> torch.device:
    """The torch device for ``name`` (auto, cpu, cuda, cuda:N, mps). ``local_rank`` (torchrun) picks
    the GPU of a plain ``cuda``; ``setting`` names the option in error messages."""
    import torch
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if _mps_available() else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"{setting}{name!r}: expected auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ConfigError(f"{setting}{name}: CUDA is not available on this machine (use cpu or auto)")
        index = device.index
        if index is None:
            index = local_rank if local_rank is not None else torch.cuda.current_device()
        if index >= torch.cuda.device_count():
            raise ConfigError(f"{setting}{name}: GPU {index} requested but only "
                              f"{torch.cuda.device_count()} visible")
        no_attention_plan_per_shape()
        return torch.device("cuda", index)
    if device.type == "mps" and not _mps_available():
        raise ConfigError(f"{setting}mps: MPS is not available on this machine")
    if device.type not in ("cpu", "mps"):
        raise ConfigError(f"{setting}{name!r}: expected auto, cpu, cuda, cuda:N or mps")
    return device


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (empty where /proc/cpuinfo cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


#: oneDNN's instruction-set caps (ONEDNN_MAX_CPU_ISA) that stop short of AVX-512, and those that stop
#: short of its bf16 instructions: under such a cap oneDNN computes as on a CPU that lacks them
_ONEDNN_CAPS_BELOW_AVX512 = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2"})
_ONEDNN_CAPS_BELOW_BF16 = _ONEDNN_CAPS_BELOW_AVX512 | {"AVX512_CORE", "AVX512_CORE_VNNI"}


def _onednn_isa_cap() -> str:
    """The instruction-set cap this process gives oneDNN (ONEDNN_MAX_CPU_ISA, or its older name
    DNNL_MAX_CPU_ISA), upper-cased; empty when there is none."""
    return (os.environ.get("ONEDNN_MAX_CPU_ISA") or os.environ.get("DNNL_MAX_CPU_ISA") or "").strip().upper()


def cpu_has_native_bf16() -> bool:
    """True when the CPU computes bf16 in hardware (AVX512-BF16 or AMX): there bf16 autocast trains
    faster than fp32; elsewhere it is emulated and slower, so ``auto`` keeps fp32. A oneDNN cap below
    bf16 counts as its absence: the kernels then run as on such a CPU (``make test-isa``)."""
    if _onednn_isa_cap() in _ONEDNN_CAPS_BELOW_BF16:
        return False
    return bool(cpu_flags() & {"avx512_bf16", "amx_bf16"})


def cpu_runs_bf16_lstm() -> bool:
    """Whether oneDNN has a bf16 LSTM for this CPU, which autocast's LSTM is: on x86 it needs AVX-512
    (it emulates bf16 there when the CPU lacks the instructions); below it creating the kernel fails.
    A CPU whose flags cannot be read (not x86 Linux) is not refused."""
    flags = cpu_flags()
    return not onednn_below_avx512() and (not flags or "avx512f" in flags)


_warned_emulated_bf16 = False


def _warn_emulated_bf16(setting: str) -> None:
    """Say once per process that bf16 was asked for where the CPU only emulates it: training runs many
    times slower than fp32 there (docs/results.md), which a user should not discover from a progress
    bar."""
    global _warned_emulated_bf16
    if _warned_emulated_bf16:
        return
    _warned_emulated_bf16 = True
    print(f"warning: {setting}bf16: this CPU has no native bf16 (AVX512-BF16 or AMX), so bf16 is "
          "emulated and much slower than fp32 here (20x when training on an AVX2-only CPU); "
          "auto or fp32 is faster", file=sys.stderr, flush=True)


def autocast_dtype(precision: str, device: torch.device, setting: str = "--precision ",
                   lstm: bool = False) -> torch.dtype | None:
    """The autocast dtype for ``precision`` on ``device`` (None = plain fp32), for training;
    ``lstm``: the model runs LSTMs, which a CPU without AVX-512 cannot run under bf16 autocast."""
    import torch
    if precision not in PRECISIONS:
        raise ConfigError(f"{setting}{precision!r}: use auto, fp32, bf16 or fp16")
    if precision == "fp32":
        return None
    if precision == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        if device.type == "cpu" and cpu_has_native_bf16():
            return torch.bfloat16
        return None
    if precision == "bf16":
        if device.type == "cuda" and not torch.cuda.is_bf16_supported():
            raise ConfigError(f"{setting}bf16 but this GPU does not support bfloat16 (use fp16)")
        if device.type == "cpu" and lstm and not cpu_runs_bf16_lstm():
            raise ConfigError(f"{setting}bf16: oneDNN has no bf16 LSTM on this CPU (it needs AVX-512): "
                              "use auto or fp32, or model.rnn_type gru")
        if device.type == "cpu" and not cpu_has_native_bf16():
            _warn_emulated_bf16(setting)
        return torch.bfloat16
    if device.type not in ("cuda", "mps"):
        raise ConfigError(f"{setting}fp16 needs a GPU (use bf16 or fp32 on CPU)")
    return torch.float16


def check_decode_precision(precision: str, int8: bool) -> None:
    """The --precision/--int8 combinations every decoding engine accepts (torch and CTranslate2):
    decoding also takes ``--precision int8``, the same as ``--int8``."""
    if precision not in PRECISIONS + ("int8",):
        raise ConfigError(f"--precision {precision!r}: use auto, fp32, bf16, fp16 or int8")
    if int8 and precision not in ("auto", "fp32", "int8"):
        raise ConfigError(f"--int8 computes in int8 and fp32; it does not combine with "
                          f"--precision {precision}")


def ct2_device(name: str, ct2: ModuleType) -> tuple[str, int]:
    """CTranslate2's (device, index) for mtkit's --device: auto is CUDA when CTranslate2 sees a GPU."""
    gpus = ct2.get_cuda_device_count()
    if name == "auto":
        return ("cuda", 0) if gpus > 0 else ("cpu", 0)
    if name == "cpu":
        return "cpu", 0
    if name == "cuda" or name.startswith("cuda:"):
        index = name.partition(":")[2]
        if index and not index.isdigit():
            raise ConfigError(f"--device {name!r}: expected auto, cpu, cuda or cuda:N")
        if gpus == 0:
            raise ConfigError(f"--device {name}: CTranslate2 sees no CUDA GPU on this machine "
                              "(use cpu or auto)")
        if int(index or 0) >= gpus:
            raise ConfigError(f"--device {name}: GPU {index} requested but CTranslate2 sees only {gpus}")
        return "cuda", int(index or 0)
    raise ConfigError(f"--device {name!r}: the ct2 engine runs on auto, cpu, cuda or cuda:N")


_CT2_COMPUTE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "auto": "default"}


def ct2_compute_type(precision: str, int8: bool) -> str:
    """CTranslate2's compute_type for --precision/--int8; auto keeps the type chosen at export."""
    check_decode_precision(precision, int8)
    if decode_int8(precision, int8):
        return "int8_float32"
    return _CT2_COMPUTE[precision]


def decode_int8(precision: str, int8: bool = False) -> bool:
    """Whether a decoding engine quantizes its linear layers to int8 (``--precision int8`` or ``--int8``)."""
    return int8 or precision == "int8"


def onednn_below_avx512() -> bool:
    """Whether oneDNN is capped below AVX-512 in this process (ONEDNN_MAX_CPU_ISA=AVX2, as ``make
    test-isa`` and the AVX2 benchmarks set): its kernels then run as on a CPU without AVX-512."""
    return _onednn_isa_cap() in _ONEDNN_CAPS_BELOW_AVX512


def auto_int8(precision: str, device: torch.device) -> bool:
    """Whether ``--precision auto`` decodes a Transformer with int8 linear layers on this device: on an
    x86 CPU with AVX2 (fbgemm's int8 kernels) that computes bf16 only in emulation, where that measured
    faster than fp32 at the same BLEU (docs/notebook/engines.md). Elsewhere auto is bf16 (native bf16
    CPUs, GPUs) or fp32 (CPUs without AVX2, other architectures); ``--precision fp32`` stays exact."""
    import torch
    if precision != "auto" or device.type != "cpu" or cpu_has_native_bf16():
        return False
    return "avx2" in cpu_flags() and "x86" in torch.backends.quantized.supported_engines


def decode_dtype(precision: str, device: torch.device, int8: bool = False) -> torch.dtype:
    """The dtype a model's weights and activations decode in.

    ``auto`` is bf16 on a GPU that has it (fp16 on older ones) and on a CPU that computes bf16 in
    hardware (AVX512-BF16, AMX): there beam search runs faster than fp32 and scores the same BLEU;
    elsewhere fp32. Log-probabilities are always computed in fp32. ``fp32``
    gives results that do not depend on how sentences are batched.
    """
    import torch
    check_decode_precision(precision, int8)
    if decode_int8(precision, int8):
        if device.type != "cpu":
            raise ConfigError(f"--precision int8 quantizes for the CPU, not {device.type}: use auto, bf16 "
                              "or fp16 there")
        return torch.float32
    if precision == "auto" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16  # unlike training (which would need loss scaling), decoding is safe in fp16
    return autocast_dtype(precision, device) or torch.float32


def autocast(device: torch.device, dtype: torch.dtype | None,
             cache: bool = True) -> contextlib.AbstractContextManager:
    """torch.autocast for ``dtype``, or nothing for plain fp32. ``cache=False`` casts the weights anew
    at each use, as code recorded into a CUDA graph must (a cached cast would outlive the capture)."""
    import torch
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=cache)


def thread_count(threads: int = 0, share: int = 1) -> int:
    """``threads`` if positive, else the allowed cores divided among ``share`` processes (the local
    ranks of a torchrun job)."""
    return threads if threads > 0 else max(1, allowed_cpus() // max(1, share))


@contextlib.contextmanager
def threads(count: int) -> Iterator[None]:
    """Run a block with PyTorch's intra-op thread count set to ``count``, then restore it, so that a
    library object used inside another program leaves the program's setting as it found it."""
    import torch
    before = torch.get_num_threads()
    if count != before:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


#: kernels kept per cache; see ``bound_kernel_caches``
KERNEL_CACHE_CAPACITY = 32
_KERNEL_CACHES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")


def bound_kernel_caches(capacity: int = KERNEL_CACHE_CAPACITY) -> None:
    """Keep at most ``capacity`` compiled CPU kernels in each of oneDNN's caches (its primitive cache
    and PyTorch's ideep cache above it) instead of 1,024 each.

    PyTorch runs bf16 matrix products on CPU through oneDNN, which compiles a kernel (with its own
    buffers) for every new input shape and caches it. Token-budget batches come in ever new shapes
    (sentences × length), so by default the caches grow for the first few hundred updates and hold
    hundreds of MB that fragment the heap around them, and training's resident size keeps growing.
    With a few dozen entries the heap in use stays near its first update's, at the same speed; fewer
    entries fragment the heap less but recompile more, and the default is the smallest measured at
    the same speed (docs/results.md, "Training memory").

    Sets the environment variables oneDNN reads when it builds its first kernel, so it must run
    before PyTorch's first CPU matrix product; a value the user has set wins. The CLI calls it for
    every command (it owns its process); a library user may call it too.
    """
    for name in _KERNEL_CACHES:
        os.environ.setdefault(name, str(capacity))


#: busy-wait iterations of an idle OpenMP thread before it sleeps, for the commands that decode
DECODING_SPIN_COUNT = 3000
#: commands whose threads keep OpenMP's default spin (300,000 iterations)
_SPINNING_COMMANDS = frozenset({"train"})


def short_openmp_spin(args: list[str], spin_count: int = DECODING_SPIN_COUNT) -> None:
    """Let idle OpenMP threads sleep after ``spin_count`` busy-wait iterations, except in training.

    PyTorch's CPU kernels (and CTranslate2's) run on GNU OpenMP, whose idle threads spin 300,000
    iterations before sleeping. Two commands on the same cores pay for that: two `mtkit translate`
    commands of 300 lines each, run together on 2 cores, took 16-149 s greedy (53-298 s beam 5) with
    the default spin, against 6-7 s for one alone. Every parallel region waited for threads that the
    other process's spinning kept off the cores. With 3,000 iterations the pair took 11-13 s greedy
    (28-31 s beam 5), at a cost of 4-10% for a command alone. Training alone measured 8% slower with
    the short spin, so ``train`` keeps the default. Measurements: docs/results.md ("Translation speed").

    ``args`` are the command line's arguments (the first one that is not an option names the
    command). libgomp reads the variable when it loads, that is on PyTorch's import, so this must run
    before it. A user's own GOMP_SPINCOUNT or OMP_WAIT_POLICY wins."""
    command = next((a for a in args if not a.startswith("-")), "")
    if command in _SPINNING_COMMANDS or "OMP_WAIT_POLICY" in os.environ:
        return
    os.environ.setdefault("GOMP_SPINCOUNT", str(spin_count))


def no_attention_plan_per_shape() -> None:
    """Keep PyTorch's scaled dot-product attention off its cuDNN backend on CUDA GPUs.

    On recent GPUs SDPA picks cuDNN's attention, which builds an execution plan (milliseconds of CPU)
    for every new input shape and keeps each plan in host memory. Batches of sentences come in ever
    new shapes (token budgets, beams that shrink, MRT's candidates), so it replanned nearly every
    call: in an MRT update most of the time went there, and host memory grew update by update. The
    flash and memory-efficient kernels need no plan. A process-wide setting, like the CPU kernel caches
    above; measured in docs/results.md ("Minimum risk training on a GPU").
    """
    import torch

    torch.backends.cuda.enable_cudnn_sdp(False)


# ------------------------------------------------------------------------------------ torchrun
@dataclass
class DistInfo:
    """Where this process sits in a torchrun job (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE);
    one process of one when those variables are not set."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ConfigError(f"environment variable {name}={value!r} is not an integer") from None


def dist_info_from_env() -> DistInfo:
    world = _env_int("WORLD_SIZE", 1)
    return DistInfo(rank=_env_int("RANK", 0), world_size=world, local_rank=_env_int("LOCAL_RANK", 0),
                    local_world_size=_env_int("LOCAL_WORLD_SIZE", world))



__all__ = ["KERNEL_CACHE_CAPACITY", "PRECISIONS", "DistInfo", "allowed_cpus", "auto_int8", "autocast",
           "autocast_dtype", "bound_kernel_caches", "check_decode_precision", "cpu_flags",
           "cpu_has_native_bf16", "cpu_runs_bf16_lstm", "decode_dtype", "decode_int8", "dist_info_from_env",
           "no_attention_plan_per_shape", "onednn_below_avx512", "resolve_device", "short_openmp_spin",
           "thread_count", "threads"]
