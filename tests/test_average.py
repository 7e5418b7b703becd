"""`mtkit average`: parameter means of the last / best N step checkpoints."""

from __future__ import annotations

import pytest
import torch
from cli_helpers import run_mtkit

from mtkit.checkpoint import load_checkpoint, save_checkpoint
from mtkit.config.experiment import Config, to_dict
from mtkit.errors import MtkitError
from mtkit.models import build_model
from mtkit.train.average import average_checkpoints


def _write_step(model_dir, step: int, score: float, seed: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(seed)
    weights = {"w": torch.randn(3, 4), "b": torch.randn(4), "count": torch.tensor(step)}
    save_checkpoint({"model": weights, "config": {"training": {}}, "vocab": {"v": 1}, "step": step,
                     "metrics": {"valid": {"metric": "bleu", "score": score}}},
                    model_dir / f"checkpoint_step{step}.pt")
    return weights


def test_average_of_two_checkpoints_is_the_mean(tmp_path):
    a = _write_step(tmp_path, 100, 10.0, seed=1)
    b = _write_step(tmp_path, 200, 12.0, seed=2)
    out = average_checkpoints(tmp_path, last=2)
    assert out == tmp_path / "checkpoint_avg.pt"
    avg = load_checkpoint(out)
    assert torch.allclose(avg["model"]["w"], (a["w"] + b["w"]) / 2, atol=0, rtol=1e-7)
    assert torch.allclose(avg["model"]["b"], (a["b"] + b["b"]) / 2, atol=0, rtol=1e-7)
    assert avg["model"]["count"].item() == 200  # integer buffers come from the newest checkpoint
    assert avg["averaged_from"] == ["checkpoint_step100.pt", "checkpoint_step200.pt"]


def test_last_and_best_pick_different_checkpoints(tmp_path):
    weights = {step: _write_step(tmp_path, step, score, seed=step)
               for step, score in [(100, 30.0), (200, 10.0), (300, 25.0), (1000, 5.0)]}
    last = load_checkpoint(average_checkpoints(tmp_path, last=2, output=tmp_path / "last.pt"))
    assert last["averaged_from"] == ["checkpoint_step300.pt", "checkpoint_step1000.pt"]  # numeric order
    assert torch.allclose(last["model"]["w"], (weights[300]["w"] + weights[1000]["w"]) / 2)
    best = load_checkpoint(average_checkpoints(tmp_path, best=2, output=tmp_path / "best.pt"))
    assert best["averaged_from"] == ["checkpoint_step100.pt", "checkpoint_step300.pt"]
    single = load_checkpoint(average_checkpoints(tmp_path, best=1, output=tmp_path / "one.pt"))
    assert torch.equal(single["model"]["w"], weights[100]["w"])


def test_bad_requests_are_clear_errors(tmp_path):
    with pytest.raises(MtkitError, match="no checkpoint_step"):
        average_checkpoints(tmp_path, last=2)
    _write_step(tmp_path, 100, 1.0, seed=1)
    with pytest.raises(MtkitError, match="exactly one of --last N or --best N"):
        average_checkpoints(tmp_path, last=2, best=2)
    save_checkpoint({"model": {"other": torch.zeros(1)}, "config": {}}, tmp_path / "checkpoint_step200.pt")
    with pytest.raises(MtkitError, match="different parameters"):
        average_checkpoints(tmp_path, last=2)


def test_averaged_real_model_loads_and_cli_writes_it(tmp_path):
    cfg = Config()
    cfg.model.d_model, cfg.model.heads, cfg.model.d_ff = 16, 2, 32
    cfg.model.encoder_layers = cfg.model.decoder_layers = 1
    states = []
    for step in (10, 20):
        torch.manual_seed(step)
        model = build_model(cfg.model, 30, 30, True)
        states.append(model.state_dict())
        save_checkpoint({"model": model.state_dict(), "config": to_dict(cfg), "vocab": {}, "step": step},
                        tmp_path / f"checkpoint_step{step}.pt")
    result = run_mtkit("average", tmp_path, "--last", "2", "-o", tmp_path / "avg.pt")
    assert result.returncode == 0, result.stderr
    avg = load_checkpoint(tmp_path / "avg.pt")
    model = build_model(cfg.model, 30, 30, True)
    model.load_state_dict(avg["model"])  # loads like any checkpoint
    for key, value in model.state_dict().items():
        if torch.is_floating_point(value):
            assert torch.allclose(value, (states[0][key] + states[1][key]) / 2, atol=1e-7)
    bad = run_mtkit("average", tmp_path / "nowhere", "--last", "2")
    assert bad.returncode != 0 and "error: average: model directory not found" in bad.stderr
