"""The weight average kept while training: its formula, swapping it in for validation, and the better of
trained and averaged weights saved as the step's checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from train_helpers import make_data_dir, tiny_config

from mtkit.checkpoint import load_checkpoint
from mtkit.metrics_log import read_metrics
from mtkit.train.ema import WeightAverage
from mtkit.train.trainer import train


def test_average_follows_the_formula_with_its_warm_up():
    model = nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(0.0)
    ema = WeightAverage(model, decay=0.9)
    assert ema.rate(1) == pytest.approx(2 / 11) and ema.rate(1000) == 0.9
    with torch.no_grad():
        model.weight.fill_(1.0)
    ema.update(1)
    assert ema.average["weight"] == pytest.approx(torch.full((1, 2), 1 - 2 / 11))
    with torch.no_grad():
        model.weight.fill_(3.0)
    ema.update(1000)
    expected = 0.9 * (1 - 2 / 11) + 0.1 * 3.0
    assert ema.average["weight"] == pytest.approx(torch.full((1, 2), expected))


def test_swapped_in_shows_the_average_and_restores_the_weights():
    model = nn.Linear(3, 3)
    ema = WeightAverage(model, decay=0.5)
    own = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    ema.update(100)
    moved = {k: v.clone() for k, v in model.state_dict().items()}
    with ema.swapped_in(model):
        for k, v in model.state_dict().items():
            assert torch.allclose(v, 0.5 * own[k] + 0.5 * moved[k])
    for k, v in model.state_dict().items():
        assert torch.equal(v, moved[k])


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("ema"), n_train=200, n_dev=8)


def test_validation_scores_both_and_the_step_checkpoint_holds_the_better(data, tmp_path, monkeypatch):
    import mtkit.train.trainer as trainer

    real_evaluate, calls = trainer.evaluate, []

    def evaluate(*args, **kwargs):  # the average's score at the last validation made much better
        result = real_evaluate(*args, **kwargs)
        calls.append(result)
        if len(calls) == 6:
            result = {**result, "dev_loss": result["dev_loss"] - 10.0}
        return result

    monkeypatch.setattr(trainer, "evaluate", evaluate)
    model_dir = tmp_path / "m"
    train(tiny_config(data, model_dir, ema_decay=0.95, max_steps=60, validate_every=20, keep_last=5,
                      keep_best=5))
    assert len(calls) == 6, "each validation scores the trained weights and the average"
    valid = [e for e in read_metrics(model_dir / "metrics.jsonl") if e["event"] == "valid"]
    assert [e["step"] for e in valid] == [20, 40, 60]
    last = load_checkpoint(model_dir / "checkpoint_last.pt")
    for event in valid:
        trained, averaged = event["trained_dev_loss"], event["ema_dev_loss"]
        assert trained != averaged
        assert event["weights"] == ("ema" if averaged < trained else "trained")
        assert event["dev_loss"] == min(trained, averaged)
    assert valid[-1]["weights"] == "ema"
    saved = load_checkpoint(model_dir / "checkpoint_step60.pt")["model"]
    assert saved.keys() == last["model"].keys()
    for key, tensor in last["ema"].items():  # the average, not the trained weights of checkpoint_last
        assert torch.equal(saved[key], tensor.to(saved[key].dtype)), key
    assert not all(torch.equal(saved[k], last["model"][k]) for k in saved)
    best = load_checkpoint(model_dir / "checkpoint_best.pt")["model"]
    assert all(torch.equal(best[k], saved[k]) for k in saved)
