"""Validation's greedy search against `mtkit translate`'s, per sentence, on one model (issue #64:
"validation during training spends no more time per sentence than mtkit translate does").

Translates the first ``--lines`` lines three ways in one process, after a warm-up of each: as
`mtkit.train.validation.evaluate` searches the dev set (batches of SEARCH_MAX_TOKENS source subwords in
length order, greedy, no scores) on the fp32 training weights under the training precision's autocast
(``autocast``: what validation searched before issue #64) and on `decoding_copy` of the model (``copy``:
what it searches under ``training.precision: auto`` since), and as `mtkit translate --greedy` does
(``translate``: `mtkit.Translator`, ``--precision auto``). Prints milliseconds per sentence of each
(best of ``--rounds``; the copy's making included) and the precision each ran in.

    python bench/studies/validation_speed.py --model DIR --input test.en [--lines 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--lines", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import numpy as np
    import torch

    from mtkit.data.batching import TokenBatchSampler
    from mtkit.data.bpe import Bpe
    from mtkit.decode.loader import decoding_copy, is_int8, load_model
    from mtkit.decode.search import search
    from mtkit.decode.translator import Translator
    from mtkit.device import autocast, autocast_dtype
    from mtkit.train.validation import SEARCH_MAX_TOKENS
    from mtkit.vocab import PAD_ID

    lines = Path(args.input).read_text(encoding="utf-8").splitlines()[: args.lines]
    loaded = load_model(Path(args.model), device=torch.device("cpu"))
    model, cfg = loaded.model.eval(), loaded.config
    bpe = Bpe(Path(args.model) / loaded.meta.src_bpe)
    ids = [s[: cfg.data.max_len] for s in bpe.encode_ids(lines)]
    lengths = np.array([len(s) for s in ids], dtype=np.int64)
    sampler = TokenBatchSampler(lengths, np.zeros_like(lengths), SEARCH_MAX_TOKENS, shuffle=False)
    batches = sampler.epoch_batches(0)
    dtype = autocast_dtype(cfg.training.precision, torch.device("cpu"), "training.precision=")
    amp = autocast(torch.device("cpu"), dtype) if dtype is not None else contextlib.nullcontext()

    def validate(copied: bool) -> None:
        searcher = decoding_copy(model, torch.device("cpu")) if copied else model
        context = contextlib.nullcontext() if copied else amp
        with torch.no_grad():
            for batch in batches:
                rows = [ids[i] for i in batch.tolist()]
                src = torch.full((len(rows), max(map(len, rows))), PAD_ID, dtype=torch.long)
                for r, s in enumerate(rows):
                    src[r, : len(s)] = torch.tensor(s)
                with context:
                    search(searcher, src, cfg.decoding, beam_size=1, scores=False)

    translator = Translator(args.model, device="cpu", beam_size=1, scores=False)
    timings: dict[str, list[float]] = {"autocast": [], "copy": [], "translate": []}
    runs = {"autocast": lambda: validate(False), "copy": lambda: validate(True),
            "translate": lambda: translator.translate(lines)}
    for run in runs.values():  # warm-up
        run()
    for _ in range(args.rounds):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            timings[name].append(time.perf_counter() - started)
    best = {name: min(t) for name, t in timings.items()}
    print(json.dumps({
        "lines": len(lines), "autocast": str(dtype or torch.float32),
        "copy": "int8" if is_int8(decoding_copy(model, torch.device("cpu"))) else str(translator.dtype),
        "translate": "int8" if translator.backend.int8 else str(translator.dtype),
        "ms_per_sentence": {name: round(1000 * s / len(lines), 2) for name, s in best.items()},
        "over_translate": {name: round(s / best["translate"], 3) for name, s in best.items()},
    }, indent=1))


if __name__ == "__main__":
    main()
