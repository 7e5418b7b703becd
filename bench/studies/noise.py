#!/usr/bin/env python3
"""The noise benchmark of `mtkit clean`: clean pairs with noise of known labels injected, cleaned, and
each kind of noise's recall, each reason's precision and the clean pairs lost counted.

    python bench/studies/noise.py --data ../shared/data [--share 0.05] [--seed 1] [--out DIR]
        [--limit N] [--workers N] [--set clean.KEY=VALUE ...]

The clean pairs are deb-en-de's training pairs (human translations, deduplicated, no copies, at least
three words: ``../shared/data/README.md``). Into them go, each ``--share`` of the clean count (5%:
seven kinds, 26% of the noisy corpus, the order of magnitude of raw web-crawled corpora and of the
noise levels Khayrallah and Koehn 2018 trained on), drawn with ``--seed``:

* ``copy``: an English source as its own target (untranslated), the commonest and most harmful noise;
* ``wrong_language``: deb-en-es pairs, a Spanish target where German is expected (a corpus that mixes
  in another language's file);
* ``misaligned``: a source with the target of another pair (sentence alignment gone wrong);
* ``duplicate``: a clean pair again, half exactly, half with its case, spacing or final punctuation
  changed (crawls repeat pages), each placed after its original;
* ``truncated``: a clean pair whose target (of six words or more) is cut at 40-80% of its words
  (fixed-size fields, pages cut off);
* ``markup``: a clean pair with HTML remnants on one side (tags, entities: a page's text extracted
  badly);
* ``mojibake``: a clean pair whose target (with a non-ASCII letter) was decoded as Windows-1252
  after being written as UTF-8.

The noisy corpus and its labels are written to OUT/noisy.{en,de,label}; `mtkit clean` runs on it
(``--decisions``: one verdict per line), then so does a ten-line cleaner as the control (exact
dedup, source == target, py3langid's first guess on the target is German), in the same run. Results:
OUT/results.json and a Markdown table on stdout.
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
KINDS = ("copy", "wrong_language", "misaligned", "duplicate", "truncated", "markup", "mojibake")
REMNANTS = [("<div class=\"content\">", "</div>"), ("<p>", "</p>"), ("<li>", "</li>"), ("<td>", "</td>"),
            ("<span style=\"font-weight:bold\">", "</span>"), ("", "<br/>"), ("&nbsp;", ""),
            ("", " &raquo; Home")]


def read_gz(path: Path, limit: int) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f]
    return lines[:limit] if limit else lines


def inject(clean: list[tuple[str, str]], spanish: list[tuple[str, str]], share: float,
           rng: random.Random) -> list[tuple[str, str, str]]:
    """The clean pairs and ``share`` × their count of each kind of noise, as (src, tgt, label), in a
    seeded random order with every duplicate after its original."""
    n = round(share * len(clean))
    rows: list[tuple[str, str, str]] = [(s, t, "clean") for s, t in clean]
    noise: list[tuple[str, str, str]] = []
    for s, _ in rng.sample(clean, n):
        noise.append((s, s, "copy"))
    for s, t in rng.sample(spanish, n):
        noise.append((s, t, "wrong_language"))
    for (s, _), (_, t) in zip(rng.sample(clean, n), rng.sample(clean, n), strict=True):
        noise.append((s, t, "misaligned"))
    long_targets = [p for p in clean if len(p[1].split()) >= 6]
    for s, t in rng.sample(long_targets, n):
        words = t.split()
        noise.append((s, " ".join(words[:max(1, round(len(words) * rng.uniform(0.4, 0.8)))]), "truncated"))
    for s, t in rng.sample(clean, n):
        before, after = rng.choice(REMNANTS)
        if rng.random() < 0.5:
            noise.append((f"{before}{s}{after}", t, "markup"))
        else:
            noise.append((s, f"{before}{t}{after}", "markup"))
    accented = [p for p in clean if any(ord(c) > 127 and c.isalpha() for c in p[1])]
    for s, t in rng.sample(accented, n):
        noise.append((s, t.encode("utf-8").decode("cp1252", errors="replace"), "mojibake"))
    rng.shuffle(noise)
    rows += noise
    rng.shuffle(rows)
    # duplicates go after their originals: the first copy of a pair is the one a cleaner keeps
    positions = rng.sample(range(len(clean)), n)
    dup_rows = []
    originals = [i for i, r in enumerate(rows) if r[2] == "clean"]
    for k, pick in enumerate(positions):
        at = originals[pick]
        s, t, _ = rows[at]
        if k % 2 == 0:
            variant = (s, t)
        else:
            variant = rng.choice([(s.lower(), t.lower()), (f" {s}  ", t), (s.upper(), t.upper()),
                                  (s.rstrip(".") + " .", t.rstrip("."))])
        dup_rows.append((rng.randint(at + 1, len(rows)), (*variant, "duplicate")))
    for at, row in sorted(dup_rows, key=lambda x: -x[0]):
        rows.insert(at, row)
    return label_natural_duplicates(rows)


def label_natural_duplicates(rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Relabel the clean pairs that repeat an earlier clean pair once normalised ("Choose File - Open" /
    "Wählen Sie Datei – Öffnen…" and the same without "…"): the corpus was deduplicated exactly, not
    after normalisation, so these are duplicates by the definition the cleaner applies, not clean pairs
    it loses. Counted apart ("natural_duplicate"), neither clean nor injected noise."""
    from mtkit.data.filters import normalized

    seen: set[tuple[str, str]] = set()
    out = []
    for s, t, label in rows:
        key = (normalized(s), normalized(t))
        if label == "clean" and key in seen:
            label = "natural_duplicate"
        seen.add(key)
        out.append((s, t, label))
    return out


def ten_line_cleaner(rows: list[tuple[str, str, str]]) -> list[bool]:
    """The control: exact dedup, source == target, the target's language by py3langid's first guess."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identify = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    seen: set[tuple[str, str]] = set()
    dropped = []
    for s, t, _ in rows:
        drop = (s, t) in seen or s.strip() == t.strip() or identify.classify(t)[0] != "de"
        seen.add((s, t))
        dropped.append(drop)
    return dropped


def evaluate(labels: list[str], verdicts: list[str]) -> dict[str, Any]:
    """Recall per kind of noise, precision per reason, and the share of clean pairs dropped."""
    by_kind = collections.Counter(labels)
    caught = collections.Counter(lab for lab, v in zip(labels, verdicts, strict=True) if v != "keep")
    reasons = collections.Counter(v for v in verdicts if v != "keep")
    noisy_reasons = collections.Counter(v for lab, v in zip(labels, verdicts, strict=True)
                                        if v != "keep" and lab != "clean")
    clean_reasons = collections.Counter(v for lab, v in zip(labels, verdicts, strict=True)
                                        if v != "keep" and lab == "clean")
    dropped = sum(reasons.values())
    return {
        "recall": {k: round(caught[k] / by_kind[k], 4) for k in KINDS if by_kind[k]},
        "precision_by_reason": {r: round(noisy_reasons[r] / n, 4) for r, n in reasons.most_common()},
        "dropped_by_reason": dict(reasons.most_common()),
        "clean_dropped_by_reason": dict(clean_reasons.most_common()),
        "precision": round(sum(noisy_reasons.values()) / dropped, 4) if dropped else 1.0,
        "clean_dropped": round(caught["clean"] / by_kind["clean"], 4),
        "noise_recall": round(sum(caught[k] for k in KINDS) / sum(by_kind[k] for k in KINDS), 4),
        "by_kind": {k: by_kind[k] for k in ("clean", "natural_duplicate", *KINDS)},
        "natural_duplicates_dropped": caught["natural_duplicate"],
    }


def score_sweep(out: Path, labels: list[str], verdicts: list[str], models: list[str],
                clean_sample: int, seed: int) -> dict[str, Any]:
    """The dual conditional cross-entropy (the library functions `mtkit clean --score-models` runs) of
    the pairs the rules kept: every noisy one, and a seeded sample of ``clean_sample`` clean ones (the
    scoring costs a forward pass of two models per pair; the clean pairs lost at a threshold are a rate,
    which the sample estimates with its 95% interval). For each threshold (clean.score_min): each kind's
    recall, as the rules and the score together, and the clean pairs lost. The thresholds are the
    scores below which 0.5%, 1%, 2%, 3%, 5% and 10% of the sampled clean pairs fall: a model's scale
    depends on how well it was trained, the share of clean pairs a user will give up does not. The
    scores are written to OUT/scores.tsv (row of the noisy corpus, label, score)."""
    import numpy as np

    from mtkit.decode.forced import ForcedScorer, dual_conditional_cross_entropy

    rows = list(zip((out / "noisy.en").read_text(encoding="utf-8").split("\n"),
                    (out / "noisy.de").read_text(encoding="utf-8").split("\n"), strict=False))
    kept = [i for i, v in enumerate(verdicts) if v == "keep"]
    noisy = [i for i in kept if labels[i] not in ("clean", "natural_duplicate")]
    clean = [i for i in kept if labels[i] == "clean"]
    sample = sorted(random.Random(seed).sample(clean, min(clean_sample, len(clean))))
    chosen = noisy + sample
    started = time.perf_counter()
    fwd, bwd = ForcedScorer(models[0]), ForcedScorer(models[1])
    scores: list[float] = []
    for at in range(0, len(chosen), 5_000):
        part = chosen[at:at + 5_000]
        sources, targets = [rows[i][0] for i in part], [rows[i][1] for i in part]
        scores += dual_conditional_cross_entropy(fwd, bwd, sources, targets)
    seconds = time.perf_counter() - started
    score = dict(zip(chosen, scores, strict=True))
    by_kind = collections.Counter(labels)
    rule_caught = collections.Counter(labels[i] for i, v in enumerate(verdicts) if v != "keep")
    clean_rule_loss = rule_caught["clean"] / by_kind["clean"]
    with open(out / "scores.tsv", "w", encoding="utf-8") as f:
        f.writelines(f"{i}\t{labels[i]}\t{score[i]:.6g}\n" for i in chosen)
    sample_scores = np.array([score[i] for i in sample])
    sweep = {}
    for share in (0.005, 0.01, 0.02, 0.03, 0.05, 0.1):
        threshold = float(np.quantile(sample_scores, share))
        below = collections.Counter(labels[i] for i in noisy if score[i] < threshold)
        rate = sum(score[i] < threshold for i in sample) / len(sample)
        half = 1.96 * (rate * (1 - rate) / len(sample)) ** 0.5
        lost = clean_rule_loss + rate * len(clean) / by_kind["clean"]
        sweep[f"clean quantile {share}"] = {"threshold": round(threshold, 6),
            "recall": {k: round((rule_caught[k] + below[k]) / by_kind[k], 4) for k in KINDS},
            "clean_dropped": round(lost, 4),
            "clean_dropped_by_score": f"{rate:.4f} ± {half:.4f} (of the clean pairs the rules kept)"}
    return {"models": models, "pairs_scored": len(chosen), "clean_sample": len(sample),
            "seconds": round(seconds, 1), "pairs_per_s": round(len(chosen) / seconds, 1),
            "score_quantiles": {q: round(float(np.quantile([score[i] for i in sample], q)), 4)
                                for q in (0.01, 0.05, 0.1, 0.5)},
            "by_threshold": sweep}


def cpu_name() -> str:
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    found = re.search(r"Model name:\s*(.+)", out)
    flags = re.search(r"Flags:\s*(.+)", out)
    bf16 = "bf16" if flags and "avx512_bf16" in flags.group(1) else "no bf16"
    return f"{found.group(1).strip() if found else '?'} ({os.cpu_count()} cores, {bf16})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    ap.add_argument("--share", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--limit", type=int, default=0, help="Use the first N clean pairs (0: all).")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], help="clean.KEY=VALUE for mtkit clean.")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "noise")
    ap.add_argument("--no-control", action="store_true", help="Skip the ten-line cleaner.")
    ap.add_argument("--score-models", nargs=2, metavar=("FWD", "BWD"),
                    help="Also score the pairs the rules kept by dual conditional cross-entropy with these "
                         "model directories (en→de, de→en) and sweep the threshold.")
    ap.add_argument("--clean-sample", type=int, default=10_000,
                    help="With --score-models: clean pairs scored (a seeded sample; the noisy ones all).")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    de, es = args.data / "deb-en-de", args.data / "deb-en-es"
    clean = list(zip(read_gz(de / "train.en.gz", args.limit), read_gz(de / "train.de.gz", args.limit),
                     strict=True))
    spanish = list(zip(read_gz(es / "train.en.gz", 0), read_gz(es / "train.es.gz", 0), strict=True))
    rows = inject(clean, spanish, args.share, rng)
    args.out.mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(("en", "de", "label")):
        (args.out / f"noisy.{name}").write_text("".join(r[i] + "\n" for r in rows), encoding="utf-8")
    labels = [r[2] for r in rows]

    command = [sys.executable, "-m", "mtkit", "clean", "-i", str(args.out / "noisy.en"),
               "-i", str(args.out / "noisy.de"), "--src-lang", "en", "--tgt-lang", "de",
               "-o", str(args.out / "cleaned"), "--decisions", str(args.out / "decisions.txt")]
    command += [x for s in args.set for x in ("--set", s)]
    if args.workers:
        command += ["--workers", str(args.workers)]
    started = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - started
    verdicts = (args.out / "decisions.txt").read_text(encoding="utf-8").split()
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"), "cpu": cpu_name(), "pairs": len(rows), "share": args.share,
        "seed": args.seed, "set": args.set, "command": " ".join(sys.argv),
        "mtkit_clean": {**evaluate(labels, verdicts), "seconds": round(seconds, 1),
                        "pairs_per_s": round(len(rows) / seconds, 1)},
    }
    if not args.no_control:
        started = time.perf_counter()
        control = ten_line_cleaner(rows)
        results["ten_line"] = {**evaluate(labels, ["drop" if d else "keep" for d in control]),
                               "seconds": round(time.perf_counter() - started, 1)}
    if args.score_models:
        results["score_sweep"] = score_sweep(args.out, labels, verdicts, args.score_models, args.clean_sample,
                                             args.seed)
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"\n{results['cpu']}, {len(rows):,} pairs ({args.share:.0%} of the clean count per kind)\n")
    print("| | " + " | ".join(KINDS) + " | clean dropped | precision |")
    print("|---" * (len(KINDS) + 3) + "|")
    for name in ("mtkit_clean", "ten_line"):
        if name in results:
            r = results[name]
            cells = [f"{r['recall'].get(k, 0):.3f}" for k in KINDS]
            tail = f" | {r['clean_dropped']:.2%} | {r['precision']:.3f} |"
            print(f"| {name} | " + " | ".join(cells) + tail)
    print("\nprecision by reason:", results["mtkit_clean"]["precision_by_reason"])
    print("clean pairs dropped by reason:", results["mtkit_clean"]["clean_dropped_by_reason"])
    if "score_sweep" in results:
        print(json.dumps(results["score_sweep"], indent=1))


if __name__ == "__main__":
    main()
