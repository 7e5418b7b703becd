"""Minimum risk training (training.objective: mrt, `mtkit.train.mrt`): the risk is the expectation of
the cost under the renormalised candidate distribution, its gradient moves probability towards the
cheaper candidate, candidates come from mtkit's search (reproducibly), and a run killed with SIGKILL
and resumed ends with the weights of an uninterrupted one."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mtkit.checkpoint import load_checkpoint
from mtkit.config.experiment import from_dict, save_config, to_dict
from mtkit.data.batching import collate
from mtkit.data.bpe import Bpe
from mtkit.data.shards import ParallelData
from mtkit.device import DistInfo
from mtkit.errors import ConfigError
from mtkit.metrics_log import read_metrics
from mtkit.models import build_model
from mtkit.train.costs import sentence_costs
from mtkit.train.loss import label_smoothed_nll
from mtkit.train.mrt import Found, MrtUpdater, expected_risk, generate
from mtkit.train.trainer import train
from mtkit.vocab import BOS_ID, EOS_ID

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import run_mtkit  # noqa: E402
from train_helpers import make_data_dir, tiny_config  # noqa: E402

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("mrt"), n_train=120, n_dev=8, random_ids=(3, 7),
                         vocab_size=24)


@pytest.fixture(scope="module")
def parent(data: Path, tmp_path_factory) -> Path:
    model_dir = tmp_path_factory.mktemp("mrt-parent") / "model"
    train(tiny_config(data, model_dir, max_steps=30, validate_every=30, log_every=30))
    return model_dir


def _updater(data: Path, tmp_path: Path, **training) -> MrtUpdater:
    cfg = tiny_config(data, tmp_path / "m", objective="mrt", label_smoothing=0.0, **training)
    meta = ParallelData(data, "train").meta
    torch.manual_seed(0)
    model = build_model(cfg.model, meta.src_vocab_size, meta.tgt_vocab_size, meta.joint).eval()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    return MrtUpdater(model, model, optimizer, None, cfg.training, DistInfo(), torch.device("cpu"), None,
                      False, tgt_bpe=Bpe(data / "bpe.model"), decoding=cfg.decoding)


def _sequence_log_prob(model, src: torch.Tensor, tokens: list[int]) -> float:
    """log P(tokens + EOS | src) by stepping the decoder one token at a time (the enumeration side)."""
    with torch.no_grad():
        enc = model.encode(src.unsqueeze(0))
        state = model.init_state(enc)
        total, prev = 0.0, BOS_ID
        for token in [*tokens, EOS_ID]:
            log_probs, state, _ = model.step(torch.tensor([prev]), state, enc)
            total += float(log_probs[0, token])
            prev = token
    return total


def _toy(data: Path, tmp_path: Path, alpha: float, ce_weight: float = 0.0):
    updater = _updater(data, tmp_path, mrt_alpha=alpha, mrt_ce_weight=ce_weight)
    batch = collate(ParallelData(data, "train"), [3, 7])
    refs = [[t for t in row if t][:-1] for row in batch.tgt_out.tolist()]
    cands = [[[5, 6, 7], [5, 6], refs[0][:2], []], [[9, 9, 10, 11], [12]]]
    costs = [[0.9, 0.5, 0.2, 1.0], [0.3, 0.7]]
    return updater, batch, Found(refs, cands, costs)


@pytest.mark.parametrize("alpha", [1.0, 0.3])
def test_the_risk_is_the_expected_cost_by_enumeration(data, tmp_path, alpha):
    updater, batch, found = _toy(data, tmp_path, alpha)
    loss, _, risk = updater._chunk_loss(batch, [0, 1], found, scale=2.0)
    expected = 0.0
    for i, (cands, costs) in enumerate(zip(found.candidates, found.costs, strict=True)):
        src = batch.src[i][batch.src[i] != 0]
        p = [math.exp(alpha * _sequence_log_prob(updater.model, src, c)) for c in cands]
        expected += sum(pi / sum(p) * cost for pi, cost in zip(p, costs, strict=True))
    assert float(risk.detach()) == pytest.approx(expected, rel=1e-5)
    assert float(loss.detach()) == pytest.approx(2.0 * expected, rel=1e-5)  # ce_weight 0: the risk alone


def test_the_cross_entropy_term_is_the_references_loss(data, tmp_path):
    updater, batch, found = _toy(data, tmp_path, 1.0, ce_weight=0.5)
    loss, nll, risk = updater._chunk_loss(batch, [0, 1], found, scale=1.0)
    with torch.no_grad():
        logits, _ = updater.model(batch.src, batch.tgt_in)
        ce, ref_nll = label_smoothed_nll(logits, batch.tgt_out, 0.0)
    assert float(nll) == pytest.approx(float(ref_nll), rel=1e-5)
    assert float(loss.detach()) == pytest.approx(float(risk.detach()) + 0.5 * float(ce), rel=1e-5)


def test_the_gradient_moves_probability_to_the_cheaper_candidate(data, tmp_path):
    updater, batch, _ = _toy(data, tmp_path, 1.0)
    cheap, dear = [5, 6, 7], [9, 10]
    found = Found([[4]], [[cheap, dear]], [[0.1, 0.9]])
    src = batch.src[0][batch.src[0] != 0]

    def gap() -> float:
        return _sequence_log_prob(updater.model, src, cheap) - _sequence_log_prob(updater.model, src, dear)

    before = gap()
    loss, _, _ = updater._chunk_loss(batch, [0], found, scale=1.0)
    loss.backward()
    with torch.no_grad():
        for p in updater.model.parameters():
            if p.grad is not None:
                p -= 0.05 * p.grad
    assert gap() > before + 1e-3


def test_the_risk_gradient_is_alpha_q_times_cost_minus_risk():
    log_p = torch.tensor([-2.0, -3.0, -1.0, -4.0], requires_grad=True)
    sentence, cost = torch.tensor([0, 0, 1, 1]), torch.tensor([0.2, 0.8, 0.5, 0.1])
    risk = expected_risk(log_p, sentence, cost, 0.5, 2)
    risk.sum().backward()
    q = torch.cat([torch.softmax(0.5 * log_p[:2].detach(), 0), torch.softmax(0.5 * log_p[2:].detach(), 0)])
    expected = 0.5 * q * (cost - risk.detach()[sentence])
    assert torch.allclose(log_p.grad, expected, atol=1e-6)
    assert log_p.grad[0] < 0 < log_p.grad[1]  # descent raises the cheaper candidate's log-probability


def test_candidates_are_distinct_beam_first_and_reproducible(data, tmp_path):
    updater = _updater(data, tmp_path)
    src = collate(ParallelData(data, "train"), [1, 2, 5]).src
    dec = updater.decoding
    both = generate(updater.model, src, dec, 6, "both", torch.Generator().manual_seed(3))
    again = generate(updater.model, src, dec, 6, "both", torch.Generator().manual_seed(3))
    assert both == again
    beam = generate(updater.model, src, dec, 3, "beam", None)
    for mine, nbest in zip(both, beam, strict=True):
        assert 1 <= len(mine) <= 6 and len({tuple(c) for c in mine}) == len(mine)
        assert mine[: len(nbest)] == nbest  # the beam's n-best (of 3) first
    sampled = generate(updater.model, src, dec, 4, "sample", torch.Generator().manual_seed(4))
    assert all(1 <= len(c) <= 4 for c in sampled)


def test_the_cost_is_one_minus_sentence_bleu_or_chrf():
    import sacrebleu

    hyp, ref = "der Hund bellt laut", "der Hund bellt"
    assert sentence_costs("bleu", [hyp, ref], ref) == pytest.approx(
        [1 - sacrebleu.sentence_bleu(hyp, [ref]).score / 100, 0.0])
    chrf = sacrebleu.sentence_chrf(hyp, [ref]).score
    assert sentence_costs("chrf", [hyp], ref) == pytest.approx([1 - chrf / 100])


def test_mrt_logs_its_risk_and_refuses_what_it_cannot_do(data, parent, tmp_path):
    train(tiny_config(data, tmp_path / "m", objective="mrt", mrt_candidates=3, init_from=str(parent),
                      max_steps=4, log_every=2, validate_every=4))
    events = [e for e in read_metrics(tmp_path / "m" / "metrics.jsonl") if e["event"] == "train"]
    assert [e["step"] for e in events] == [2, 4]
    assert all(0 <= e["risk"] <= 1 and 1 <= e["candidates"] <= 3 for e in events)
    # padded shapes (rows past the sentences all PAD) and two batches an update
    train(tiny_config(data, tmp_path / "b", objective="mrt", mrt_candidates=3, init_from=str(parent),
                      max_steps=2, log_every=1, validate_every=2, shape_buckets="on", update_freq=2))
    events = [e for e in read_metrics(tmp_path / "b" / "metrics.jsonl") if e["event"] == "train"]
    assert len(events) == 2 and all(0 <= e["risk"] <= 1 and math.isfinite(e["loss"]) for e in events)
    with pytest.raises(ConfigError, match="training.scheduled_sampling"):
        tiny_config(data, tmp_path / "x", objective="mrt", scheduled_sampling="linear")
    with pytest.raises(ConfigError, match="training.mrt_alpha"):
        tiny_config(data, tmp_path / "x", mrt_alpha=0.5)  # objective ce


def _mtkit_train(config: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mtkit", "train", str(config)], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_sigkill_then_resume_equals_an_uninterrupted_mrt_run(data, parent, tmp_path):
    settings = {"objective": "mrt", "mrt_candidates": 4, "mrt_search": "both", "mrt_alpha": 0.5,
                "init_from": str(parent), "max_steps": 16, "save_every": 3, "validate_every": 8,
                "log_every": 1, "label_smoothing": 0.1, "max_tokens": 200}
    configs = {}
    for name in ("straight", "killed"):
        raw = to_dict(tiny_config(data, tmp_path / name, **settings))
        raw["model"]["dropout"] = 0.2  # the dropout masks of the teacher-forced pass must repeat too
        configs[name] = tmp_path / f"{name}.yaml"
        save_config(from_dict(raw), configs[name])
    straight = run_mtkit("train", configs["straight"])  # this run and the resumed one run in-process
    assert straight.returncode == 0, straight.stderr

    victim = _mtkit_train(configs["killed"])
    metrics = tmp_path / "killed" / "metrics.jsonl"
    deadline = time.monotonic() + 120
    while victim.poll() is None and time.monotonic() < deadline:  # past the first save, not at the end
        if metrics.exists() and any(e.get("step", 0) >= 5 for e in read_metrics(metrics)):
            break
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=60)
    assert victim.returncode == -signal.SIGKILL
    last = tmp_path / "killed" / "checkpoint_last.pt"
    killed_at = load_checkpoint(last)["step"]
    assert 0 < killed_at < settings["max_steps"], "the run was not interrupted mid-way"

    resumed = run_mtkit("train", configs["killed"])
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from {last} at update {killed_at}" in resumed.stderr
    a = load_checkpoint(tmp_path / "straight" / "checkpoint_last.pt")["model"]
    b = load_checkpoint(last)["model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    risks = {name: [(e["step"], e["risk"]) for e in read_metrics(tmp_path / name / "metrics.jsonl")
                    if e["event"] == "train" and e["step"] > killed_at] for name in ("straight", "killed")}
    assert risks["straight"] == risks["killed"]


@pytest.mark.slow
def test_mrt_under_torchrun(data, parent, tmp_path):
    """Two CPU processes (gloo): each rank generates and scores its own batches' candidates, the
    gradients meet once per update."""
    config = tmp_path / "ddp.yaml"
    save_config(tiny_config(data, tmp_path / "ddp", objective="mrt", mrt_candidates=3, mrt_search="beam",
                            init_from=str(parent), max_steps=3, log_every=1, validate_every=3,
                            max_tokens=200), config)
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "mtkit", "train", str(config)],
        env={**ENV, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    events = [e for e in read_metrics(tmp_path / "ddp" / "metrics.jsonl") if e["event"] == "train"]
    assert [e["step"] for e in events] == [1, 2, 3] and all(0 <= e["risk"] <= 1 for e in events)
