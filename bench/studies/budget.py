#!/usr/bin/env python3
"""Learning curves under a fixed training budget: which settings make the best model in M minutes.

    python bench/studies/budget.py --config recipes/demo/transformer.yaml --data-bin DIR \\
        --test-src test.en --test-ref test.de --minutes 9 --variants today,budget [--set KEY=VALUE ...]
        [--beam 5] [--out bench/results/budget-NAME]
    python bench/studies/budget.py --replot NAME=MODEL_DIR [NAME=MODEL_DIR ...] --out curves.png

Each variant is one `mtkit train CONFIG --max-time M` process on the prepared data (``--data-bin``, as
`mtkit prepare` wrote it from the same config), with the variant's ``--set`` overrides on top of the
common ones; the variants run one after another, alternating in ``--rounds`` > 1, on an otherwise idle
machine. Each variant's model (checkpoint_best.pt) then translates the test set, and `mtkit score`
compares every variant with the first (paired bootstrap, 1,000 resamples). Written to ``--out``:
results.json (per variant: updates, CPU-seconds, last LR / peak LR, best and final dev scores, test
BLEU/chrF with their 95% intervals and p-values, the dev curve), curves.png (dev BLEU and dev loss against
training CPU-seconds) and the score table. The CPU (lscpu model name and its bf16 flags) and its fp32
GEMM speed (1024² products, every thread, measured before the runs under the same environment, so
ONEDNN_MAX_CPU_ISA / MKL_ENABLE_INSTRUCTIONS caps count) are recorded.

Variants (``--set`` overrides of the config; add more with --variant NAME=KEY=VALUE,KEY=VALUE):

* ``today``        the demo's config before the budget schedules (fixtures/demo-inverse-sqrt.yaml:
                   inverse_sqrt, warm-up 200, lr 0.002, dropout 0.1): the control;
* ``shipped``      ``--config`` as it is (for the demo: what ships now);
* ``budget``       cosine decay to 0 over the measured budget, warm-up 5% of it;
* ``budget-linear`` the same with linear decay;
* ``budget-ema``   ``budget`` with a weight average (ema_decay 0.998);
* ``budget-drop0`` ``budget`` without dropout (less than about one epoch is seen);
* ``budget-lr3``   ``budget`` with lr 0.003.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parent / "fixtures"
#: the demo's settings before the budget schedules, as a whole config (a variant's "@config=PATH")
TODAY = [f"@config={FIXTURES / 'demo-inverse-sqrt.yaml'}"]
BUDGET = ["training.schedule=cosine", "training.warmup_fraction=0.05", "training.warmup_steps=100"]
VARIANTS: dict[str, list[str]] = {
    "today": TODAY,
    "shipped": [],  # --config as it is
    "budget": BUDGET,
    "budget-linear": [*BUDGET, "training.schedule=linear"],
    "budget-ema": [*BUDGET, "training.ema_decay=0.998"],
    "budget-drop0": [*BUDGET, "model.dropout=0.0"],
    "budget-lr3": [*BUDGET, "training.lr=0.003"],
}


def mtkit(*args: str) -> list[str]:
    return [sys.executable, "-m", "mtkit", *args]


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        model = re.search(r"Model name:\s*(.+)", out)
        flags = re.search(r"Flags:\s*(.+)", out)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    bf16 = [f for f in ("avx512_bf16", "amx_bf16") if flags and f in flags.group(1).split()]
    isa = os.environ.get("ONEDNN_MAX_CPU_ISA")
    return (f"{model.group(1).strip() if model else 'unknown'}, {os.cpu_count()} cores, "
            f"native bf16: {', '.join(bf16) or 'none'}" + (f", ONEDNN_MAX_CPU_ISA={isa}" if isa else ""))


def gemm_gflops(size: int = 1024, seconds: float = 2.0) -> float:
    """fp32 matrix-product speed of this machine with every allowed thread (GFLOP/s, the best of
    repeated size³ products over `seconds`): the figure budgets are stated against."""
    import torch

    a, b = torch.randn(size, size), torch.randn(size, size)
    for _ in range(3):
        a @ b
    best, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        for _ in range(4):
            a @ b
        best = max(best, 4 * 2 * size ** 3 / (time.perf_counter() - start) / 1e9)
    return round(best, 1)


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def read_events(metrics: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines() if line.strip()]


def train_variant(args: argparse.Namespace, name: str, sets: list[str], model_dir: Path) -> dict[str, Any]:
    config = next((item.partition("=")[2] for item in sets if item.startswith("@config=")), str(args.config))
    cmd = mtkit("train", config, "--set", f"data.dir={args.data_bin}", "--set",
                f"training.model_dir={model_dir}", "--max-time", str(args.minutes), "--no-resume")
    for item in [*args.set, *sets]:
        if not item.startswith("@config="):
            cmd += ["--set", item]
    cpu_before, wall_before = children_cpu_seconds(), time.monotonic()
    with open(model_dir.with_suffix(".log"), "w", encoding="utf-8") as log:
        subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT)
    cpu, wall = children_cpu_seconds() - cpu_before, time.monotonic() - wall_before
    events = read_events(model_dir / "metrics.jsonl")
    train = [e for e in events if e["event"] == "train"]
    valid = [e for e in events if e["event"] == "valid"]
    peak = max(e["lr"] for e in train)
    last_lr = valid[-1]["lr"] if valid else None  # the final validation follows the last update
    # CPU-seconds of each validation's moment: the process's CPU time scales with its wall time
    curve = [{"step": e["step"], "elapsed": e["elapsed"], "cpu_s": round(cpu * e["elapsed"] / wall, 1),
              "dev_bleu": e.get("dev_bleu"), "dev_loss": e.get("dev_loss"), "weights": e.get("weights")}
             for e in valid]
    return {"name": name, "sets": sets, "updates": valid[-1]["step"] if valid else None,
            "train_cpu_s": round(cpu, 1),
            "train_wall_s": round(wall, 1), "peak_lr": peak, "last_lr": last_lr,
            "last_lr_share": last_lr / peak if last_lr is not None else None,
            "best_dev_bleu": max((e["dev_bleu"] for e in valid if e.get("dev_bleu") is not None),
                                 default=None),
            "final_dev_loss": valid[-1].get("dev_loss") if valid else None, "curve": curve}


def translate(args: argparse.Namespace, model_dir: Path, hyp: Path) -> float:
    start = time.monotonic()
    subprocess.run(mtkit("translate", "--model", str(model_dir), "--beam", str(args.beam), "-i",
                         str(args.test_src), "-o", str(hyp)), check=True, stderr=subprocess.DEVNULL)
    return time.monotonic() - start


def replot(specs: list[str], out: Path) -> None:
    """Curves of finished runs (NAME=MODEL_DIR each) in one figure, against their wall seconds."""
    results = []
    for spec in specs:
        name, _, model_dir = spec.partition("=")
        valid = [e for e in read_events(Path(model_dir) / "metrics.jsonl") if e["event"] == "valid"]
        results.append({"name": name, "curve": [{"x": e["elapsed"], "dev_bleu": e.get("dev_bleu"),
                                                 "dev_loss": e.get("dev_loss")} for e in valid]})
    plot(results, out, xlabel="seconds of the run (training and validation, 2 cores)")


def plot(results: list[dict[str, Any]], out: Path, xlabel: str = "training CPU-seconds") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (bleu_ax, loss_ax) = plt.subplots(1, 2, figsize=(11, 4))
    for r in results:
        xs = [p.get("x", p.get("cpu_s")) for p in r["curve"]]
        bleu_ax.plot(xs, [p["dev_bleu"] for p in r["curve"]], marker="o", label=r["name"])
        loss_ax.plot(xs, [p["dev_loss"] for p in r["curve"]], marker="o", label=r["name"])
    bleu_ax.set(xlabel=xlabel, ylabel="dev BLEU (greedy)")
    loss_ax.set(xlabel=xlabel, ylabel="dev loss (nats/token)")
    bleu_ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path)
    parser.add_argument("--data-bin", type=Path)
    parser.add_argument("--test-src", type=Path)
    parser.add_argument("--test-ref", type=Path)
    parser.add_argument("--minutes", type=float, default=9.0)
    parser.add_argument("--variants", default="today,budget")
    parser.add_argument("--variant", action="append", default=[], help="NAME=KEY=VALUE,KEY=VALUE")
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE for every variant")
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("bench/results/budget"))
    parser.add_argument("--replot", nargs="+", metavar="NAME=MODEL_DIR",
                        help="no training: draw the dev curves of finished runs into --out (a PNG file)")
    args = parser.parse_args(argv)
    if args.replot:
        replot(args.replot, args.out)
        return 0
    missing = [o for o in ("config", "data_bin", "test_src", "test_ref") if getattr(args, o) is None]
    if missing:
        parser.error(f"--{missing[0].replace('_', '-')} is required (unless --replot)")
    variants = dict(VARIANTS)
    for spec in args.variant:
        name, _, sets = spec.partition("=")
        variants[name] = sets.split(",")
    names = args.variants.split(",")
    unknown = [n for n in names if n not in variants]
    if unknown:
        parser.error(f"unknown variants {unknown}: {', '.join(variants)}")
    args.out.mkdir(parents=True, exist_ok=True)
    gflops = gemm_gflops()
    print(f"{cpu_name()}: fp32 GEMM {gflops} GFLOP/s", flush=True)
    results: list[dict[str, Any]] = []
    for round_no in range(args.rounds):
        for name in names if round_no % 2 == 0 else names[::-1]:
            label = name if args.rounds == 1 else f"{name}.r{round_no + 1}"
            print(f"== {label}: {args.minutes:g} min", flush=True)
            model_dir = args.out / f"model-{label}"
            result = train_variant(args, label, variants[name], model_dir)
            hyp = args.out / f"hyp-{label}.txt"
            result["translate_s"] = round(translate(args, model_dir, hyp), 1)
            result["hyp"] = str(hyp)
            results.append(result)
            print(json.dumps({k: v for k, v in result.items() if k != "curve"}), flush=True)
    score = subprocess.run(mtkit("score", "--ref", str(args.test_ref), "--metrics", "bleu,chrf", "--json",
                                 *[x for r in results for x in ("--hyp", r["hyp"])]),
                           capture_output=True, text=True, check=True)
    table = subprocess.run(mtkit("score", "--ref", str(args.test_ref), "--metrics", "bleu,chrf",
                                 *[x for r in results for x in ("--hyp", r["hyp"])]),
                           capture_output=True, text=True, check=True).stdout
    (args.out / "scores.txt").write_text(table, encoding="utf-8")
    record = {"date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(), "fp32_gemm_gflops": gflops,
              "minutes": args.minutes,
              "config": str(args.config), "common_sets": args.set, "beam": args.beam,
              "variants": results, "scores": json.loads(score.stdout)}
    (args.out / "results.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    plot(results, args.out / "curves.png")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
