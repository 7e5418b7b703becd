"""`python bench/run.py --only gpu`: training and decoding speed on one CUDA GPU (issue #20).

Runs, each a whole `mtkit` command on the deb-en-de data prepared by the bench's prepare part:

* small         transformer-small with the recipe's settings (max_tokens 4,096, bf16) for --gpu-steps
                updates (default 1,600; validation only at the end), as mtkit trains by default on a GPU
                (shape buckets, updates replayed as CUDA graphs); then the test set translated greedy
                and beam 5: BLEU and sentences/s of the whole command;
* small_no_graphs  the same with training.cuda_graphs=off (eager updates: the default until 2026-11-25);
* small_eager   the same with training.shape_buckets=off (and so no graphs: how mtkit trained on a GPU
                before buckets), for --gpu-eager-steps updates;
* small_32k     CUDA graphs and max_tokens 32,768, for 400 updates (the speed a card that fits it gets);
* base          transformer-base (recipes/deb-en-de/transformer-base.yaml) with CUDA graphs, 400 updates.

For each training: target tokens/s over updates 1-1,000 and 1,000-2,000 (the first-epoch test: their
ratio), over the whole run and as mtkit's own summary line says it; the model FLOP utilisation; peak
and first/last resident size of the process; the command's wall time. Without a GPU the part is
skipped (noted in results.json).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

WINDOWS = ((0, 1000), (1000, 2000))


def _events(metrics: Path) -> list[dict[str, Any]]:
    lines = metrics.read_text(encoding="utf-8").splitlines()
    return [e for e in (json.loads(x) for x in lines if x.strip()) if e.get("event") == "train"]


def window_rates(metrics: Path) -> dict[str, Any]:
    """Tokens/s and MFU over update windows, time-weighted from the logged intervals (each train event
    holds its interval's rate; the run is fresh and validates only at its end)."""
    events = _events(metrics)
    out: dict[str, Any] = {}
    intervals = []
    prev_step, prev_elapsed = 0, 0.0
    for e in events:
        seconds = e["elapsed"] - prev_elapsed
        intervals.append((prev_step, e["step"], seconds, e["tokens_per_s"] * seconds,
                          (e.get("mfu") or 0.0) * seconds))
        prev_step, prev_elapsed = e["step"], e["elapsed"]
    for lo, hi in WINDOWS + ((0, 10**9),):
        chosen = [x for x in intervals if x[0] >= lo and x[1] <= hi]
        seconds = sum(x[2] for x in chosen)
        if seconds <= 0:
            continue
        name = "all" if hi == 10**9 else f"{lo + 1}-{hi}"
        out[f"tok_per_s_{name}"] = round(sum(x[3] for x in chosen) / seconds)
        out[f"mfu_{name}"] = round(sum(x[4] for x in chosen) / seconds, 4)
    first, second = out.get("tok_per_s_1-1000"), out.get("tok_per_s_1001-2000")
    if first and second:
        out["first_window_over_second"] = round(first / second, 3)
    rss = [e["rss_mib"] for e in events if e.get("rss_mib")]
    if rss:
        out["rss_mib_first_log"], out["rss_mib_last_log"] = rss[0], rss[-1]
    return out


def _summary(log: Path) -> str | None:
    found = re.findall(r"^speed: .*$", log.read_text(encoding="utf-8", errors="replace"), re.M)
    return found[-1] if found else None


def bench_gpu(args: argparse.Namespace, files: dict[str, Path], tools: Any) -> dict[str, Any]:
    """``tools``: the bench module (run_measured, mtkit, write_config, count_lines, bleu_of, ...)."""
    import torch

    if not torch.cuda.is_available():
        return tools._skipped("gpu", "no CUDA GPU on this machine")
    if not (args.work / "data-bin" / "meta.json").is_file():
        raise tools.BenchError(f"no prepared data in {args.work / 'data-bin'}: run the prepare part first")
    steps, eager_steps = args.gpu_steps, args.gpu_eager_steps
    runs = {
        "small": ("transformer", steps, {}),
        "small_no_graphs": ("transformer", steps, {"cuda_graphs": "off"}),
        "small_eager": ("transformer", eager_steps, {"shape_buckets": "off"}),
        "small_32k": ("transformer", 400, {"max_tokens": 32768}),
        "base": ("transformer-base", 400, {}),
    }
    results: dict[str, Any] = {"device": torch.cuda.get_device_name(0), "precision": "bf16"}
    logs = args.work / "logs"
    for name, (arch, total, extra) in runs.items():
        if args.gpu_runs and name not in args.gpu_runs:
            continue
        model_dir = args.work / f"gpu-{name}"
        shutil.rmtree(model_dir, ignore_errors=True)
        training = {"max_steps": total, "max_time": 0, "max_epochs": 0, "log_every": 100,
                    "validate_every": total, "valid_max_sentences": 300, "device": "cuda",
                    "precision": "bf16", **extra}
        cfg = tools.write_config(arch, args.work / f"gpu-{name}.yaml", files, args.work / "data-bin",
                                 model_dir, training)
        print(f"gpu: train {name} ({arch}, {total} updates) ...", file=sys.stderr, flush=True)
        log = logs / f"gpu-train-{name}.log"
        wall, rss = tools.run_measured(tools.mtkit("train", str(cfg), "--no-resume"), log)
        entry: dict[str, Any] = {"arch": arch, "updates": total, "settings": extra,
                                 "command_seconds": round(wall, 2), "peak_rss_mib": tools._mib(rss),
                                 **window_rates(model_dir / "metrics.jsonl"), "summary": _summary(log)}
        results[name] = entry
    model = args.work / "gpu-small"
    if (model / "checkpoint_last.pt").is_file() and (not args.gpu_runs or "small" in args.gpu_runs):
        sentences = tools.count_lines(files["test_src"])
        for mode, flags in (("greedy", ["--greedy"]), ("beam5", ["--beam", "5"])):
            hyp = args.work / f"gpu-hyp.{mode}"
            print(f"gpu: translate {mode} ...", file=sys.stderr, flush=True)
            wall, rss = tools.run_measured(
                tools.mtkit("translate", "--model", str(model), "--checkpoint", "last", "--device", "cuda",
                            *flags, "-i", str(files["test_src"]), "-o", str(hyp)),
                logs / f"gpu-translate-{mode}.log")
            results["small"][mode] = {"command_seconds": round(wall, 2),
                                      "sentences_per_s": round(sentences / wall, 1),
                                      "bleu": tools.bleu_of(hyp, files["test_tgt"]),
                                      "peak_rss_mib": tools._mib(rss)}
    return results
