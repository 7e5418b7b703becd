"""`python bench/run.py --only processes --model DIR`: one translation job on 1 process and on 2.

The 2,000 test sentences of deb-en-de, greedy and beam 5, translated by one `mtkit translate` process
with all the machine's cores and by `torchrun --standalone --nproc-per-node 2 -m mtkit translate`
(each rank translates every second line on half the cores; rank 0 merges the parts in input order).
Reports wall seconds of the whole command (start-up and model loading included), sentences/s,
peak RSS of the largest single process, the BLEU of each output, and how many lines equal the
one-process output (bf16 results depend a little on how sentences are batched; fp32 ones do not).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from engines import model_and_test_set

SEARCHES = (("greedy", ["--greedy"]), ("beam5", ["--beam", "5"]))


def torchrun(processes: int, *args: str) -> list[str]:
    launcher = shutil.which("torchrun")
    head = [launcher] if launcher else [sys.executable, "-m", "torch.distributed.run"]
    return [*head, "--standalone", "--nproc-per-node", str(processes), "-m", "mtkit", *args]


def bench_processes(args: argparse.Namespace, files: dict[str, Path], run_measured: Any, mtkit: Any,
                    bleu_of: Any, count_lines: Any) -> dict[str, Any]:
    if not args.model:
        return {"skipped": "no model: pass --model DIR (a trained model directory)"}
    model, source, reference, sentences, logs = model_and_test_set(args, files, count_lines)
    results: dict[str, Any] = {"model": str(model), "sentences": sentences, "precision": args.precision}
    for search, flags in SEARCHES:
        common = ["translate", "-m", str(model), "-i", str(source), "--device", args.device,
                  "--precision", args.precision, *flags]
        one = args.work / f"processes-1.{search}.out"
        two = args.work / f"processes-2.{search}.out"
        for count, out in ((1, one), (2, two)):
            print(f"processes: {count} {search} ...", file=sys.stderr, flush=True)
            cmd = mtkit(*common, "-o", str(out)) if count == 1 else torchrun(2, *common, "-o", str(out))
            wall, rss = run_measured(cmd, logs / f"processes-{count}-{search}.log")
            lines = out.read_text(encoding="utf-8").splitlines()
            same = sum(a == b for a, b in zip(lines, one.read_text(encoding="utf-8").splitlines(),
                                                strict=True))
            results[f"{count}/{search}"] = {
                "seconds": round(wall, 2), "sentences_per_s": round(sentences / wall, 1),
                "peak_rss_mib_per_process": None if rss is None else round(rss, 1),
                "bleu": bleu_of(out, reference), "same_as_1_process": round(same / len(lines), 4),
            }
    return results
