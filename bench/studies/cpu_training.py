#!/usr/bin/env python3
"""What makes training faster on a CPU without native bf16, measured variant against variant in one run.

    python bench/run.py --only prepare          # once: bench/work/data-bin (deb-en-de, joint BPE 8000)
    python bench/studies/cpu_training.py [--steps 60] [--warmup 20] [--rounds 2]
        [--variants fp32,fp32-compile,bf16]

Each variant trains transformer-small (the deb-en-de recipe's config, batches of 4,096 tokens) for
``--steps`` updates as its own `mtkit train` process and reports target tokens/s over the updates after
``--warmup`` (bench/run.py's ``throughput``: validation excluded; torch.compile's compilation falls in
the warm-up). Rounds interleave the variants, so that a slow minute of a shared machine hurts all alike.
Variants (``--set`` overrides of the recipe's config):

* ``fp32``          what ``precision: auto`` picks where the CPU has no native bf16;
* ``fp32-compile``  the same with ``training.compile: true`` (torch.compile of the model, dynamic shapes);
* ``bf16``          bf16 autocast, which such a CPU emulates (what ``auto`` avoids there);
* ``fp32-1thread``  one thread, for the scaling from 1 to 2 cores.

The machine (CPU model, its AVX-512 / bf16 flags) is printed with the table; add the figures to
docs/notebook with this command and the date.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: run.py
from run import corpus_files, default_data, machine_info, mtkit, run_measured, throughput, write_config  # noqa: E402

VARIANTS = {
    "fp32": ["training.precision=fp32"],
    "fp32-compile": ["training.precision=fp32", "training.compile=true"],
    "bf16": ["training.precision=bf16"],
    "fp32-1thread": ["training.precision=fp32", "training.threads=1"],
}


def cpu_flags() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        flags = next(line for line in lines if line.startswith("flags"))
    except (OSError, StopIteration):
        return "unknown"
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "avx512_vnni", "avx_vnni")
    return " ".join(f for f in wanted if f" {f}" in flags) or "none of " + ", ".join(wanted)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path(__file__).resolve().parents[1] / "work")
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variants", default="fp32,fp32-compile,bf16")
    args = parser.parse_args(argv)
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; choose from {', '.join(VARIANTS)}")
    data_bin = args.work / "data-bin"
    if not (data_bin / "meta.json").is_file():
        print(f"error: no prepared data in {data_bin}: run `python bench/run.py --only prepare` first",
              file=sys.stderr)
        return 1
    files = corpus_files(default_data())
    rates: dict[str, list[float]] = {v: [] for v in names}
    for r in range(args.rounds):
        for name in names:
            model_dir = args.work / "cpu-training" / name
            shutil.rmtree(model_dir, ignore_errors=True)
            training = {"max_steps": args.steps, "max_time": 0, "max_epochs": 0, "log_every": 5,
                        "validate_every": 100000, "device": "cpu"}
            cfg = write_config("transformer", args.work / "cpu-training" / f"{name}.yaml", files, data_bin,
                               model_dir, training)
            overrides = [a for s in VARIANTS[name] for a in ("--set", s)]
            command = mtkit("train", str(cfg), "--no-resume", *overrides)
            log = args.work / "cpu-training" / f"{name}-{r}.log"
            wall, _ = run_measured(command, log)
            rate = throughput(model_dir / "metrics.jsonl", args.warmup)["tgt_tokens_per_s"]
            rates[name].append(rate)
            print(f"round {r + 1} {name}: {rate:,.0f} target tok/s (command {wall:.0f} s)", file=sys.stderr,
                  flush=True)
    info = machine_info()
    print(f"\nmachine: {info.get('cpu', platform.processor())}; flags: {cpu_flags()}; "
          f"torch {info.get('torch')}; {args.steps} updates, rate over those after {args.warmup}")
    base = statistics.median(rates[names[0]])
    print("| variant | target tok/s per round | median | vs " + names[0] + " |")
    print("| --- | --- | --- | --- |")
    for name in names:
        med = statistics.median(rates[name])
        print(f"| {name} | {', '.join(f'{x:,.0f}' for x in rates[name])} | {med:,.0f} | {med / base:.2f}× |")
    (args.work / "cpu-training" / "results.json").write_text(json.dumps(
        {"machine": info, "flags": cpu_flags(), "steps": args.steps, "warmup": args.warmup, "rates": rates},
        indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
