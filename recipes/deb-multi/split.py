"""Clean data for the multilingual recipe: a three-way en/de/es test and dev set, and training corpora
that share no English sentence with any dev or test set.

deb-en-de and deb-en-es were split each on its own, so an English sentence of one's test set can sit
in the other's training data (a model trained es→en would have seen the German test set's English
references). This script:

1. collects the English side of every original dev and test set (both corpora);
2. draws, from the English sentences present in both training corpora (and in no original dev/test),
   ``--test`` + ``--dev`` at random (seeded) — each with its German and Spanish translation (the
   first in each corpus) — as the three-way test and dev sets;
3. writes each training corpus without any pair whose English side is in 1. or 2.

Usage: python split.py DATA_DIR OUT_DIR [--test 2000 --dev 1000 --seed 1]
(DATA_DIR holds deb-en-de/ and deb-en-es/; OUT_DIR gets train.en-de.{en,de}, train.en-es.{en,es},
{dev,test}.3way.{en,de,es} and counts.json, each written to a temporary file and renamed).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
from pathlib import Path


def lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n") for line in f]


def write(path: Path, rows: list[str]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(f"{r}\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--test", type=int, default=2000)
    p.add_argument("--dev", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    train, held = {}, set()
    for lang in ("de", "es"):
        d = args.data / f"deb-en-{lang}"
        en, xx = lines(d / "train.en.gz"), lines(d / f"train.{lang}.gz")
        if len(en) != len(xx):
            raise SystemExit(f"error: {d}/train.en.gz has {len(en)} lines but train.{lang}.gz has {len(xx)}")
        train[lang] = list(zip(en, xx, strict=True))
        for split in ("dev", "test"):
            held.update(lines(d / f"{split}.en"))
    first = {lang: {} for lang in train}  # English → its first translation in the corpus
    for lang, pairs in train.items():
        for en, xx in pairs:
            first[lang].setdefault(en, xx)
    shared = sorted((set(first["de"]) & set(first["es"])) - held - {""})
    wanted = args.test + args.dev
    if len(shared) < wanted:
        raise SystemExit(f"error: only {len(shared)} English sentences are in both training corpora")
    chosen = random.Random(args.seed).sample(shared, wanted)
    sets = {"test": chosen[: args.test], "dev": chosen[args.test:]}
    args.out.mkdir(parents=True, exist_ok=True)
    for split, english in sets.items():
        write(args.out / f"{split}.3way.en", english)
        for lang in ("de", "es"):
            write(args.out / f"{split}.3way.{lang}", [first[lang][e] for e in english])
    chosen_set = set(chosen)
    removed = held | chosen_set
    counts: dict = {"shared_english_sentences": len(set(first["de"]) & set(first["es"])),
                    "original_dev_test_english": len(held), "test": args.test, "dev": args.dev,
                    "seed": args.seed, "leaks": {}}
    for lang, other in (("de", "es"), ("es", "de")):
        for split in ("dev", "test"):  # the leak mended: one corpus's held-out English in the other's train
            english = set(lines(args.data / f"deb-en-{lang}" / f"{split}.en"))
            leak = f"deb-en-{lang} {split} English in deb-en-{other} train"
            counts["leaks"][leak] = len(english & set(first[other]))
    for lang, pairs in train.items():
        kept = [(en, xx) for en, xx in pairs if en not in removed]
        write(args.out / f"train.en-{lang}.en", [en for en, _ in kept])
        write(args.out / f"train.en-{lang}.{lang}", [xx for _, xx in kept])
        counts[f"en-{lang}"] = {"train_pairs": len(pairs), "kept": len(kept),
                                "removed": len(pairs) - len(kept),
                                "removed_as_3way": sum(en in chosen_set for en, _ in pairs)}
    tmp = args.out / ".counts.json.tmp"
    tmp.write_text(json.dumps(counts, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, args.out / "counts.json")
    print(json.dumps(counts, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
