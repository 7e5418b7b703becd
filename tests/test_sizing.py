"""model.size auto (mtkit.train.sizing): the width chosen from measured speed and the time budget."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from mtkit.config.experiment import from_dict, given_keys, load_config
from mtkit.errors import ConfigError
from mtkit.metrics_log import read_metrics
from mtkit.train import sizing
from mtkit.train.sizing import LADDER, Shape, apply_choice, check_auto, choose
from mtkit.train.trainer import train

sys.path.insert(0, str(Path(__file__).parent))
from train_helpers import make_data_dir  # noqa: E402

WIDE, MIDDLE, NARROW = sorted(LADDER, key=lambda s: -s.d_model)
NINE_MINUTES = 540.0
# seconds per update the probe measured for the demo's config on a 2-core Xeon (bench/studies/size_probe.py):
# held to AVX2 (fp32), and with native bf16 (docs/notebook/budget.md)
AVX2 = [(WIDE, 0.80), (MIDDLE, 0.50), (NARROW, 0.30)]
BF16 = [(WIDE, 0.33), (MIDDLE, 0.25), (NARROW, 0.19)]


def test_a_slow_machine_gets_a_narrow_model_and_a_fast_one_a_wide():
    assert choose(AVX2, NINE_MINUTES, epoch_updates=500).shape == NARROW
    gpu = [(shape, seconds / 10) for shape, seconds in BF16]
    assert choose(gpu, NINE_MINUTES, epoch_updates=500).shape == WIDE
    assert choose(BF16, 100 * NINE_MINUTES, epoch_updates=500).shape == WIDE


def test_a_longer_budget_never_chooses_a_narrower_model():
    widths = [choose(AVX2, minutes * 60, 500).shape.d_model for minutes in (1, 5, 9, 35, 120, 600)]
    assert widths == sorted(widths) and widths[0] == NARROW.d_model and widths[-1] == WIDE.d_model


def test_each_width_is_predicted_its_own_updates_on_its_own_curve():
    record = choose(AVX2, NINE_MINUTES, 500).record()
    updates = record["predicted_updates"]
    assert updates["128"] > updates["192"] > updates["256"]
    assert updates["256"] == sizing.predicted_updates(0.80, NINE_MINUTES)
    losses = record["predicted_dev_loss"]
    assert losses["128"] == min(losses.values()) and losses["128"] == pytest.approx(
        NARROW.dev_loss(updates["128"]), abs=1e-3)
    assert WIDE.dev_loss(1000) < MIDDLE.dev_loss(1000) < NARROW.dev_loss(1000)  # per update wider is better


def test_the_choice_is_a_function_of_the_measured_speeds():
    first = choose(AVX2, NINE_MINUTES, 500)
    again = choose(list(reversed(AVX2)), NINE_MINUTES, 500)  # the order they were measured in
    assert (first.shape, first.dropout, first.epochs) == (again.shape, again.dropout, again.epochs)
    assert first.record() == again.record()


def test_dropout_is_off_for_a_run_of_few_epochs_and_kept_for_a_long_one():
    short = choose(BF16, NINE_MINUTES, epoch_updates=1000, default_dropout=0.1)
    assert short.epochs < sizing.DROPOUT_EPOCHS and short.dropout == 0.0
    long = choose(BF16, NINE_MINUTES, epoch_updates=100, default_dropout=0.1)
    assert long.epochs >= sizing.DROPOUT_EPOCHS and long.dropout == 0.1


def test_the_choice_says_what_was_measured_and_why():
    line = choose(AVX2, NINE_MINUTES, 500).describe()
    assert "model.size auto: d_model 128" in line
    for shape, seconds in AVX2:
        assert f"{shape.d_model}: {seconds:.3f} s/update" in line


def test_keys_given_in_the_config_or_with_set_stay_as_given(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("model:\n  size: auto\n  dropout: 0.2\ntraining:\n  max_time: 9\n", encoding="utf-8")
    cfg = load_config(config, ["model.heads=8"])
    assert given_keys(cfg.model) == {"size", "dropout", "heads"}
    resolved, kept = apply_choice(cfg, choose(AVX2, NINE_MINUTES, 500))
    model = resolved.model
    assert (model.d_model, model.d_ff, model.heads, model.dropout) == (128, 512, 8, 0.2)
    assert resolved.training.lr == NARROW.lr
    assert kept == ["model.heads", "model.dropout"]
    given_lr = load_config(config, ["training.lr=0.001"])
    assert apply_choice(given_lr, choose(AVX2, NINE_MINUTES, 500))[0].training.lr == 0.001


def test_a_resumed_run_takes_the_recorded_choice_except_what_is_given_now():
    recorded = from_dict({"model": {"size": "auto", "d_model": 128, "d_ff": 512, "dropout": 0.0},
                          "training": {"max_time": 9, "lr": 0.004}})
    fresh = from_dict({"model": {"size": "auto"}, "training": {"max_time": 9}})
    resumed = sizing.recorded_choice(fresh, recorded)
    assert (resumed.model.d_model, resumed.model.d_ff, resumed.model.dropout, resumed.training.lr) == (
        128, 512, 0.0, 0.004)
    given = from_dict({"model": {"size": "auto", "dropout": 0.3}, "training": {"max_time": 9, "lr": 0.001}})
    resumed = sizing.recorded_choice(given, recorded)
    assert (resumed.model.d_model, resumed.model.dropout, resumed.training.lr) == (128, 0.3, 0.001)


def test_a_given_width_is_the_only_candidate():
    cfg = from_dict({"model": {"size": "auto", "d_model": 192}, "training": {"max_time": 9}})
    assert sizing.shape_candidates(cfg.model) == [Shape(192, 768, 4)]
    assert len(sizing.shape_candidates(from_dict({"model": {"size": "auto"}}).model)) == len(LADDER)


def test_auto_is_refused_without_a_time_budget_or_for_an_rnn():
    with pytest.raises(ConfigError, match="training.max_time"):
        check_auto(from_dict({"model": {"size": "auto"}, "training": {"max_steps": 100}}))
    with pytest.raises(ConfigError, match="model.arch"):
        from_dict({"model": {"arch": "rnn", "size": "auto"}})


# ------------------------------------------------------------------------------- in a training run
# tiny widths on the real widths' curves
TINY_LADDER = tuple(Shape(d, 2 * d, 2, real.floor, real.scale)
                    for d, real in zip((16, 24, 32), LADDER, strict=True))


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("sizing"), n_train=120, n_dev=8)


def _auto_config(data: Path, model_dir: Path, **training):
    settings = {"model_dir": str(model_dir), "max_tokens": 400, "lr": 3e-3, "schedule": "constant",
                "warmup_steps": 0, "log_every": 2, "validate_every": 4, "max_steps": 4, "max_time": 9,
                "threads": 1, "device": "cpu", "precision": "fp32", "valid_metric": "loss", **training}
    return from_dict({"data": {"dir": str(data)},
                      "model": {"size": "auto", "encoder_layers": 1, "decoder_layers": 1},
                      "training": settings, "decoding": {"beam_size": 1, "max_len_b": 5}})


def test_a_run_trains_the_chosen_shape_and_records_it(data, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sizing, "LADDER", TINY_LADDER)
    # as if measured: the widest makes too few updates to be worth it, the middle one wins
    seconds = {16: 0.2, 24: 0.12, 32: 2.0}
    assert choose([(s, seconds[s.d_model]) for s in TINY_LADDER], NINE_MINUTES, 10).shape.d_model == 24
    monkeypatch.setattr(sizing, "time_updates",
                        lambda cfg, shapes, *a: [(s, seconds[s.d_model]) for s in shapes])
    train(_auto_config(data, tmp_path / "m"))
    stored = from_dict(yaml.safe_load((tmp_path / "m" / "config.yaml").read_text()), stored=True)
    model = stored.model
    assert (model.size, model.d_model, model.d_ff, model.heads) == ("auto", 24, 48, 2)
    event = next(e for e in read_metrics(tmp_path / "m" / "metrics.jsonl") if e["event"] == "size")
    assert event["d_model"] == 24 and event["seconds_per_update"] == {"32": 2.0, "24": 0.12, "16": 0.2}
    assert "model.size auto: d_model 24" in capsys.readouterr().err

    def no_probe(*args):
        raise AssertionError("a resumed run probed again")

    monkeypatch.setattr(sizing, "time_updates", no_probe)  # resumed: the recorded shape, no probe
    train(_auto_config(data, tmp_path / "m", max_steps=6), resume=True)
    events = read_metrics(tmp_path / "m" / "metrics.jsonl")
    assert max(e["step"] for e in events if e["event"] == "train") == 6
    assert "d_model 24, d_ff 48" in capsys.readouterr().err


def test_the_probe_times_real_updates_of_each_width(data, tmp_path, monkeypatch):
    monkeypatch.setattr(sizing, "LADDER", TINY_LADDER)
    train(_auto_config(data, tmp_path / "m", max_steps=2))
    event = next(e for e in read_metrics(tmp_path / "m" / "metrics.jsonl") if e["event"] == "size")
    assert set(event["seconds_per_update"]) == {"16", "24", "32"}
    assert all(s > 0 for s in event["seconds_per_update"].values()) and event["probe_seconds"] > 0
