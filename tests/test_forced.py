"""mtkit.decode.forced: the cross-entropy of a given translation is what the search interface computes
step by step, whatever the batch; the dual score follows its formula; `mtkit clean --score-models`
drops the worst-scored pairs and says so in the report and the decisions."""

from __future__ import annotations

import json
import math
import random
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import assert_one_error_line, run_mtkit  # noqa: E402
from test_translator import WORDS, make_model_dir  # noqa: E402

from mtkit.decode.forced import ForcedScorer, dual_conditional_cross_entropy  # noqa: E402
from mtkit.vocab import BOS_ID, EOS_ID  # noqa: E402


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 9))) for _ in range(n)]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("forced")
    return make_model_dir(root / "fwd", seed=1), make_model_dir(root / "bwd", seed=2)


def scorer(model: Path) -> ForcedScorer:
    return ForcedScorer(model, device="cpu", precision="fp32")


def stepwise(s: ForcedScorer, source: str, target: str) -> float:
    """The per-token cross-entropy through the search interface: encode, then one step a token."""
    src = torch.tensor([s.src_bpe.encode_ids([source])[0]])
    tgt = s.tgt_bpe.encode_ids([target])[0] + [EOS_ID]
    model = s.model
    with torch.inference_mode():
        enc = model.encode(src)
        state = model.init_state(enc)
        prev, total = torch.tensor([BOS_ID]), 0.0
        for token in tgt:
            log_probs, state, _ = model.step(prev, state, enc)
            total -= float(log_probs[0, token])
            prev = torch.tensor([token])
    return total / len(tgt)


def test_teacher_forced_equals_step_by_step(models: tuple[Path, Path]) -> None:
    s = scorer(models[0])
    src, tgt = sentences(6, 1), sentences(6, 2)
    forced = s.cross_entropy(src, tgt)
    for f, a, b in zip(forced, src, tgt, strict=True):
        assert f == pytest.approx(stepwise(s, a, b), abs=1e-4)


def test_scores_do_not_depend_on_the_batch_or_the_order(models: tuple[Path, Path]) -> None:
    s = scorer(models[0])
    src, tgt = sentences(40, 3), sentences(40, 4)
    together = s.cross_entropy(src, tgt)
    alone = [s.cross_entropy([a], [b])[0] for a, b in zip(src, tgt, strict=True)]
    assert together == pytest.approx(alone, abs=1e-4)
    small = ForcedScorer(models[0], device="cpu", precision="fp32", max_tokens=20)  # many small batches
    assert small.cross_entropy(src, tgt) == pytest.approx(together, abs=1e-4)
    assert len(set(round(x, 3) for x in together)) > 10  # different pairs, different scores


def test_dual_conditional_cross_entropy(models: tuple[Path, Path]) -> None:
    fwd, bwd = scorer(models[0]), scorer(models[1])
    src, tgt = sentences(8, 5), sentences(8, 6)
    h_fwd, h_bwd = fwd.cross_entropy(src, tgt), bwd.cross_entropy(tgt, src)
    dual = dual_conditional_cross_entropy(fwd, bwd, src, tgt)
    for d, a, b in zip(dual, h_fwd, h_bwd, strict=True):
        assert d == pytest.approx(math.exp(-(abs(a - b) + (a + b) / 2)), rel=1e-6)
        assert 0 < d <= 1


def test_clean_with_score_models_drops_the_worst(models: tuple[Path, Path], tmp_path: Path) -> None:
    src, tgt = sentences(30, 7), sentences(30, 8)
    (tmp_path / "a.en").write_text("\n".join(src) + "\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("\n".join(tgt) + "\n", encoding="utf-8")
    prefix = tmp_path / "out"
    result = run_mtkit("clean", "-i", str(tmp_path / "a.en"), "-i", str(tmp_path / "a.de"),
                       "--src-lang", "en", "--tgt-lang", "de", "-o", str(prefix),
                       "--decisions", str(tmp_path / "why.txt"),
                       "--set", "clean.langid=false", "--set", "clean.score_keep=0.5", "--device", "cpu",
                       "--score-models", str(models[0]), "--score-models", str(models[1]))
    assert result.returncode == 0, result.stderr
    kept = (tmp_path / "out.en").read_text(encoding="utf-8").splitlines()
    report = json.loads((tmp_path / "out.report.json").read_text(encoding="utf-8"))
    decisions = (tmp_path / "why.txt").read_text(encoding="utf-8").split()
    rules_kept = decisions.count("keep") + decisions.count("score")
    assert report["dropped"]["score"] == decisions.count("score") == rules_kept - len(kept)
    assert len(kept) == pytest.approx(rules_kept / 2, abs=1)
    assert report["kept"] == len(kept) and report["scoring"]["threshold"] > 0
    fwd, bwd = scorer(models[0]), scorer(models[1])
    scores = dict(zip(zip(src, tgt, strict=True), dual_conditional_cross_entropy(fwd, bwd, src, tgt),
                      strict=True))
    kept_pairs = set(zip(kept, (tmp_path / "out.de").read_text(encoding="utf-8").splitlines(), strict=True))
    dropped = [scores[p] for p, d in zip(zip(src, tgt, strict=True), decisions, strict=True) if d == "score"]
    assert min(scores[p] for p in kept_pairs) >= max(dropped)  # the best half is what stays


def test_score_options_are_checked(models: tuple[Path, Path], tmp_path: Path) -> None:
    (tmp_path / "a.en").write_text("the house\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("das Haus\n", encoding="utf-8")
    base = ["clean", "-i", str(tmp_path / "a.en"), "-i", str(tmp_path / "a.de"), "--src-lang", "en",
            "--tgt-lang", "de", "-o", str(tmp_path / "out")]
    assert_one_error_line(run_mtkit(*base, "--score-models", str(models[0])), "two model directories")
    both = run_mtkit(*base, "--set", "clean.score_min=0.1", "--set", "clean.score_keep=0.5",
                     "--score-models", str(models[0]), "--score-models", str(models[1]))
    assert_one_error_line(both, "set one")
