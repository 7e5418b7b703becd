"""The budget of a training run: the planner's estimate of the updates a time budget allows, and
budget schedules in real runs (the decay ends with the budget; kill and resume keep the schedule)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import make_data_dir, tiny_config

from mtkit.checkpoint import load_checkpoint
from mtkit.errors import ConfigError
from mtkit.metrics_log import read_metrics
from mtkit.train.budget import PROBE_UPDATES, SETTLE_UPDATES, BudgetPlanner
from mtkit.train.trainer import train


def test_a_step_or_epoch_bound_is_known_before_the_first_update():
    assert BudgetPlanner(500, 0, 100).initial().total == 500
    assert BudgetPlanner(None, 600, 100).initial() is None  # a time bound is measured first


def test_time_budget_estimate_counts_updates_and_validations_left():
    planner = BudgetPlanner(None, max_seconds=1000, validate_every=100)
    seconds = 0.0
    step = 0
    for step in range(1, SETTLE_UPDATES + PROBE_UPDATES + 1):
        seconds += 5.0 if step <= SETTLE_UPDATES else 0.5  # start-up costs, then 0.5 s an update
        planner.observe(step, seconds)
        due = planner.due(step, log_every=50)
        assert due == (step == SETTLE_UPDATES + PROBE_UPDATES)
    estimate = planner.estimate(step, seconds, elapsed=seconds)
    assert estimate.seconds_per_update == pytest.approx(0.5)
    assert estimate.total == step + int((1000 - seconds) / 0.5)  # no validation measured yet
    planner.note_validation(20.0)  # 20 s per validation, one every 100 updates: 0.2 s more per update
    estimate = planner.estimate(step, seconds, elapsed=seconds + 20.0)
    assert estimate.total == step + int((1000 - seconds - 20.0 - 20.0) / 0.7)
    assert estimate.seconds_per_validation == pytest.approx(20.0)
    assert BudgetPlanner(100, 1000, 100).estimate(1, 1.0, 1.0) is None  # not yet timed
    bounded = BudgetPlanner(120, 1000, 100)
    for s in range(1, 20):
        bounded.observe(s, 0.5 * s)
    assert bounded.estimate(19, 9.5, 9.5).total == 120  # the step bound is smaller than the time's


def test_re_estimates_at_log_steps_after_the_probe_also_when_resumed():
    planner = BudgetPlanner(None, 60, 100)
    due = [s for s in range(301, 500) if planner.due(s, log_every=50)]
    assert due == [300 + SETTLE_UPDATES + PROBE_UPDATES, 350, 400, 450]


# ---------------------------------------------------------------------------------------- runs
@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("budget"), n_train=200, n_dev=8)


def _lrs(model_dir: Path) -> dict[int, float]:
    return {e["step"]: e["lr"] for e in read_metrics(model_dir / "metrics.jsonl") if e["event"] == "train"}


def test_a_budget_schedule_needs_a_budget(data, tmp_path):
    with pytest.raises(ConfigError, match="max_steps, max_epochs or max_time"):
        train(tiny_config(data, tmp_path / "m", schedule="linear", max_steps=0))


def test_the_decay_reaches_its_floor_at_max_steps(data, tmp_path):
    train(tiny_config(data, tmp_path / "m", schedule="cosine", lr=2e-3, warmup_fraction=0.1, min_lr=1e-5,
                      max_steps=40, log_every=1, validate_every=40))
    lrs = _lrs(tmp_path / "m")
    assert lrs[4] == pytest.approx(2e-3) and lrs[2] == pytest.approx(1e-3)  # warm-up: 10% of 40
    assert lrs[40] == pytest.approx(1e-5)
    assert max(lrs, key=lrs.get) == 4


def test_a_time_budget_is_planned_from_measured_speed_and_decays_by_its_end(data, tmp_path):
    train(tiny_config(data, tmp_path / "m", schedule="linear", lr=2e-3, warmup_fraction=0.05, max_steps=0,
                      max_time=0.1, log_every=5, validate_every=100))
    events = read_metrics(tmp_path / "m" / "metrics.jsonl")
    plans = [e for e in events if e["event"] == "plan"]
    assert plans and plans[0]["step"] == SETTLE_UPDATES + PROBE_UPDATES and plans[0]["seconds_per_update"] > 0
    last = max(_lrs(tmp_path / "m").items())
    # the last estimate was made at most log_every updates before the end, at the speed of the run
    assert last[1] <= 0.5 * 2e-3, f"the LR was still {last[1]:.2e} at the last update {last[0]}"


class _Killed(BaseException):
    """Stands in for SIGKILL: nothing after it runs."""


def test_kill_and_resume_keep_the_schedule_and_the_weight_average(data, tmp_path, monkeypatch):
    import mtkit.train.checkpointing as checkpointing

    settings = {"schedule": "cosine", "lr": 3e-3, "warmup_fraction": 0.2, "max_steps": 30, "save_every": 6,
                "validate_every": 10, "log_every": 1, "ema_decay": 0.9}
    train(tiny_config(data, tmp_path / "straight", **settings))

    real_save = checkpointing.save_checkpoint

    def save_then_die(state, path):
        real_save(state, path)
        if Path(path).name == "checkpoint_last.pt" and state.get("step") == 12:
            raise _Killed

    monkeypatch.setattr(checkpointing, "save_checkpoint", save_then_die)
    with pytest.raises(_Killed):
        train(tiny_config(data, tmp_path / "killed", **settings))
    monkeypatch.setattr(checkpointing, "save_checkpoint", real_save)
    train(tiny_config(data, tmp_path / "killed", **settings))

    assert _lrs(tmp_path / "straight") == _lrs(tmp_path / "killed")
    a = load_checkpoint(tmp_path / "straight" / "checkpoint_last.pt")
    b = load_checkpoint(tmp_path / "killed" / "checkpoint_last.pt")
    for part in ("model", "ema"):
        assert a[part].keys() == b[part].keys()
        for key in a[part]:
            assert torch.equal(a[part][key], b[part][key]), (part, key)
    assert not all(torch.equal(a["model"][k], a["ema"][k]) for k in a["ema"]), "average = weights"
