"""Training updates replayed as CUDA graphs: one graph per batch shape, one for the optimizer step.

On a GPU a small Transformer's update is some thousand small kernels whose arithmetic takes far less
time than launching them one by one from Python, so the card idles most of the time. A CUDA graph
records the kernels of one call once and replays them with a single launch. A graph is only valid
for the shapes (and memory addresses) it was recorded with, so:

- batches come in a small set of padded shapes (``training.shape_buckets``, see
  `mtkit.data.batching`), each with its own input tensors at fixed addresses, into which a batch is
  copied before its graph replays;
- an update is two kinds of graph: *accumulate* (forward, loss, backward: gradients are added into
  ``.grad`` tensors that live outside every graph) per shape, and *step* (divide by the update's
  target tokens, clip, fused Adam with a learning rate held in a device tensor, zero the gradients);
- everything that must outlive a replay (loss sums, token counts, gradients, optimizer state)
  is a tensor allocated before the capture and updated in place; the graphs share one memory pool
  for their temporaries, which is safe because they never run concurrently;
- the first ``warmup`` calls for a key run eagerly (on a side stream, as capture requires, and doing
  real training work); the next call records the graph, then replays it.

Dropout stays random: PyTorch's graph-safe generator reads the seed and offset at each replay, and
the trainer reseeds from (seed, rank, update) before every update as in eager mode (the masks are
not the same numbers as eager mode's, but the same seed gives the same run).

If a capture fails (an operation that cannot be captured), training goes on eagerly with a warning.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

import torch
from torch import Tensor

from mtkit.config.experiment import Config
from mtkit.data.batching import Batch
from mtkit.device import DistInfo
from mtkit.errors import ConfigError
from mtkit.textio import warn


class GraphedUpdate:
    """Runs ``accumulate(src, tgt_in, tgt_out)`` per batch and ``step()`` per update, as CUDA graphs.

    Both functions must work on device tensors only (no reads back to the host) and keep their
    results in tensors allocated before the first call."""

    def __init__(self, accumulate: Callable[[Tensor, Tensor, Tensor], None], step: Callable[[], None],
                 device: torch.device, warmup: int = 1):
        self.accumulate_fn, self.step_fn = accumulate, step
        self.device = device
        self.warmup = warmup
        self.inputs: dict[Hashable, tuple[Tensor, Tensor, Tensor]] = {}
        self.graphs: dict[Hashable, torch.cuda.CUDAGraph] = {}
        self.eager_runs: dict[Hashable, int] = {}
        self.pool: tuple[int, int] | None = None
        self.side_stream = torch.cuda.Stream(device)
        self.enabled = True
        self.capture_seconds = 0.0

    @property
    def captured(self) -> int:
        return len(self.graphs)

    def accumulate(self, batch: Batch) -> None:
        """Copy ``batch`` (pinned host memory: the copies do not wait) into the inputs of its shape and
        run that shape's graph."""
        key = ("accumulate", tuple(batch.src.shape), tuple(batch.tgt_in.shape))
        inputs = self.inputs.get(key)
        if inputs is None:
            inputs = tuple(torch.empty(t.shape, dtype=t.dtype, device=self.device)  # type: ignore[assignment]
                           for t in (batch.src, batch.tgt_in, batch.tgt_out))
            self.inputs[key] = inputs
        for static, fresh in zip(inputs, (batch.src, batch.tgt_in, batch.tgt_out), strict=True):
            static.copy_(fresh, non_blocking=True)
        self._run(key, lambda: self.accumulate_fn(*inputs))

    def step(self) -> None:
        self._run(("step",), self.step_fn)

    def _run(self, key: Hashable, fn: Callable[[], None]) -> None:
        graph = self.graphs.get(key)
        if graph is not None:
            graph.replay()
            return
        if not self.enabled or self.eager_runs.get(key, 0) < self.warmup:
            self._eager(fn)
            self.eager_runs[key] = self.eager_runs.get(key, 0) + 1
            return
        started = time.monotonic()
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: the prefetching thread may pin host memory while this thread captures
            with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
                fn()
        except RuntimeError as exc:
            self.enabled = False
            reason = str(exc).splitlines()[0][:200]
            warn(f"CUDA graph capture failed ({reason}); training continues without graphs "
                 "(training.cuda_graphs: off hides this)")
            torch.cuda.synchronize(self.device)
            self._eager(fn)
            return
        self.pool = graph.pool()
        self.graphs[key] = graph
        self.capture_seconds += time.monotonic() - started
        graph.replay()

    def _eager(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on a side stream, ordered after and before the current stream's work (the
        warm-up that capture needs: lazily created kernels, workspaces and optimizer state)."""
        current = torch.cuda.current_stream(self.device)
        self.side_stream.wait_stream(current)
        with torch.cuda.stream(self.side_stream):
            fn()
        current.wait_stream(self.side_stream)


def use_shape_buckets(setting: str, device: torch.device) -> bool:
    """training.shape_buckets: auto = on for CUDA (on a CPU padding to buckets costs arithmetic and
    buys nothing: there is no per-shape cost to avoid)."""
    return setting == "on" or (setting == "auto" and device.type == "cuda")


def cuda_graphs_blocker(cfg: Config, device: torch.device, info: DistInfo, buckets: bool) -> str | None:
    """Why this run cannot replay its updates as CUDA graphs (None: it can)."""
    tc = cfg.training
    reasons = [
        (device.type != "cuda", f"the device is {device.type}, not CUDA"),
        (cfg.model.arch != "transformer", "the RNN reads sequence lengths back to the host"),
        (not buckets, "training.shape_buckets is off"),
        (info.enabled, "training runs in several processes (DDP)"),
        (tc.compile, "training.compile is on"),
        (tc.scheduled_sampling != "none", "scheduled sampling decodes on the fly"),
        (tc.objective == "mrt", "minimum risk training decodes candidates on the fly"),
        (tc.diversity_penalty > 0, "the diversity penalty needs attention weights"),
        (tc.precision == "fp16", "fp16 loss scaling reads its scale back"),
    ]
    return next((why for blocked, why in reasons if blocked), None)


def use_cuda_graphs(cfg: Config, device: torch.device, info: DistInfo, buckets: bool) -> bool:
    """training.cuda_graphs: auto = wherever the run allows it; on = required (else a ConfigError)."""
    setting = cfg.training.cuda_graphs
    if setting == "off":
        return False
    blocker = cuda_graphs_blocker(cfg, device, info, buckets)
    if blocker is not None and setting == "on":
        raise ConfigError(f"training.cuda_graphs=on: not possible here ({blocker})")
    return blocker is None
