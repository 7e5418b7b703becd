"""Per-sentence confidence (`Candidate.confidence`, `mtkit translate --scores`, the JSON output,
`--min-confidence X --flag-file F`): what it is, that it does not depend on how sentences are
batched, and the review list."""

from __future__ import annotations

import json
import math
import statistics
import sys
from pathlib import Path

import pytest
import torch

from mtkit.decode.translation import Candidate, Translation, format_translation
from mtkit.vocab import BOS_ID, EOS_ID

sys.path.insert(0, str(Path(__file__).parent))
from test_translator import exact, make_model_dir, run_cli, sentences  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("confidence"), beam_size=3, max_len_a=1.0, max_len_b=4)


def test_confidence_is_the_geometric_mean_of_the_token_probabilities(model_dir):
    translator = exact(model_dir)
    tr = translator.translate_hypotheses(["the cat sat on the mat ."])[0]
    best = tr.hypotheses[0]
    model = translator.model
    src = torch.tensor([translator.src_bpe.encode_ids([tr.source])[0]])
    with torch.no_grad():  # the probability of each token given the ones before, by stepping the decoder
        enc = model.encode(src)
        state, prev, log_probs = model.init_state(enc), BOS_ID, []
        for token in [*best.token_ids, EOS_ID]:
            out, state, _ = model.step(torch.tensor([prev]), state, enc)
            log_probs.append(float(out[0, token]))
            prev = token
    assert best.mean_log_prob == pytest.approx(sum(log_probs) / len(log_probs), abs=1e-4)
    assert best.confidence == pytest.approx(math.exp(statistics.fmean(log_probs)), rel=1e-4)
    assert tr.confidence == best.confidence and 0 < tr.confidence < 1
    assert Translation(0, "").confidence == 1.0  # an empty line's empty translation


def test_confidence_does_not_depend_on_batch_composition(model_dir):
    lines = sentences(14, seed=5)
    alone = [exact(model_dir).translate_hypotheses([line])[0].confidence for line in lines]
    together = [t.confidence for t in exact(model_dir).translate_hypotheses(lines)]
    budget = [t.confidence for t in exact(model_dir, max_tokens=40).translate_hypotheses(lines[::-1])][::-1]
    assert together == pytest.approx(alone, abs=1e-5)
    assert budget == pytest.approx(alone, abs=1e-5)


def test_scores_follow_each_translation_and_json_has_them():
    hyps = [Candidate(f"hyp {k}", -0.5, -2.0 * (k + 1), ["▁hyp", f"▁{k}"], [10, 11], [(0, 0)])
            for k in range(2)]
    tr = Translation(3, "src", ["▁src"], hyps)
    mean = -2.0 / 3
    assert format_translation(tr, scores=True) == [f"hyp 0\t{math.exp(mean):.4f}\t{mean:.4f}"]
    assert format_translation(tr, scores=True, alignment=True)[0].endswith(f"{mean:.4f}\t0-0")
    nbest = format_translation(tr, "nbest", nbest=2, scores=True)
    assert nbest[1] == f"3\t-0.5000\thyp 1\t{math.exp(2 * mean):.4f}\t{2 * mean:.4f}"
    assert format_translation(Translation(4, ""), scores=True) == ["\t1.0000\t0.0000"]
    record = json.loads(format_translation(tr, "json", nbest=2)[0])
    assert record["confidence"] == pytest.approx(math.exp(mean))
    assert record["mean_log_prob"] == pytest.approx(mean)
    assert [h["confidence"] for h in record["nbest"]] == pytest.approx([math.exp(mean), math.exp(2 * mean)])


def test_the_flag_file_lists_the_lines_below_the_threshold_least_confident_first(model_dir, tmp_path):
    lines = sentences(10, seed=7) + [""]
    confidences = [t.confidence for t in exact(model_dir).translate_hypotheses(lines)]
    threshold = statistics.median(confidences)
    src, out, flags = tmp_path / "in.txt", tmp_path / "out.txt", tmp_path / "flags.tsv"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_cli("-m", str(model_dir), "-i", str(src), "-o", str(out), "--device", "cpu", "--precision",
                   "fp32", "--scores", "--min-confidence", str(threshold), "--flag-file", str(flags))
    assert proc.returncode == 0, proc.stderr
    rows = [line.split("\t") for line in flags.read_text(encoding="utf-8").splitlines()]
    below = sorted((c, i + 1) for i, c in enumerate(confidences) if c < threshold)
    assert [(int(r[0]), r[1]) for r in rows] == [(i, f"{c:.4f}") for c, i in below]
    assert all(r[2] == lines[int(r[0]) - 1] for r in rows)  # the source, then its translation
    written = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(written) == len(lines) and all(len(w) == 3 for w in written)
    assert [float(w[1]) for w in written] == pytest.approx(confidences, abs=1e-4)
    assert f"{len(below)} of {len(lines)} lines" in proc.stderr


@pytest.mark.parametrize("args", [["--flag-file", "F"], ["--min-confidence", "0.5"],
                                  ["--min-confidence", "1.5", "--flag-file", "F"],
                                  ["--min-confidence", "0.5", "--flag-file", "F", "--shard", "0/2"]])
def test_review_options_that_cannot_give_one_list_are_refused(model_dir, tmp_path, args):
    src = tmp_path / "in.txt"
    src.write_text("the cat .\n", encoding="utf-8")
    proc = run_cli("-m", str(model_dir), "-i", str(src), "-o", str(tmp_path / "out.txt"), *args)
    err = proc.stderr
    assert proc.returncode != 0 and "Traceback" not in err
    assert "--min-confidence" in err or "--flag-file" in err
    assert not (tmp_path / "F").exists()


def test_the_recipes_spearman_gives_ties_their_average_rank():
    import importlib.util

    import numpy as np

    path = Path(__file__).resolve().parents[1] / "recipes" / "confidence.py"
    spec = importlib.util.spec_from_file_location("recipe_confidence", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = np.array([3, 1, 4, 1, 5, 9, 2, 6, 5, 3.0])
    assert module.ranks(x).tolist() == [4.5, 1.5, 6, 1.5, 7.5, 10, 3, 9, 7.5, 4.5]
    assert module.spearman(np.arange(10.0), np.arange(10.0) ** 3) == pytest.approx(1.0)
    figures = module.report(np.array([0.1, 0.9, 0.5, 0.3]), np.array([10.0, 90.0, 40.0, 50.0]), groups=2)
    assert figures["spearman"] == pytest.approx(0.8)
    assert [g["mean_chrf"] for g in figures["groups"]] == [30.0, 65.0]
