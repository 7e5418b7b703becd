"""What ``model.size: auto`` measures, for every width of its ladder (issue #62): seconds per training
update of each width as `mtkit.train.sizing` times them (the run's batches, precision and threads;
``PROBE_WARMUP`` untimed updates, the median of ``PROBE_UPDATES``), the updates that predicts in the
budget, and the width auto would choose, ``--rounds`` times, to see how much the choice moves with the
VM's speed.

    python bench/studies/size_probe.py --config recipes/demo/transformer.yaml \\
        --data-bin recipes/demo/work/en-de/data-bin --minutes 9 [--rounds 3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True)
    parser.add_argument("--data-bin", required=True)
    parser.add_argument("--minutes", type=float, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--set", action="append", default=[], dest="sets")
    parser.add_argument("--json")
    args = parser.parse_args(argv)

    import torch

    from mtkit.config.experiment import load_config
    from mtkit.data.batching import collate, sampler_for
    from mtkit.data.shards import ParallelData
    from mtkit.device import autocast_dtype, resolve_device, thread_count, threads
    from mtkit.train import sizing

    cfg = load_config(args.config, [f"data.dir={args.data_bin}", f"training.max_time={args.minutes}",
                                    *args.sets])
    device = resolve_device(cfg.training.device, None, setting="training.device=")
    dtype = autocast_dtype(cfg.training.precision, device, "training.precision=")
    data = ParallelData(cfg.data.dir, "train")
    sampler = sampler_for(data, cfg.training.max_tokens, cfg.training.seed, True, 0, 1, False)
    epoch = sampler.epoch_batches(1)
    n = sizing.PROBE_WARMUP + sizing.PROBE_UPDATES
    updates = [[collate(data, ids, sampler.batch_shape(ids))] for ids in epoch[:n]]
    budget = args.minutes * 60
    rounds = []
    with threads(thread_count(cfg.training.threads, 1)):
        for r in range(args.rounds):
            started = time.monotonic()
            measured = sizing.time_updates(cfg, sorted(sizing.LADDER, key=lambda s: -s.d_model), data.meta,
                                           updates, device, dtype)
            for shape, seconds in measured:
                print(f"round {r + 1}: d_model {shape.d_model}: {seconds:.3f} s/update → "
                      f"{sizing.predicted_updates(seconds, budget):,} updates in {args.minutes:g} min",
                      flush=True)
            print(f"round {r + 1}: probe {time.monotonic() - started:.1f} s", flush=True)
            choice = sizing.choose(measured, budget, len(sampler))
            print(f"round {r + 1}: auto chooses d_model {choice.shape.d_model}, dropout {choice.dropout:g}",
                  flush=True)
            rounds.append(choice.record())
    precision = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    record = {"date": time.strftime("%Y-%m-%d"), "device": str(device), "precision": precision,
              "minutes": args.minutes, "loop_overhead": sizing.LOOP_OVERHEAD, "rounds": rounds}
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
