#!/usr/bin/env python3
"""`python bench/studies/langid.py`: how well and how fast `mtkit serve` identifies languages (/detect and
``source: auto``, mtkit/decode/langid.py with py3langid).

Accuracy per language on the dev sets of the Debian corpora (DATA, default ../shared/data beside the
repo: deb-en-de/dev.en and dev.de, deb-en-es/dev.en and dev.es; sentences of at least 3 words, as
whitespace splits them): restricted to {en, de, es}, as a server of those three source languages
answers, and unrestricted (the best of all the identifier's languages), with what the misses were
taken for; accuracy of the 3-5-word sentences apart (short text is where identifiers fail).

Cost: the identifier alone (one ``rank`` among the three, per sentence, mean) and a whole /detect
request in process (FastAPI's TestClient: body parsed, identified in a worker thread, JSON answered;
mean over every sentence, one after another) on a server of three tiny random models (en→x, de→x,
es→x: /detect never runs a model, so their quality does not matter). The model is loaded before the
timing. Results are printed as Markdown tables.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from mtkit.langid import LanguageIdentifier  # noqa: E402

SERVED = ("en", "de", "es")
FILES = {"en": ("deb-en-de/dev.en", "deb-en-es/dev.en"), "de": ("deb-en-de/dev.de",),
         "es": ("deb-en-es/dev.es",)}


def sentences(data: Path) -> dict[str, list[str]]:
    """Each language's dev sentences of at least 3 words (English from both corpora)."""
    out: dict[str, list[str]] = {}
    for lang, names in FILES.items():
        lines: list[str] = []
        for name in names:
            path = data / name
            if not path.exists():
                sys.exit(f"error: {path} not found; set --data to the folder holding deb-en-de and deb-en-es")
            lines += [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        out[lang] = list(dict.fromkeys(line for line in lines if len(line.split()) >= 3))
    return out


def accuracy(identifier: LanguageIdentifier, data: dict[str, list[str]]) -> list[dict]:
    rows = []
    for lang, texts in data.items():
        restricted = [identifier.best(t, SERVED).language for t in texts]
        unrestricted = [identifier.best(t).language for t in texts]
        short = [i for i, t in enumerate(texts) if len(t.split()) <= 5]
        misses = collections.Counter(g for g in unrestricted if g != lang).most_common(4)
        rows.append({"language": lang, "sentences": len(texts),
                     "restricted": sum(g == lang for g in restricted) / len(texts),
                     "unrestricted": sum(g == lang for g in unrestricted) / len(texts),
                     "short_sentences": len(short),
                     "short_restricted": sum(restricted[i] == lang for i in short) / max(1, len(short)),
                     "short_unrestricted": sum(unrestricted[i] == lang for i in short) / max(1, len(short)),
                     "misses": misses})
    return rows


def identifier_cost(identifier: LanguageIdentifier, texts: list[str]) -> float:
    """Mean seconds of one ``rank`` among the served languages."""
    started = time.perf_counter()
    for t in texts:
        identifier.rank(t, SERVED)
    return (time.perf_counter() - started) / len(texts)


def tiny_model(root: Path, source: str) -> Path:
    """A random model directory translating from ``source`` (what /detect reads is its language)."""
    from mtkit.checkpoint import save_checkpoint
    from mtkit.config.experiment import Config, ModelConfig, to_dict
    from mtkit.data.bpe import Bpe, train_bpe
    from mtkit.models import build_model

    root.mkdir(parents=True)
    rng = random.Random(0)
    words = ["the", "a", "house", "cat", "small", "green", "tea", "door", "window", "river", "stone"]
    (root / "corpus.txt").write_text("\n".join(" ".join(rng.choice(words) for _ in range(8))
                                               for _ in range(200)) + "\n", encoding="utf-8")
    train_bpe([str(root / "corpus.txt")], str(root / "bpe"), vocab_size=40)
    size = len(Bpe(root / "bpe.model"))
    cfg = Config()
    cfg.model = ModelConfig(arch="transformer", d_model=16, heads=2, d_ff=32, encoder_layers=1,
                            decoder_layers=1, dropout=0.0)
    meta = {"src_lang": source, "tgt_lang": "x", "joint": True, "src_bpe": "bpe.model",
            "tgt_bpe": "bpe.model", "src_vocab_size": size, "tgt_vocab_size": size}
    model = build_model(cfg.model, size, size, True)
    save_checkpoint({"model": model.state_dict(), "config": to_dict(cfg), "vocab": meta},
                    root / "checkpoint_best.pt")
    (root / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return root


def detect_cost(texts: list[str]) -> tuple[float, float, float]:
    """Mean and median seconds of a /detect request, in process, on a server of en, de and es; and
    the mean of as many ``GET /health`` requests, what the HTTP stack alone costs in process."""
    from fastapi.testclient import TestClient

    from mtkit.decode.translator import LoadOptions
    from mtkit.serve import ServeOptions, build_app

    with tempfile.TemporaryDirectory() as tmp:
        models = [tiny_model(Path(tmp) / lang, lang) for lang in SERVED]
        app = build_app(models, LoadOptions(device="cpu", threads=1, precision="fp32"), ServeOptions())
        with TestClient(app) as client:
            client.post("/detect", json={"q": "warm up"})
            times = []
            for t in texts:
                started = time.perf_counter()
                reply = client.post("/detect", json={"q": t})
                times.append(time.perf_counter() - started)
                assert reply.status_code == 200, reply.text
            started = time.perf_counter()
            for _ in texts:
                client.get("/health")
            health = (time.perf_counter() - started) / len(texts)
    return statistics.fmean(times), statistics.median(times), health


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data",
                   help="folder holding deb-en-de/ and deb-en-es/ (default: ../shared/data beside the repo)")
    args = p.parse_args()
    data = sentences(args.data)
    started = time.perf_counter()
    identifier = LanguageIdentifier()
    load = time.perf_counter() - started
    rows = accuracy(identifier, data)
    every = [t for texts in data.values() for t in texts]
    alone = identifier_cost(identifier, every)
    mean, median, health = detect_cost(every)

    print(f"py3langid, {len(identifier.languages)} labels; model load {load:.2f} s\n")
    print("| language | sentences | among en, de, es | among all | 3-5 words (n) | among en, de, es | "
          "among all | misses (all) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        misses = ", ".join(f"{lang} {n}" for lang, n in r["misses"])
        print(f"| {r['language']} | {r['sentences']} | {100 * r['restricted']:.1f}% | "
              f"{100 * r['unrestricted']:.1f}% | {r['short_sentences']} | "
              f"{100 * r['short_restricted']:.1f}% | {100 * r['short_unrestricted']:.1f}% | {misses} |")
    mean_chars = statistics.fmean(len(t) for t in every)
    print(f"\n{len(every)} sentences, {mean_chars:.0f} characters on average")
    print(f"identifier alone: {alone * 1e6:.0f} µs a sentence (mean)")
    print(f"/detect in process: {mean * 1e3:.2f} ms a request (mean), {median * 1e3:.2f} ms (median); "
          f"GET /health in process: {health * 1e3:.2f} ms (mean)")


if __name__ == "__main__":
    main()
