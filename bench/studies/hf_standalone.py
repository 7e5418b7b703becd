"""Translate a file with a model `mtkit export --format hf` wrote, using `transformers` alone: what a
user without mtkit runs. Imports only torch and transformers, and checks at the end that no mtkit module
was loaded (run it with a PYTHONPATH and working directory that do not hold the mtkit checkout).

    python bench/studies/hf_standalone.py HF_DIR -i test.en -o hyp.de [--beam N] [--max-length N]

Every search setting is the export's generation_config.json (num_beams, length_penalty, max_length,
min_length, forced EOS, bad_words_ids) unless ``--beam`` or ``--max-length`` is given. Lines are
batched by length and written back in input order; an empty line stays empty. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model")
    p.add_argument("-i", "--input", required=True)
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--beam", type=int, help="num_beams (default: the generation config's)")
    p.add_argument("--max-length", type=int, help="max_length (default: the generation config's)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    tok = AutoTokenizer.from_pretrained(args.model)
    model = AutoModelForSeq2SeqLM.from_pretrained(args.model).eval()
    lines = Path(args.input).read_text(encoding="utf-8").splitlines()
    todo = sorted((i for i, x in enumerate(lines) if x.strip()), key=lambda i: len(tok(lines[i]).input_ids))
    out = [""] * len(lines)
    extra = {k: v for k, v in (("num_beams", args.beam), ("max_length", args.max_length)) if v is not None}
    start = time.perf_counter()
    with torch.inference_mode():
        for b in range(0, len(todo), args.batch_size):
            idx = todo[b:b + args.batch_size]
            ids = model.generate(**tok([lines[i] for i in idx], return_tensors="pt", padding=True), **extra)
            for i, text in zip(idx, tok.batch_decode(ids, skip_special_tokens=True), strict=True):
                out[i] = text
    seconds = time.perf_counter() - start
    Path(args.output).write_text("".join(x + "\n" for x in out), encoding="utf-8")
    loaded = sorted(m for m in sys.modules if m == "mtkit" or m.startswith("mtkit."))
    if loaded:
        sys.exit(f"mtkit was imported: {loaded[:3]}")
    print(json.dumps({"model": type(model).__name__, "tokenizer": type(tok).__name__, "lines": len(lines),
                      "seconds": round(seconds, 1), "mtkit_modules_loaded": len(loaded),
                      "generation_config": model.generation_config.to_diff_dict()}))


if __name__ == "__main__":
    main()
