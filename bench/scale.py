"""`python bench/run.py --only scale`: preparation and training as the corpus grows (issue #14).

deb-en-de's training pairs repeated 1×, 10× and 100× (145k, 1.4M and 14.2M pairs; `prepare` does no
deduplication, so every copy is encoded; dev and test as they are), each prepared with the bench's
prepare config (joint BPE 8000 on a sample of at most `bpe.input_sentence_size` sentences): pairs/s
and peak RSS of the whole `mtkit prepare` command. Then transformer-small trains the same number of
updates on the smallest and on the largest data directory: target tokens/s after the warm-up, peak
RSS, and start-up (the command's seconds minus the training time it logged), which must not grow
with the corpus since training reads memory-mapped shards.

The repeated corpora are written once under WORK/scale (gzip level 1, ~1.1 GB for 100×) and reused.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
from pathlib import Path
from typing import Any

FACTORS = (1, 10, 100)


def repeated_corpus(files: dict[str, Path], factor: int, out: Path) -> dict[str, Path]:
    """The training files repeated ``factor`` times (dev and test as they are)."""
    if factor == 1:
        return files
    out.mkdir(parents=True, exist_ok=True)
    made = dict(files)
    for key in ("train_src", "train_tgt"):
        source = files[key]
        target = out / (source.name if source.suffix == ".gz" else source.name + ".gz")
        done = target.with_name(target.name + ".done")
        if not done.is_file():
            text = gzip.decompress(source.read_bytes()) if source.suffix == ".gz" else source.read_bytes()
            with gzip.open(target, "wb", compresslevel=1) as f:
                for _ in range(factor):
                    f.write(text)
            done.touch()
        made[key] = target
    return made


def _training_seconds(metrics: Path) -> float:
    events = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]
    return max((e.get("elapsed", 0.0) for e in events), default=0.0)


def bench_scale(args: argparse.Namespace, files: dict[str, Path], tools: Any) -> dict[str, Any]:
    """``tools``: the bench's run_measured, mtkit, write_config, count_lines, throughput, resident_growth."""
    results: dict[str, Any] = {"prepare": {}, "train": {}}
    bins: dict[int, tuple[Path, dict[str, Path]]] = {}
    for factor in FACTORS:
        corpus = repeated_corpus(files, factor, args.work / "scale" / f"x{factor}")
        data_bin = args.work / "scale" / f"data-bin-x{factor}"
        cfg = tools.write_config("transformer", args.work / "scale" / f"prepare-x{factor}.yaml", corpus,
                                 data_bin, args.work / "unused", {})
        pairs = sum(tools.count_lines(corpus[f"{split}_src"]) for split in ("train", "dev", "test"))
        print(f"scale: prepare {pairs:,} pairs ...", file=sys.stderr, flush=True)
        wall, rss = tools.run_measured(tools.mtkit("prepare", str(cfg), "--force"),
                                       args.work / "logs" / f"scale-prepare-x{factor}.log")
        results["prepare"][str(pairs)] = {"repeats": factor, "seconds": round(wall, 2),
                                          "pairs_per_s": round(pairs / wall, 1),
                                          "peak_rss_mib": None if rss is None else round(rss, 1)}
        bins[factor] = data_bin, corpus
    total = args.warmup + args.steps
    for factor in (FACTORS[0], FACTORS[-1]):
        model_dir = args.work / "scale" / f"model-x{factor}"
        shutil.rmtree(model_dir, ignore_errors=True)
        training = {"max_steps": total, "max_time": 0, "max_epochs": 0,
                    "log_every": max(1, min(10, args.steps // 5 or 1)), "validate_every": 10 * total,
                    "device": args.device}
        if args.quick:
            training["max_tokens"] = 1024  # a smoke run
        data_bin, corpus = bins[factor]
        cfg = tools.write_config("transformer", args.work / "scale" / f"train-x{factor}.yaml", corpus,
                                 data_bin, model_dir, training)
        print(f"scale: train {total} updates on the {factor}× data ...", file=sys.stderr, flush=True)
        wall, rss = tools.run_measured(tools.mtkit("train", str(cfg), "--no-resume"),
                                       args.work / "logs" / f"scale-train-x{factor}.log")
        entry = tools.throughput(model_dir / "metrics.jsonl", args.warmup)
        entry.update(tools.resident_growth(model_dir / "metrics.jsonl", after=args.warmup))
        meta = json.loads((data_bin / "meta.json").read_text(encoding="utf-8"))
        trained = _training_seconds(model_dir / "metrics.jsonl")
        entry.update({"train_pairs": meta["splits"]["train"]["sentences"], "command_seconds": round(wall, 2),
                      "startup_and_exit_seconds": round(wall - trained, 2),
                      "peak_rss_mib": None if rss is None else round(rss, 1)})
        results["train"][f"x{factor}"] = entry
    return results
