"""Tiny synthetic data directories and configs for the training tests (no prepare.py needed)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from mtkit.config.experiment import Config, from_dict
from mtkit.data.bpe import Bpe, train_bpe
from mtkit.data.meta import DataMeta, write_meta
from mtkit.data.shards import ShardWriter, token_dtype

LETTERS = "abcdefghijkl"


def _sentence(rng: random.Random, min_words: int, max_words: int) -> str:
    words = ["".join(rng.choice(LETTERS) for _ in range(rng.randint(1, 3)))
             for _ in range(rng.randint(min_words, max_words))]
    return " ".join(words)


def make_data_dir(root: Path, n_train: int = 200, n_dev: int = 16, task: str = "copy", seed: int = 0,
                  vocab_size: int = 40, min_words: int = 2, max_words: int = 6,
                  random_ids: tuple[int, int] | None = None) -> Path:
    """A data dir like `mtkit prepare` writes: joint BPE model, train/dev shards, meta.json.

    task: "copy" (target = source ids) or "reverse" (target = source ids reversed).
    random_ids=(lo, hi): sentences are uniform random token ids of length lo..hi instead of encoded
    text (the BPE model still decodes them for validation)."""
    rng = random.Random(seed)
    data = Path(root) / "data"
    data.mkdir(parents=True, exist_ok=True)
    text = [_sentence(rng, min_words, max_words) for _ in range(n_train + n_dev)]
    corpus = Path(root) / "corpus.txt"
    corpus.write_text("\n".join(text) + "\n", encoding="utf-8")
    model = train_bpe([str(corpus)], str(data / "bpe"), vocab_size=vocab_size)
    bpe = Bpe(model)
    ids = bpe.encode_ids(text)
    if random_ids is not None:
        ids = [[rng.randrange(4, len(bpe)) for _ in range(rng.randint(*random_ids))] for _ in ids]
    dtype = token_dtype(len(bpe))
    splits: dict[str, Any] = {}
    for split, rows in (("train", ids[:n_train]), ("dev", ids[n_train:])):
        src_w, tgt_w = ShardWriter(data / f"{split}.src", dtype), ShardWriter(data / f"{split}.tgt", dtype)
        for row in rows:
            src_w.add(row)
            tgt_w.add(row[::-1] if task == "reverse" else row)
        splits[split] = {"sentences": len(rows), "src_tokens": src_w.num_tokens,
                         "tgt_tokens": tgt_w.num_tokens}
        src_w.close()
        tgt_w.close()
    write_meta(data, DataMeta(src_lang="xx", tgt_lang="yy", joint=True, src_bpe="bpe.model",
                              tgt_bpe="bpe.model", src_vocab_size=len(bpe), tgt_vocab_size=len(bpe),
                              dtype=dtype.name, splits=splits, fingerprint=f"test-{seed}"))
    return data


def tiny_config(data_dir: Path, model_dir: Path, arch: str = "transformer", **training: Any) -> Config:
    """A tiny model and a fast, quiet training setup; keyword arguments override training keys."""
    model: dict[str, Any] = {"arch": arch, "dropout": 0.0, "encoder_layers": 1, "decoder_layers": 1}
    if arch == "transformer":
        model.update(d_model=32, heads=2, d_ff=64)
    else:
        model.update(emb_dim=32, hidden_size=32)
    train: dict[str, Any] = {
        "model_dir": str(model_dir), "max_tokens": 400, "lr": 3e-3, "schedule": "constant", "warmup_steps": 0,
        "label_smoothing": 0.0, "log_every": 25, "validate_every": 50, "max_steps": 100, "threads": 1,
        "device": "cpu", "valid_metric": "loss",
        # fp32 on every CPU kind: these tiny models trained ~30% faster in fp32 than under bf16 autocast
        # on an AMX Xeon (its casts outweigh its products here), and an AVX2-only CPU trains fp32 anyway
        # (`auto`); bf16 training has tests of its own (test_trainer's options, test_config_keys)
        "precision": "fp32",
    }
    train.update(training)
    return from_dict({
        "data": {"dir": str(data_dir)},
        "model": model,
        "training": train,
        "decoding": {"beam_size": 1, "max_len_a": 1.0, "max_len_b": 5},
    })


def straight_and_resumed(config: Any, root: Path, steps: int) -> tuple[dict, dict]:
    """The weights after ``steps`` updates trained in one run, and in two runs of which the second
    resumes the first at steps / 2. ``config(model_dir, max_steps)`` makes each run's Config (it
    should save every steps / 2 updates)."""
    import torch

    from mtkit.train.trainer import train

    train(config(root / "straight", steps))
    train(config(root / "split", steps // 2))
    train(config(root / "split", steps))
    return tuple(torch.load(root / run / "checkpoint_last.pt", weights_only=True)["model"]  # type: ignore[return-value]
                 for run in ("straight", "split"))
