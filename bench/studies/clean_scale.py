#!/usr/bin/env python3
"""`mtkit clean` at scale: pairs/s and peak memory at 1M and 10M lines of TSV.

    python bench/studies/clean_scale.py --lines 1000000,10000000 [--data ../shared/data] [--out DIR]
        [--set clean.KEY=VALUE ...]

The TSV is deb-en-de's training pairs over and over, each copy numbered on both sides ("(3) Open the
file." / "(3) Öffnen Sie die Datei."), so that every line is its own and deduplication keeps it: every
filter does its full work on real text of Debian's lengths. It is written to OUT once per size.
`mtkit clean` runs on it as a process of its own; the memory is the peak of the summed resident set of
that process and its workers, sampled every 0.2 s from /proc.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants, in KiB (Linux /proc)."""
    total, pending = 0, [pid]
    while pending:
        p = pending.pop()
        try:
            status = Path(f"/proc/{p}/status").read_text()
            total += int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) if "VmRSS" in status else 0
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except (FileNotFoundError, ProcessLookupError, AttributeError):
            continue
        pending += [int(c) for c in children]
    return total


def make_tsv(path: Path, lines: int, data: Path, seed: int = 1) -> None:
    if path.is_file():
        with open(path, "rb") as f:
            if sum(1 for _ in f) == lines:
                return
    with gzip.open(data / "train.en.gz", "rt", encoding="utf-8") as f:
        src = [line.rstrip("\n").replace("\t", " ") for line in f]
    with gzip.open(data / "train.de.gz", "rt", encoding="utf-8") as f:
        tgt = [line.rstrip("\n").replace("\t", " ") for line in f]
    order = list(range(len(src)))
    random.Random(seed).shuffle(order)
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        for k in range(lines):
            copy, i = divmod(k, len(order))
            out.write(f"({copy + 1}) {src[order[i]]}\t({copy + 1}) {tgt[order[i]]}\n")
    tmp.replace(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", default="1000000,10000000")
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "deb-en-de")
    ap.add_argument("--out", type=Path, default=Path("/tmp/clean-scale"))
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--results", type=Path, default=None, help="Write the results as JSON here.")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results = []
    for lines in (int(x) for x in args.lines.split(",")):
        tsv = args.out / f"pairs-{lines}.tsv"
        make_tsv(tsv, lines, args.data)
        command = [sys.executable, "-m", "mtkit", "clean", "-i", str(tsv), "--quoting", "none",
                   "--src-lang", "en", "--tgt-lang", "de", "-o", str(args.out / f"clean-{lines}"),
                   *[x for s in args.set for x in ("--set", s)]]
        started = time.perf_counter()
        process = subprocess.Popen(command, env={**os.environ, "PYTHONPATH": str(ROOT)},
                                   stderr=subprocess.PIPE, text=True)
        peak = [0]

        def sample(proc: subprocess.Popen = process, top: list[int] = peak) -> None:
            while proc.poll() is None:
                top[0] = max(top[0], rss_kib(proc.pid))
                time.sleep(0.2)

        watcher = threading.Thread(target=sample, daemon=True)
        watcher.start()
        _, stderr = process.communicate()
        seconds = time.perf_counter() - started
        watcher.join()
        if process.returncode:
            sys.exit(stderr)
        report = json.loads((args.out / f"clean-{lines}.report.json").read_text(encoding="utf-8"))
        row = {"lines": lines, "seconds": round(seconds, 1), "pairs_per_s": round(lines / seconds),
               "peak_rss_mib": round(peak[0] / 1024), "kept": report["kept"], "workers": report["workers"],
               "set": args.set}
        results.append(row)
        print(json.dumps(row), flush=True)
    if args.results:
        args.results.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
