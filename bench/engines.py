"""`python bench/run.py --only engines --model DIR`: one trained Transformer, every way mtkit can run it.

For the 2,000 test sentences of deb-en-de, greedy and beam 5, each engine as a user runs it (a whole
`mtkit translate` command, model load included; its peak RSS from the bench's launcher):

* torch fp32, torch bf16 (`--precision bf16`), torch int8 (`--int8`, dynamic quantization);
* CTranslate2 float32 and int8, from `mtkit export --quantization float32|int8` (the ct2 engine).

Besides speed: the BLEU of each output, and how many lines equal the torch fp32 output of the same
search (what an export must keep). Skipped when ctranslate2 is not installed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

#: (name, engine flags for `mtkit translate`, export quantization or None for the torch model itself)
ENGINES = (
    ("torch-fp32", ["--precision", "fp32"], None),
    ("torch-bf16", ["--precision", "bf16"], None),
    ("torch-int8", ["--int8"], None),
    ("ct2-float32", [], "float32"),
    ("ct2-int8", [], "int8"),
)
SEARCHES = (("greedy", ["--greedy"]), ("beam5", ["--beam", "5"]))


def model_and_test_set(args: argparse.Namespace, files: dict[str, Path],
                 count_lines: Any) -> tuple[Path, Path, Path, int, Path]:
    """(model, test source, test reference, sentences, log directory) of a --model bench part."""
    source = files["test_src"]
    return Path(args.model[0]), source, files["test_tgt"], count_lines(source), args.work / "logs"


def bench_engines(args: argparse.Namespace, files: dict[str, Path], run_measured: Any, mtkit: Any,
                  bleu_of: Any, count_lines: Any) -> dict[str, Any]:
    try:
        import ctranslate2  # noqa: F401
    except ImportError:
        return {"skipped": "ctranslate2 is not installed (pip install 'mtkit[ct2]')"}
    if not args.model:
        return {"skipped": "no model: pass --model DIR (a trained Transformer directory)"}
    model, source, reference, sentences, logs = model_and_test_set(args, files, count_lines)
    exported: dict[str, Path] = {}
    for quantization in ("float32", "int8"):
        out = args.work / f"export-{quantization}"
        shutil.rmtree(out, ignore_errors=True)
        run_measured(mtkit("export", "-m", str(model), "-o", str(out), "--quantization", quantization),
                     logs / f"export-{quantization}.log")
        exported[quantization] = out
    threads = ["--threads", str(args.threads)] if args.threads else []
    results: dict[str, Any] = {"model": str(model), "sentences": sentences}
    reference_outputs: dict[str, list[str]] = {}
    for search, search_flags in SEARCHES:
        for name, flags, quantization in ENGINES:
            target = exported[quantization] if quantization else model
            hyp = args.work / f"engines-{name}.{search}.out"
            print(f"engines: {name} {search} ...", file=sys.stderr, flush=True)
            wall, rss = run_measured(mtkit("translate", "-m", str(target), "-i", str(source), "-o", str(hyp),
                                           "--device", "cpu", *flags, *search_flags, *threads),
                                     logs / f"engines-{name}-{search}.log")
            lines = hyp.read_text(encoding="utf-8").splitlines()
            if name == "torch-fp32":
                reference_outputs[search] = lines
            same = sum(a == b for a, b in zip(lines, reference_outputs[search], strict=True))
            results[f"{name}/{search}"] = {
                "seconds": round(wall, 2), "sentences_per_s": round(sentences / wall, 1),
                "bleu": bleu_of(hyp, reference), "peak_rss_mib": None if rss is None else round(rss, 1),
                "same_as_torch_fp32": round(same / len(lines), 4),
            }
    return results
