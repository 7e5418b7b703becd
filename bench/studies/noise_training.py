#!/usr/bin/env python3
"""What noise costs a model and what cleaning wins back: one training budget on the clean, the noisy
and the cleaned corpus of the noise benchmark (bench/studies/noise.py), and the models that score
pairs for `mtkit clean --score-models`.

    python bench/studies/noise_training.py --noise DIR [--steps 1200] [--data ../shared/data]
        [--variants clean,noisy,cleaned,reverse] [--out DIR]

DIR is noise.py's output (noisy.{en,de}, cleaned.{en,de}). Each variant is `mtkit prepare` (its own BPE,
as a user would make it) and `mtkit train` for ``--steps`` updates (a budget in updates, not minutes, so
that other work on the machine cannot change it) with recipes/demo/transformer.yaml's settings, on:

* ``clean``    deb-en-de's training pairs as shipped (the control);
* ``noisy``    the same with the benchmark's noise (26% of the pairs);
* ``cleaned``  what `mtkit clean` kept of the noisy corpus;
* ``reverse``  the cleaned corpus de→en: with ``cleaned``, the two models of the dual conditional
  cross-entropy score.

Each en→de model translates deb-en-de's test set (greedy) and `mtkit score` compares the variants with
``clean`` (BLEU, chrF, paired bootstrap). Written to OUT: each run's directory and results.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "recipes" / "demo" / "transformer.yaml"


def mtkit(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "mtkit", *args], check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--noise", type=Path, required=True)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--variants", default="clean,noisy,cleaned,reverse")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = (args.out or args.noise / "training").resolve()
    out.mkdir(parents=True, exist_ok=True)
    de = args.data / "deb-en-de"
    train = {"clean": (de / "train.en.gz", de / "train.de.gz"),
             "noisy": (args.noise / "noisy.en", args.noise / "noisy.de"),
             "cleaned": (args.noise / "cleaned.en", args.noise / "cleaned.de")}
    train["reverse"] = train["cleaned"]
    results: dict[str, dict] = {}
    for name in args.variants.split(","):
        src, tgt = train[name]
        sides = ("de", "en") if name == "reverse" else ("en", "de")
        if name == "reverse":
            src, tgt = tgt, src
        run = out / name
        dev_src, dev_tgt = (de / f"dev.{side}" for side in sides)
        sets = [f"data.train_src={Path(src).resolve()}", f"data.train_tgt={Path(tgt).resolve()}",
                f"data.dev_src={dev_src.resolve()}", f"data.dev_tgt={dev_tgt.resolve()}",
                f"data.src_lang={sides[0]}", f"data.tgt_lang={sides[1]}", f"data.dir={run / 'data-bin'}",
                f"training.model_dir={run / 'model'}", f"training.max_steps={args.steps}",
                "training.max_time=0"]  # a budget in updates: the machine's other work cannot change it
        set_args = [x for s in sets for x in ("--set", s)]
        started = time.perf_counter()
        mtkit("prepare", str(CONFIG), *set_args)
        mtkit("train", str(CONFIG), *set_args)
        trained = time.perf_counter() - started
        record = {"seconds": round(trained, 1), "model": str(run / "model")}
        if name != "reverse":
            hyp = run / "test.hyp.de"
            mtkit("translate", "-m", str(run / "model"), "--greedy", "-i", str(de / "test.en"),
                  "-o", str(hyp))
            record["hyp"] = str(hyp)
        results[name] = record
        (out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    hyps = [results[n]["hyp"] for n in ("clean", "noisy", "cleaned") if n in results and "hyp" in results[n]]
    if hyps:
        hyp_args = [x for h in hyps for x in ("--hyp", h)]
        table = subprocess.run([sys.executable, "-m", "mtkit", "score", *hyp_args,
                                "--ref", str(de / "test.de"), "--metrics", "bleu,chrf", "--json"],
                               check=True, capture_output=True, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout
        results["scores"] = json.loads(table)
        (out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(json.dumps(results["scores"], indent=1))


if __name__ == "__main__":
    main()
