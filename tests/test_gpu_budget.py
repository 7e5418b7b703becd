"""bench/gpu_budget.py (issue #66): the card's one prepared script runs end to end on a CPU (--dry-run)
and writes the JSON the issue asks for."""

from __future__ import annotations

import gzip
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_budget.py"
KEYS = {"card", "train_minutes", "test_bleu", "tokens_per_s", "mfu", "peak_mem_gib", "shape", "script_wall_s"}


def _corpus(root: Path) -> Path:
    """A deb-en-de-shaped directory of made-up pairs (the target: the source's words reversed)."""
    rng = random.Random(0)
    letters = "abcdefghijklmnoprstuvwz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 9))) for _ in range(900)]
    root.mkdir()
    for split, n in (("train", 2000), ("dev", 30), ("test", 30)):
        src = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) for _ in range(n)]
        tgt = [" ".join(reversed(line.split())) for line in src]
        for lang, lines in (("en", src), ("de", tgt)):
            text = "\n".join(lines) + "\n"
            if split == "train":
                with gzip.open(root / f"train.{lang}.gz", "wt", encoding="utf-8") as f:
                    f.write(text)
            else:
                (root / f"{split}.{lang}").write_text(text, encoding="utf-8")
    return root


@pytest.mark.slow
def test_dry_run_makes_gpu_and_writes_the_record(tmp_path):
    out = tmp_path / "gpu-budget.json"
    kept = tmp_path / "scratch"
    corpus = _corpus(tmp_path / "deb")
    run = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--data", str(corpus), "--out", str(out),
                          "--keep", str(kept)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    record = json.loads(out.read_text())
    assert set(record) >= KEYS
    assert record["card"] == "cpu (dry run)" and record["dry_run"] is True
    assert record["shape"]["d_model"] == 32 and record["shape"]["vocab"] == 600
    assert record["updates"] == 40 and record["tokens_per_s"] > 0
    assert record["test_bleu"] == max(record["test_bleu_by_system"].values())
    systems = {"transformer-base.beam5.de", "transformer-base.avg1.beam5.de"}
    assert set(record["test_bleu_by_system"]) == systems
    # the budget-aware schedule ran: its cooldown ends at 0 at the 40th update
    assert record["last_lr"] == pytest.approx(0.0, abs=1e-9) and record["peak_lr"] > 0
    assert "make -C" in run.stdout and "cpu (dry run): 0 min, 40 updates" in run.stdout
    assert (kept / "recipes" / "deb-en-de" / "work" / "transformer-base" / "checkpoint_best.pt").is_file()


def test_refuses_without_a_corpus_or_a_card(tmp_path):
    missing = subprocess.run([sys.executable, str(SCRIPT), "--data", str(tmp_path)], capture_output=True,
                             text=True)
    assert missing.returncode == 2 and "train.en.gz not found" in missing.stderr
