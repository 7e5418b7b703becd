#!/usr/bin/env python3
"""`python bench/studies/pivot_latency.py`: what one pivoted request costs against one direct request on
`mtkit serve` (issue #41), in process (FastAPI's TestClient), one request at a time.

A server of two tiny random bilingual models (es→en, en→de; tests/serve_helpers.served_model:
d_model 32, 2+2 layers, beam 3, outputs up to the source's length + 4: their quality
does not matter, only the work) answers the same sentences es→en (direct: one model) and es→de
(through en: both models, one after the other). Requests alternate, REPEATS rounds over SENTENCES
sentences; the medians and their ratio are printed, at the default --max-wait-ms (5: each leg's
batch waits that long for company) and at 0.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sentences", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    import torch
    from fastapi.testclient import TestClient
    from serve_helpers import WORDS, served_model

    from mtkit.decode.translator import LoadOptions
    from mtkit.serve import ServeOptions, build_app

    torch.set_num_threads(1)
    rng = random.Random(0)
    sentences = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))
                 for _ in range(args.sentences)]
    load = LoadOptions(device="cpu", threads=1, precision="fp32")
    print("| --max-wait-ms | direct es→en, median ms | pivot es→en→de, median ms | ratio |")
    print("| ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        models = [served_model(Path(tmp) / "es-en", "en", seed=5, source="es"),
                  served_model(Path(tmp) / "en-de", "de", seed=6)]
        for wait in (5.0, 0.0):
            app = build_app(models, load, ServeOptions(max_wait_ms=wait))
            times: dict[str, list[float]] = {"en": [], "de": []}
            with TestClient(app) as client:
                for target in ("en", "de"):  # warm-up
                    client.post("/translate", json={"q": sentences[0], "source": "es", "target": target})
                for _ in range(args.repeats):
                    for s in sentences:
                        for target in ("en", "de"):
                            started = time.perf_counter()
                            reply = client.post("/translate", json={"q": s, "source": "es", "target": target})
                            times[target].append(time.perf_counter() - started)
                            assert reply.status_code == 200, reply.text
            direct, pivot = (1000 * statistics.median(times[t]) for t in ("en", "de"))
            print(f"| {wait:g} | {direct:.1f} | {pivot:.1f} | {pivot / direct:.2f} |")


if __name__ == "__main__":
    main()
