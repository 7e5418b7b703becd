#!/usr/bin/env python3
"""`make gpu` with budget-aware training on a lent card, in one prepared script (issue #66).

    python bench/gpu_budget.py [--data ../shared/data/deb-en-de] [--minutes 5] [--dry-run]
        [--out bench/results/gpu-budget.json]

On the card (at most ~9 minutes of wall time with the 5 training minutes):

1. copies recipes/ into a scratch directory (the repository's own recipes/deb-en-de/work is left alone)
   and runs `make gpu` there on the deb-en-de corpus (``--data``): prepare (joint BPE 8,000), then
   transformer-base trained for ``--minutes`` with a budget-aware schedule (``BUDGET_ARGS``: the recipe's
   inverse_sqrt with a linear cooldown to 0 over the last 20% of the updates the minutes allow, measured
   as the run goes), the last checkpoints averaged, the test set translated with beam 5 from the best
   and from the average, scored;
2. reads back what the run recorded: target tokens/s and the model FLOP utilisation of mtkit's own speed
   line (MFU = model FLOPs of the updates, forward and backward, as `mtkit.train.flops` counts them,
   over the training seconds, over the card's data-sheet bf16 peak: 989 TFLOP/s for an H100 or H200
   SXM), the peak of the card's allocated memory (``gpu_peak_mib`` of metrics.jsonl), the shape trained
   and the budget's plan;
3. writes one JSON file (keys ``card``, ``train_minutes``, ``test_bleu``, ``tokens_per_s``, ``mfu``,
   ``peak_mem_gib``, ``shape``, ``script_wall_s``, and the details) and prints a one-line summary.

``--dry-run`` does the same on the CPU in seconds: a 2,000-pair slice of the corpus, a BPE of 600
pieces, a tiny fp32 model trained for 40 updates (the same schedule, its cooldown over steps instead
of minutes), `--device cpu` (tests/test_gpu_budget.py runs it). Without
``--data`` the corpus is ../shared/data/deb-en-de beside the repository.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # mtkit from this tree, as the make run below uses it
from mtkit.config.experiment import load_config  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "deb-en-de"
#: the budget-aware training the card run uses on top of recipes/deb-en-de/transformer-base.yaml
#: (the recipe's inverse_sqrt with a 20% cooldown to 0 at the budget's end: what won on the demo's CPU
#: budget, docs/notebook/budget.md; a card run decides whether it wins there too)
BUDGET_ARGS = ["--set", "training.cooldown_fraction=0.2"]
#: the dry run's model and data: tiny, so that the whole chain runs in seconds on a CPU
DRY_MODEL = ["--set", "model.d_model=32", "--set", "model.heads=2", "--set", "model.d_ff=64",
             "--set", "model.encoder_layers=1", "--set", "model.decoder_layers=1",
             "--set", "training.max_tokens=1024", "--set", "training.validate_every=20",
             "--set", "training.valid_max_sentences=20", "--set", "training.log_every=5",
             "--set", "training.precision=fp32"]
DRY_STEPS = 40  # the dry run's budget: updates, not minutes (a slow CI minute must not change the chain)
DRY_LINES = {"train": 2000, "dev": 20, "test": 20}
SPEED_LINE = re.compile(r"speed: ([\d,.]+) tgt tok/s over ([\d,.]+) s of training"
                        r"(?:, model FLOP utilisation ([\d.]+)%)?")


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def slice_corpus(data: Path, out: Path) -> Path:
    """The dry run's corpus: the first lines of each file of `data`."""
    out.mkdir(parents=True, exist_ok=True)
    for split, n in DRY_LINES.items():
        for lang in ("en", "de"):
            name = f"{split}.{lang}" + (".gz" if split == "train" else "")
            opener = gzip.open if name.endswith(".gz") else open
            with opener(data / name, "rt", encoding="utf-8") as f:
                lines = [line for _, line in zip(range(n), f, strict=False)]
            with opener(out / name, "wt", encoding="utf-8") as f:
                f.writelines(lines)
    return out


def scratch_recipes(scratch: Path, dry_run: bool) -> Path:
    """A copy of recipes/ to run `make gpu` in; for the dry run, a BPE the slice can train."""
    shutil.copytree(ROOT / "recipes", scratch / "recipes", ignore=shutil.ignore_patterns("work"))
    recipe = scratch / "recipes" / "deb-en-de"
    if dry_run:
        for config in ("transformer.yaml", "transformer-base.yaml"):
            path = recipe / config
            path.write_text(path.read_text(encoding="utf-8").replace("vocab_size: 8000", "vocab_size: 600"),
                            encoding="utf-8")
    return recipe


def read_run(recipe: Path, log: str) -> dict[str, Any]:
    """What the run recorded: speed, MFU, memory, shape, plan, scores."""
    model_dir = recipe / "work" / "transformer-base"
    events = [json.loads(x) for x in (model_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
              if x.strip()]
    config = load_config(model_dir / "config.yaml")  # the resolved config the run wrote
    model = config.model
    meta = json.loads((recipe / "work" / "data-bin" / "meta.json").read_text(encoding="utf-8"))
    speed = SPEED_LINE.search(log)
    train = [e for e in events if e["event"] == "train"]
    plans = [e for e in events if e["event"] == "plan"]
    valid = [e for e in events if e["event"] == "valid"]
    peak_mib = max((e.get("gpu_peak_mib") or 0 for e in train), default=0)
    scores = (recipe / "work" / "gpu-scores.txt").read_text(encoding="utf-8")
    return {
        "tokens_per_s": _number(speed.group(1)) if speed else None,
        "train_seconds": _number(speed.group(2)) if speed else None,
        "mfu": float(speed.group(3)) / 100 if speed and speed.group(3) else None,
        "peak_mem_gib": round(peak_mib / 1024, 2) if peak_mib else None,
        "shape": {"d_model": model.d_model, "heads": model.heads, "d_ff": model.d_ff,
                  "encoder_layers": model.encoder_layers, "decoder_layers": model.decoder_layers,
                  "vocab": meta["tgt_vocab_size"], "max_tokens": config.training.max_tokens},
        "updates": valid[-1]["step"] if valid else None,
        "plan": plans[-1] if plans else None,
        "last_lr": train[-1]["lr"] if train else None,
        "peak_lr": max((e["lr"] for e in train), default=None),
        "best_dev_bleu": max((e.get("dev_bleu") or 0 for e in valid), default=None),
        "scores_table": scores,
        "test_bleu_by_system": test_bleu(recipe),
    }


def test_bleu(recipe: Path) -> dict[str, float]:
    """BLEU (sacrebleu's defaults, as `mtkit score`) of each test translation `make gpu` wrote."""
    import sacrebleu

    work = recipe / "work"
    refs = (work / "data" / "test.de").read_text(encoding="utf-8").splitlines()
    scores = {}
    for hyp in sorted((work / "hyp").glob("transformer-base.*.de")):
        lines = hyp.read_text(encoding="utf-8").splitlines()
        scores[hyp.name] = round(sacrebleu.corpus_bleu(lines, [refs]).score, 2)
    return scores


def card_name(device: str) -> str:
    if device == "cpu":
        return "cpu (dry run)"
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--dry-run", action="store_true", help="tiny data and model, on the CPU, in seconds")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gpu-budget.json")
    parser.add_argument("--keep", type=Path, help="keep the scratch directory here (default: removed)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    if not (args.data / "train.en.gz").is_file():
        print(f"error: {args.data}/train.en.gz not found; pass --data DIR (deb-en-de)", file=sys.stderr)
        return 2
    device = "cpu" if args.dry_run else "cuda"
    if not args.dry_run and card_name(device) == "no CUDA device":
        print("error: no CUDA device: this script is for a lent card (or --dry-run)", file=sys.stderr)
        return 2
    minutes = 0 if args.dry_run else args.minutes
    scratch = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gpu-budget-"))
    try:
        data = slice_corpus(args.data, scratch / "data") if args.dry_run else args.data.resolve()
        recipe = scratch_recipes(scratch, args.dry_run)
        train_args = BUDGET_ARGS + (DRY_MODEL if args.dry_run else [])
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        cmd = ["make", "-C", str(recipe), "gpu", f"DATA={data}", f"GPU_TIME={minutes}",
               f"GPU_DEVICE={device}",
               f"PYTHON={sys.executable}", f"AVERAGE={1 if args.dry_run else 5}",
               f"STEPS={DRY_STEPS if args.dry_run else 0}",
               "TRAIN_ARGS=" + " ".join(train_args)]
        print("$ " + " ".join(cmd), flush=True)
        made = subprocess.run(cmd, env=env, capture_output=True, text=True)
        log = made.stdout + made.stderr
        (scratch / "make.log").write_text(log, encoding="utf-8")
        if made.returncode != 0:
            print(log[-3000:], file=sys.stderr)
            print(f"error: make gpu failed (exit {made.returncode}); log: {scratch / 'make.log'}",
                  file=sys.stderr)
            return 1
        run = read_run(recipe, log)
        bleu = run["test_bleu_by_system"]
        details = {k: v for k, v in run.items() if k not in ("shape", "mfu", "tokens_per_s", "peak_mem_gib")}
        record = {"card": card_name(device), "train_minutes": minutes,
                  "test_bleu": max(bleu.values()) if bleu else None, "tokens_per_s": run["tokens_per_s"],
                  "mfu": run["mfu"], "peak_mem_gib": run["peak_mem_gib"], "shape": run["shape"],
                  "script_wall_s": round(time.monotonic() - started, 1), "dry_run": args.dry_run,
                  "date": time.strftime("%Y-%m-%d"), "budget_args": BUDGET_ARGS,
                  "mfu_definition": "model FLOPs (forward + backward, mtkit.train.flops) / training seconds "
                                    "/ the card's bf16 data-sheet peak", **details}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        tmp.replace(args.out)
        mfu = f"{100 * record['mfu']:.1f}%" if record["mfu"] is not None else "n/a"
        print(f"{record['card']}: {minutes:g} min, {run['updates']} updates, "
              f"test BLEU {record['test_bleu']}, "
              f"{record['tokens_per_s'] or 0:,.0f} tgt tok/s, MFU {mfu}, peak {record['peak_mem_gib']} GiB, "
              f"{record['script_wall_s']:.0f} s in all -> {args.out}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
