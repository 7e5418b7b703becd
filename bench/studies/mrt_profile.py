"""Where an MRT update's time goes: `mtkit train` with timers around each phase, on any device.

    python bench/studies/mrt_profile.py [--profile] [--fp32-mask] -- CONFIG.yaml [mtkit train options]

runs ``mtkit train`` in this process and prints, per update, its seconds and those of the candidate
search, the sentence costs, the teacher-forced forward pass and the rest (backward and optimizer
step), each phase timed between device synchronisations. ``--profile`` adds `torch.profiler` over
updates 5 and 6 (the table sorted by self device time, and both tables to ``$OUT`` or /tmp);
``--fp32-mask`` hands SDPA the attention mask in fp32 as before commit 0268a29, for comparison.
docs/notebook ("Minimum risk training on a GPU") quotes it, e.g.

    cd recipes/deb-en-de && python ../../bench/studies/mrt_profile.py --profile -- mrt2.yaml --device cuda \\
        --max-steps 7 --set training.max_tokens=16384 --set training.model_dir=/tmp/mrt-profile
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--fp32-mask", action="store_true")
    parser.add_argument("train_args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    train_args = args.train_args[1:] if args.train_args[:1] == ["--"] else args.train_args

    import mtkit.train.costs as costs
    import mtkit.train.mrt as mrt

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    if args.fp32_mask:
        sdpa = F.scaled_dot_product_attention

        def fp32_mask_sdpa(q: Any, k: Any, v: Any, attn_mask: Any = None, **kw: Any) -> Any:
            return sdpa(q, k, v, attn_mask=None if attn_mask is None else attn_mask.float(), **kw)

        F.scaled_dot_product_attention = fp32_mask_sdpa

    phases: dict[str, float] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*a: Any, **kw: Any) -> Any:
            sync()
            start = time.perf_counter()
            result = fn(*a, **kw)
            sync()
            phases[name] = phases.get(name, 0.0) + time.perf_counter() - start
            return result
        return wrapper

    mrt.generate = timed("search", mrt.generate)
    costs.SentenceCost.batch = timed("costs", costs.SentenceCost.batch)
    mrt.MrtUpdater._chunk_loss = timed("forward", mrt.MrtUpdater._chunk_loss)
    update, count = mrt.MrtUpdater.update, [0]
    profiler: list[Any] = [None]

    def timed_update(self: Any, batches: list[Any], step: int) -> None:
        count[0] += 1
        if args.profile and count[0] == 5:
            profiler[0] = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                             torch.profiler.ProfilerActivity.CUDA])
            profiler[0].__enter__()
        phases.clear()
        sync()
        start = time.perf_counter()
        update(self, batches, step)
        sync()
        total = time.perf_counter() - start
        parts = ", ".join(f"{k} {v:.2f}" for k, v in phases.items())
        print(f"update {count[0]}: {total:.2f} s = {parts}, backward+step {total - sum(phases.values()):.2f} "
              f"| {sum(len(b.ids) for b in batches)} sentences", flush=True)
        if args.profile and count[0] == 6:
            profiler[0].__exit__(None, None, None)
            table = profiler[0].key_averages()
            out = os.path.join(os.environ.get("OUT", "/tmp"), "mrt-profile.txt")
            with open(out, "w") as f:
                f.write(table.table(sort_by="cuda_time_total", row_limit=30))
                f.write(table.table(sort_by="cpu_time_total", row_limit=30))
            print(table.table(sort_by="self_cuda_time_total", row_limit=12), flush=True)

    mrt.MrtUpdater.update = timed_update
    from mtkit.cli.app import app

    sys.argv = ["mtkit", "train", *train_args]
    app()


if __name__ == "__main__":  # the cost workers are spawned: they import this file without running it
    main()
