"""Resuming: a run killed with SIGKILL and resumed ends with the weights of an uninterrupted run."""

from __future__ import annotations

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
from mtkit.errors import CheckpointError
from mtkit.metrics_log import read_metrics
from mtkit.train.trainer import train

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import run_mtkit  # noqa: E402
from train_helpers import make_data_dir, tiny_config  # noqa: E402

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("resume"), n_train=300, n_dev=12, random_ids=(3, 9),
                         vocab_size=24)


def _config(data: Path, model_dir: Path, **training):
    cfg = tiny_config(data, model_dir, **training)
    raw = to_dict(cfg)
    raw["model"]["dropout"] = 0.2  # resumption must reproduce the dropout masks too
    return from_dict(raw)


def _mtkit_train(config: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mtkit", "train", str(config), *args], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _assert_same_weights(a: Path, b: Path) -> None:
    wa, wb = load_checkpoint(a)["model"], load_checkpoint(b)["model"]
    assert wa.keys() == wb.keys()
    for key in wa:
        assert torch.equal(wa[key], wb[key]), key


@pytest.mark.slow
def test_sigkill_then_resume_equals_an_uninterrupted_run(data, tmp_path):
    # killed at its first save (update 7): 100 updates resume through the end of the warm-up and two
    # validations, as 300 did
    settings = {"max_steps": 100, "save_every": 7, "validate_every": 50, "log_every": 10,
                "schedule": "inverse_sqrt", "warmup_steps": 20, "label_smoothing": 0.1}
    straight_cfg, killed_cfg = tmp_path / "straight.yaml", tmp_path / "killed.yaml"
    save_config(_config(data, tmp_path / "straight", **settings), straight_cfg)
    save_config(_config(data, tmp_path / "killed", **settings), killed_cfg)

    straight = run_mtkit("train", straight_cfg)  # the uninterrupted run and the resumed one run in-process
    assert straight.returncode == 0, straight.stderr

    victim = _mtkit_train(killed_cfg)
    last = tmp_path / "killed" / "checkpoint_last.pt"
    deadline = time.monotonic() + 120
    while not last.exists() and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=60)
    assert victim.returncode == -signal.SIGKILL
    killed_at = load_checkpoint(last)["step"]
    assert 0 < killed_at < settings["max_steps"], "the run was not interrupted mid-way"

    resumed = run_mtkit("train", killed_cfg)  # resumes by itself: checkpoint_last.pt exists
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from {last} at update {killed_at}" in resumed.stderr

    straight_dir, killed_dir = tmp_path / "straight", tmp_path / "killed"
    _assert_same_weights(straight_dir / "checkpoint_last.pt", last)
    _assert_same_weights(straight_dir / "checkpoint_best.pt", killed_dir / "checkpoint_best.pt")
    straight_valid = [e for e in read_metrics(straight_dir / "metrics.jsonl") if e["event"] == "valid"]
    killed_valid = [e for e in read_metrics(killed_dir / "metrics.jsonl") if e["event"] == "valid"]
    assert [(e["step"], e["dev_loss"], e["dev_bleu"]) for e in straight_valid] == \
        [(e["step"], e["dev_loss"], e["dev_bleu"]) for e in killed_valid]


def test_stopping_and_continuing_in_process_matches_one_run(data, tmp_path):
    common = {"validate_every": 1000, "update_freq": 2, "max_tokens": 300}
    train(_config(data, tmp_path / "one", max_steps=24, **common))
    train(_config(data, tmp_path / "two", max_steps=11, **common))
    train(_config(data, tmp_path / "two", max_steps=24, **common))  # resume=None: continues
    _assert_same_weights(tmp_path / "one" / "checkpoint_last.pt", tmp_path / "two" / "checkpoint_last.pt")
    # --no-resume starts afresh and clears the old run's checkpoints
    train(_config(data, tmp_path / "two", max_steps=3, **common), resume=False)
    assert load_checkpoint(tmp_path / "two" / "checkpoint_last.pt")["step"] == 3


def test_corrupt_checkpoint_is_a_clear_error(data, tmp_path):
    cfg = _config(data, tmp_path / "m", max_steps=5, validate_every=5)
    train(cfg)
    last = tmp_path / "m" / "checkpoint_last.pt"
    blob = last.read_bytes()
    last.write_bytes(blob[: len(blob) // 2])  # truncated, as by a full disk
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        load_checkpoint(last)
    config = tmp_path / "m.yaml"
    save_config(cfg, config)
    result = run_mtkit("train", config, "--resume")
    assert result.returncode == CheckpointError.exit_code
    assert "error:" in result.stderr and "corrupt or truncated checkpoint" in result.stderr
    assert "Traceback" not in result.stderr
    last.write_bytes(b"not a checkpoint at all")
    with pytest.raises(CheckpointError, match=str(last.name)):
        train(cfg, resume=True)


def test_resume_without_checkpoint_or_with_another_model(data, tmp_path):
    with pytest.raises(CheckpointError, match="no checkpoint_last.pt"):
        train(_config(data, tmp_path / "empty", max_steps=2), resume=True)
    train(_config(data, tmp_path / "m", max_steps=2))
    other = to_dict(_config(data, tmp_path / "m", max_steps=4))
    other["model"]["d_model"] = 64
    with pytest.raises(CheckpointError, match="different model section"):
        train(from_dict(other), resume=True)


class _Killed(BaseException):
    """Stands in for SIGKILL: nothing after it runs (not even `finally` code that writes files)."""


@pytest.mark.parametrize("kill_after", ["checkpoint_last.pt", "checkpoint_step4.pt"])
def test_the_log_and_the_checkpoints_agree_after_a_kill(data, tmp_path, monkeypatch, kill_after):
    """Killed right after a validation's checkpoint is written (or before its last checkpoint): after
    resuming, metrics.jsonl holds each validation exactly once, as an uninterrupted run's does."""
    import mtkit.train.checkpointing as checkpointing

    real_save = checkpointing.save_checkpoint

    def save_then_die(state, path):
        real_save(state, path)
        if Path(path).name == kill_after and state.get("step") == 4:
            raise _Killed

    cfg = _config(data, tmp_path / "m", max_steps=6, validate_every=2, log_every=1)
    monkeypatch.setattr(checkpointing, "save_checkpoint", save_then_die)
    with pytest.raises(_Killed):
        train(cfg)
    monkeypatch.setattr(checkpointing, "save_checkpoint", real_save)
    train(cfg)
    valid = [e["step"] for e in read_metrics(tmp_path / "m" / "metrics.jsonl") if e["event"] == "valid"]
    assert valid == [2, 4, 6]
