#!/usr/bin/env python3
"""The glossary experiment of the deb recipes (`make -C recipes/deb-en-de glossary`, issue #23).

``build``: a glossary from the training data — the terms the reference translates one way. Candidate
source terms are runs of 1-3 capitalised words not at the start of a sentence (UI labels such as
"Save As", product names such as "LibreOffice", in this corpus of software documentation; not format
placeholders such as "%s") found in at least ``--min-count`` training sentences. For each, the target
n-grams (1-3 words, 3 characters or more) of up to ``--sample`` of those sentences' translations are
counted; the term's translation is the longest n-gram found, as whole words, in at least
``--threshold`` (95%) of them, and specific to it: at least ``--specificity`` (30%) of the training
sentences whose translation holds that n-gram have the source term (so that a word every sentence of
a repetitive manual page has, "Sie" or "bei", is not taken for its translation).

``compare``: the test lines that contain a glossary term, translated by `mtkit translate` without
and with ``--glossary`` (the same other options): term-use rate (the share of (line, term) pairs
whose target term appears in the output as whole words), BLEU and chrF against the references, and
sentences/s of each whole command; a table on stdout and the figures as JSON (``--json``).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

WORD = re.compile(r"\w+(?:[-'’]\w+)*")
CAPITALISED = re.compile(r"^[A-Z0-9%][\w%-]*$")


def _lines(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        return [line.rstrip("\n") for line in f]


def _occurs(term: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(term)}(?!\w)", text) is not None


def source_candidates(sentence: str) -> set[str]:
    words = sentence.split()
    found = set()
    for i in range(1, len(words)):  # not the first word: any word is capitalised there
        run = []
        for word in words[i:i + 3]:
            bare = word.strip(".,;:!?()\"'“”„")
            if bare != word and run:  # punctuation ends a run
                if CAPITALISED.match(bare) and word.rstrip(".,;:!?)\"'“”") == bare:
                    run.append(bare)
                    found.add(" ".join(run))
                break
            if not CAPITALISED.match(bare) or len(bare) < 2:
                break
            run.append(bare)
            found.add(" ".join(run))
    return {c for c in found if len(c) >= 3 and any(ch.isalpha() for ch in c) and "%" not in c}


def target_ngrams(sentence: str) -> set[str]:
    words = WORD.findall(sentence)
    return {" ".join(words[i:i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)}


def build(args: argparse.Namespace) -> None:
    src, tgt = _lines(args.src), _lines(args.tgt)
    if len(src) != len(tgt):
        sys.exit(f"error: {args.src} has {len(src)} lines but {args.tgt} has {len(tgt)}")
    where: dict[str, list[int]] = collections.defaultdict(list)
    for i, line in enumerate(src):
        for cand in source_candidates(line):
            where[cand].append(i)
    overall = collections.Counter(g for line in tgt for g in target_ngrams(line))
    rng = random.Random(1)
    terms: dict[str, str] = {}
    for cand, rows in sorted(where.items()):
        if len(rows) < args.min_count:
            continue
        sample = rows if len(rows) <= args.sample else rng.sample(rows, args.sample)
        counts = collections.Counter(g for r in sample for g in target_ngrams(tgt[r]))
        need = args.threshold * len(sample)
        kept = [g for g, c in counts.items() if c >= need and len(g) >= 3 and any(ch.isalpha() for ch in g)
                and c / len(sample) * len(rows) >= args.specificity * overall[g]]
        # longest first; then check that it occurs as written (n-grams join words split at hyphens)
        for gram in sorted(kept, key=lambda g: (-len(g.split()), -counts[g], g)):
            if sum(_occurs(gram, tgt[r]) for r in sample) >= need:
                terms[cand] = gram
                break
    args.output.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.output.with_name(args.output.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"# {len(terms)} terms from {args.src.name}: source runs of capitalised words in >= "
                f"{args.min_count} sentences, translated one way in >= {args.threshold:.0%} of them "
                f"(recipes/glossary.py build)\n")
        for source, target in sorted(terms.items()):
            f.write(f"{source}\t{target}\n")
    tmp.replace(args.output)
    print(f"wrote {args.output}: {len(terms)} terms", file=sys.stderr)


def _translate(args: argparse.Namespace, src: Path, out: Path, extra: list[str]) -> float:
    cmd = [*args.mtkit.split(), "translate", "-m", str(args.model), "-i", str(src), "-o", str(out),
           *args.translate_args.split(), *extra]
    started = time.perf_counter()
    subprocess.run(cmd, check=True)
    return time.perf_counter() - started


def compare(args: argparse.Namespace) -> None:
    import sacrebleu

    from mtkit.decode.glossary import Glossary

    glossary = Glossary.from_file(args.glossary)
    src, ref = _lines(args.src), _lines(args.ref)
    chosen = [(s, r, glossary.find(s)) for s, r in zip(src, ref, strict=True)]
    chosen = [(s, r, t) for s, r, t in chosen if t]
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    (work / "terms.src").write_text("".join(s + "\n" for s, _, _ in chosen), encoding="utf-8")
    refs = [r for _, r, _ in chosen]
    results = {"lines": len(chosen), "terms": sum(len(t) for _, _, t in chosen),
               "glossary": len(glossary.terms), "reference_uses_term": _use(refs, chosen)}
    for name, extra in (("without", []), ("with", ["--glossary", str(args.glossary)])):
        hyp_file = work / f"terms.{name}.hyp"
        seconds = _translate(args, work / "terms.src", hyp_file, extra)
        hyps = _lines(hyp_file)
        results[name] = {"term_use": _use(hyps, chosen), "seconds": round(seconds, 2),
                         "sentences_per_s": round(len(hyps) / seconds, 2),
                         "bleu": round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2),
                         "chrf": round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2)}
    print(f"{results['lines']} test lines with {results['terms']} glossary terms "
          f"({results['glossary']} terms in the glossary); the references use "
          f"{results['reference_uses_term']:.1%} of them")
    print("system            term use   BLEU    chrF   sent/s (whole command)")
    for name in ("without", "with"):
        r = results[name]
        print(f"{name + ' glossary':<17} {r['term_use']:>7.1%}  {r['bleu']:6.2f}  {r['chrf']:6.2f}  "
              f"{r['sentences_per_s']:8.2f}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


def _use(outputs: list[str], chosen: list) -> float:
    pairs = [(out, term.target) for out, (_, _, terms) in zip(outputs, chosen, strict=True) for term in terms]
    return sum(_occurs(target, out) for out, target in pairs) / max(1, len(pairs))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="a glossary from parallel training data")
    b.add_argument("--src", type=Path, required=True)
    b.add_argument("--tgt", type=Path, required=True)
    b.add_argument("-o", "--output", type=Path, required=True)
    b.add_argument("--min-count", type=int, default=10)
    b.add_argument("--threshold", type=float, default=0.95)
    b.add_argument("--sample", type=int, default=300)
    b.add_argument("--specificity", type=float, default=0.3)
    c = sub.add_parser("compare", help="translate the test lines with terms without and with the glossary")
    c.add_argument("--model", type=Path, required=True)
    c.add_argument("--glossary", type=Path, required=True)
    c.add_argument("--src", type=Path, required=True)
    c.add_argument("--ref", type=Path, required=True)
    c.add_argument("--work", type=Path, required=True)
    c.add_argument("--mtkit", default=f"{sys.executable} -m mtkit")
    c.add_argument("--translate-args", default="--beam 5")
    c.add_argument("--json", type=Path)
    args = p.parse_args()
    build(args) if args.command == "build" else compare(args)


if __name__ == "__main__":
    main()
