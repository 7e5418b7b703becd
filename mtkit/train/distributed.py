"""torchrun / DistributedDataParallel setup and teardown.

``torchrun --nproc_per_node=N -m mtkit train CONFIG`` sets RANK, WORLD_SIZE, LOCAL_RANK (and
MASTER_ADDR/PORT); ``init_distributed`` reads them, picks NCCL on CUDA and gloo on CPU, and binds
each process to ``cuda:LOCAL_RANK``. Without those variables training runs as a single process.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from datetime import timedelta

import torch
import torch.distributed as dist

from mtkit.device import DistInfo, dist_info_from_env
from mtkit.errors import MtkitError

__all__ = ["DistInfo", "all_reduce_sum", "broadcast_object", "dist_info_from_env", "init_distributed",
           "process_group", "shutdown_distributed"]


def init_distributed(info: DistInfo, device: torch.device) -> None:
    if not info.enabled or dist.is_initialized():
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    try:
        kwargs = {"device_id": device} if backend == "nccl" else {}
        # the other ranks wait in a collective while rank 0 validates: allow for a long dev set
        dist.init_process_group(backend=backend, rank=info.rank, world_size=info.world_size,
                                timeout=timedelta(minutes=60), **kwargs)
    except (RuntimeError, ValueError) as exc:
        raise MtkitError(f"cannot initialise distributed training ({backend}): {exc}") from None


@contextlib.contextmanager
def process_group(info: DistInfo, device: torch.device) -> Iterator[None]:
    """The process group for the length of a run (nothing for a single process)."""
    init_distributed(info, device)
    try:
        yield
    except BaseException:
        shutdown_distributed()
        raise
    shutdown_distributed(finished=True)


def shutdown_distributed(finished: bool = False) -> None:
    """Tear down the process group. After a finished run every rank first waits for the others:
    a rank that destroys its gloo group while a peer is still saving the last checkpoint can be
    aborted by gloo ("terminate called without an active exception"). After an error nobody
    waits, since the failed rank may never arrive. The trainer is collected first: its
    DistributedDataParallel wrapper holds the group, and a group freed later, while the interpreter
    exits, can abort the process the same way."""
    if dist.is_available() and dist.is_initialized():
        gc.collect()
        if finished:
            dist.barrier()
        dist.destroy_process_group()


def all_reduce_sum(tensor: torch.Tensor, info: DistInfo) -> torch.Tensor:
    """Sum a tensor over ranks in place (no-op for one process)."""
    if info.enabled:
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def broadcast_object(obj: object, info: DistInfo) -> object:
    """Rank 0's value on every rank (e.g. the early-stopping decision)."""
    if not info.enabled:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]
