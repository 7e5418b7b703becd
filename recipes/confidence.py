"""How well `mtkit translate`'s per-sentence confidence ranks bad translations (docs/translate.md#confidence).

    python recipes/confidence.py --json test.hyp.jsonl --ref test.de [--out report.json]

reads the JSON lines of `mtkit translate --json` (each with "text" and "confidence") and the reference
file, scores every translation with sentence chrF (sacrebleu's sentence_chrf), and prints:

- Spearman's rank correlation between confidence and sentence chrF (ties get their average rank;
  numpy only), and Pearson's on the values;
- the test sentences in five equal groups by confidence, lowest first: their confidence range and
  mean sentence chrF, i.e. what a reviewer who reads the least confident fifth first would find;
- how many of the worst translations (the bottom decile by sentence chrF) the least confident decile
  holds (10% is what a random order gives).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``x``, ties sharing their average rank (as scipy.stats.rankdata's default)."""
    n = len(x)
    order = np.argsort(x, kind="mergesort")
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.arange(n)
    ordered = x[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    group = np.cumsum(first)[inverse]  # 1-based group of equal values, for each element
    bounds = np.r_[np.flatnonzero(first), n]  # each group's start, then n
    return 0.5 * (bounds[group - 1] + 1 + bounds[group])


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


def report(confidence: np.ndarray, chrf: np.ndarray, groups: int = 5) -> dict:
    order = np.argsort(confidence, kind="mergesort")
    parts = np.array_split(order, max(1, min(groups, len(order))))  # no empty group for tiny inputs
    worst = set(np.argsort(chrf, kind="mergesort")[: len(chrf) // 10].tolist())
    least = order[: len(chrf) // 10].tolist()
    return {
        "sentences": len(chrf),
        "spearman": spearman(confidence, chrf),
        "pearson": float(np.corrcoef(confidence, chrf)[0, 1]),
        "mean_chrf": float(chrf.mean()),
        "groups": [{"confidence_from": float(confidence[p].min()),
                    "confidence_to": float(confidence[p].max()),
                    "sentences": len(p), "mean_chrf": float(chrf[p].mean())} for p in parts],
        "worst_decile_in_least_confident_decile": sum(i in worst for i in least) / max(1, len(worst)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", required=True, help="`mtkit translate --json` output")
    parser.add_argument("--ref", required=True, help="reference translations, one a line")
    parser.add_argument("--out", help="also write the figures here as JSON")
    args = parser.parse_args(argv)
    from sacrebleu import sentence_chrf

    records = [json.loads(line) for line in Path(args.json).read_text(encoding="utf-8").splitlines()]
    refs = Path(args.ref).read_text(encoding="utf-8").splitlines()
    if len(records) != len(refs):
        print(f"error: {args.json} has {len(records)} lines but {args.ref} has {len(refs)}", file=sys.stderr)
        return 1
    confidence = np.array([r["confidence"] for r in records], dtype=np.float64)
    chrf = np.array([sentence_chrf(r["text"], [ref]).score for r, ref in zip(records, refs, strict=True)])
    figures = report(confidence, chrf)
    print(f"{figures['sentences']:,} sentences: Spearman(confidence, sentence chrF) = "
          f"{figures['spearman']:.3f}, Pearson = {figures['pearson']:.3f}; mean sentence chrF "
          f"{figures['mean_chrf']:.1f}")
    print("by confidence, lowest fifth first:")
    for g in figures["groups"]:
        print(f"  confidence {g['confidence_from']:.3f}-{g['confidence_to']:.3f}: {g['sentences']:,} "
              f"sentences, mean sentence chrF {g['mean_chrf']:.1f}")
    share = figures["worst_decile_in_least_confident_decile"]
    print(f"the least confident 10% hold {100 * share:.0f}% of the 10% worst translations "
          "(random order: 10%)")
    if args.out:
        Path(args.out).write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
