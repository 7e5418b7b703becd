"""The training loop: learning, model dir contents, checkpoints, stopping rules, guards, curves."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from mtkit.checkpoint import load_checkpoint
from mtkit.config.experiment import from_dict, to_dict
from mtkit.errors import MtkitError
from mtkit.metrics_log import read_metrics
from mtkit.models import build_model
from mtkit.plots import plot_curves
from mtkit.train.trainer import train

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import run_mtkit  # noqa: E402
from train_helpers import make_data_dir, straight_and_resumed, tiny_config  # noqa: E402


@pytest.fixture(scope="module")
def copy_data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("copy"), n_train=1000, n_dev=30, random_ids=(3, 8),
                         vocab_size=24)


def _config(data: Path, model_dir: Path, arch: str = "transformer", **training):
    cfg = tiny_config(data, model_dir, arch=arch, **training)
    raw = to_dict(cfg)
    if arch == "transformer":
        raw["model"].update(d_model=64, heads=4, d_ff=128)
    else:
        raw["model"].update(emb_dim=32, hidden_size=64)
    return from_dict(raw)


def _events(model_dir: Path, kind: str) -> list[dict]:
    return [e for e in read_metrics(model_dir / "metrics.jsonl") if e["event"] == kind]


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_model_learns_to_copy(copy_data, tmp_path, arch):
    cfg = _config(copy_data, tmp_path / "m", arch, max_steps=400, validate_every=200, log_every=50,
                  lr=3e-3, schedule="inverse_sqrt", warmup_steps=30, max_tokens=500)
    train(cfg)
    train_events, valid = _events(tmp_path / "m", "train"), _events(tmp_path / "m", "valid")
    assert train_events[0]["loss"] > 2.0
    assert train_events[-1]["loss"] < 0.1
    assert valid[-1]["dev_loss"] < 0.15
    assert valid[-1]["dev_bleu"] > 80


def test_model_dir_holds_everything_the_translator_needs(copy_data, tmp_path):
    model_dir = tmp_path / "m"
    cfg = _config(copy_data, model_dir, max_steps=60, validate_every=10, log_every=10, keep_best=2,
                  keep_last=1, valid_metric="bleu")
    train(cfg)
    for name in ("config.yaml", "meta.json", "bpe.model", "checkpoint_last.pt", "checkpoint_best.pt",
                 "metrics.jsonl"):
        assert (model_dir / name).is_file(), name
    copied_meta = json.loads((model_dir / "meta.json").read_text())
    assert copied_meta == json.loads((copy_data / "meta.json").read_text())
    valid = _events(model_dir, "valid")
    assert [e["step"] for e in valid] == [10, 20, 30, 40, 50, 60]
    ranked = sorted(valid, key=lambda e: (e["dev_bleu"], e["step"]), reverse=True)
    kept = {int(p.stem.removeprefix("checkpoint_step")) for p in model_dir.glob("checkpoint_step*.pt")}
    assert kept == {ranked[0]["step"], ranked[1]["step"], 60}  # best 2 by BLEU + the last one
    best = load_checkpoint(model_dir / "checkpoint_best.pt")
    assert best["step"] == ranked[0]["step"]
    assert best["metrics"]["valid"]["dev_bleu"] == pytest.approx(ranked[0]["dev_bleu"])
    model = build_model(from_dict(best["config"]).model, best["vocab"]["src_vocab_size"],
                        best["vocab"]["tgt_vocab_size"], best["vocab"]["joint"])
    model.load_state_dict(best["model"])
    last = torch.load(model_dir / "checkpoint_last.pt", weights_only=True)  # plain tensors and lists only
    assert last["step"] == 60 and {"optimizer", "scheduler", "rng", "train_state"} <= last.keys()
    train_event = _events(model_dir, "train")[-1]
    for key in ("step", "epoch", "loss", "ppl", "lr", "tokens_per_s", "padding", "elapsed"):
        assert train_event[key] is not None, key
    assert 0 <= train_event["padding"] < 0.5
    # memory is logged with every interval and after every validation (where it used to peak): a
    # process holding torch and a model is > 50 MiB
    for event in (train_event, _events(model_dir, "valid")[-1]):
        assert 50 < event["rss_mib"] <= event["peak_rss_mib"] < 64 * 1024


def test_early_stopping_and_max_epochs(copy_data, tmp_path):
    # lr 0: the dev loss never improves after the first validation, so patience 2 stops at the third
    cfg = _config(copy_data, tmp_path / "stop", lr=0.0, max_steps=1000, validate_every=5, patience=2)
    train(cfg)
    assert [e["step"] for e in _events(tmp_path / "stop", "valid")] == [5, 10, 15]
    assert load_checkpoint(tmp_path / "stop" / "checkpoint_last.pt")["step"] == 15

    cfg = _config(copy_data, tmp_path / "epochs", max_steps=0, max_epochs=2, validate_every=1000)
    train(cfg)
    last = load_checkpoint(tmp_path / "epochs" / "checkpoint_last.pt")
    from mtkit.data.batching import sampler_for
    from mtkit.data.shards import ParallelData

    batches_per_epoch = len(sampler_for(ParallelData(copy_data, "train"), cfg.training.max_tokens))
    assert last["step"] == 2 * batches_per_epoch
    assert (last["train_state"]["epoch"], last["train_state"]["batch"]) == (3, 0)


def test_update_freq_accumulates_batches(copy_data, tmp_path):
    from mtkit.data.batching import sampler_for
    from mtkit.data.shards import ParallelData

    cfg = _config(copy_data, tmp_path / "acc", max_steps=4, update_freq=3, validate_every=1000)
    assert len(sampler_for(ParallelData(copy_data, "train"), cfg.training.max_tokens)) > 12
    train(cfg)
    last = load_checkpoint(tmp_path / "acc" / "checkpoint_last.pt")
    assert last["step"] == 4 and (last["train_state"]["epoch"], last["train_state"]["batch"]) == (1, 12)


def test_nonfinite_losses_skip_updates_then_abort(copy_data, tmp_path, monkeypatch, capsys):
    import mtkit.train.update as update_module

    real_loss = update_module.projected_label_smoothed_nll

    def poisoned(features, weight, target, eps, **options):
        loss, nll = real_loss(features, weight, target, eps, **options)
        return loss * float("nan"), nll

    monkeypatch.setattr(update_module, "projected_label_smoothed_nll", poisoned)
    cfg = _config(copy_data, tmp_path / "nan", max_steps=50, save_every=2, max_nonfinite=3)
    with pytest.raises(MtkitError, match="3 consecutive updates had a non-finite loss"):
        train(cfg)
    assert "skipped 1 update(s) with a non-finite loss" in capsys.readouterr().err
    # no update was applied: the weights written at update 2 are the initial ones
    saved = load_checkpoint(tmp_path / "nan" / "checkpoint_last.pt")
    torch.manual_seed(cfg.training.seed)
    fresh = build_model(cfg.model, saved["vocab"]["src_vocab_size"], saved["vocab"]["tgt_vocab_size"], True)
    for key, value in fresh.state_dict().items():
        assert torch.equal(value, saved["model"][key]), key


@pytest.mark.parametrize("extra", [
    {"scheduled_sampling": "linear", "ss_k": 10.0, "ss_min": 0.5},
    {"diversity_penalty": 0.5},
    {"precision": "bf16", "label_smoothing": 0.1, "update_freq": 2},
])
def test_training_options_run_and_learn(copy_data, tmp_path, extra):
    """Each option trains, and takes effect: with everything seeded, a run without the option ends
    with bitwise the same weights, so an option that was silently ignored would be caught here."""
    settings = {"max_steps": 40, "log_every": 10, "validate_every": 40}
    cfg = _config(copy_data, tmp_path / "opt", **settings, **extra)
    train(cfg)
    events = _events(tmp_path / "opt", "train")
    losses = [e["loss"] for e in events]
    assert all(x == x and x < 10 for x in losses) and losses[-1] < losses[0]
    if "diversity_penalty" in extra:  # without label smoothing the loss is the NLL plus the penalty
        assert all(e["loss"] > e["nll"] + 1e-4 for e in events)
    baseline = _config(copy_data, tmp_path / "base", **settings)
    train(baseline)
    ours = load_checkpoint(tmp_path / "opt" / "checkpoint_last.pt")["model"]
    theirs = load_checkpoint(tmp_path / "base" / "checkpoint_last.pt")["model"]
    assert any(not torch.equal(ours[k], theirs[k]) for k in ours), f"{extra} changed nothing"


def test_validation_runs_between_two_hand_backs_of_free_memory(copy_data, tmp_path, monkeypatch):
    """The heap's free pages are handed back before a validation (whose tensors then reuse them: the
    resident size peaked in validations) and after it; not between updates (that costs speed)."""
    import mtkit.train.trainer as trainer_module

    calls: list[str] = []
    real_evaluate = trainer_module.evaluate

    def evaluate(*args, **kwargs):
        calls.append("validate")
        return real_evaluate(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "evaluate", evaluate)
    monkeypatch.setattr(trainer_module, "release_freed_memory", lambda: calls.append("release") or True)
    train(_config(copy_data, tmp_path / "m", max_steps=20, validate_every=10, log_every=5))
    assert calls == ["release", "validate", "release"] * 2


@pytest.mark.parametrize("precision", ["auto", "fp32"])
def test_validation_searches_the_model_as_translate_decodes_it_under_auto(precision, copy_data, tmp_path,
                                                                         monkeypatch):
    """Under training.precision auto, validation's greedy search runs on `decoding_copy` of the model
    (what `mtkit translate --precision auto` decodes: bf16 or int8 where auto picks them), not on the
    fp32 training weights under autocast; an explicit precision searches the training weights."""
    import mtkit.train.trainer as trainer_module
    import mtkit.train.validation as validation

    made: list[torch.nn.Module] = []
    searched: list[torch.nn.Module] = []
    real_search = validation.search

    def decoding_copy(model, device):
        made.append(model)
        return model

    def search(model, *args, **kwargs):
        searched.append(model)
        return real_search(model, *args, **kwargs)

    monkeypatch.setattr(trainer_module, "decoding_copy", decoding_copy)
    monkeypatch.setattr(validation, "search", search)
    train(_config(copy_data, tmp_path / "m", max_steps=2, validate_every=2, log_every=1, precision=precision))
    assert searched and (len(made) == 1 if precision == "auto" else not made)


def test_learning_curves_png(copy_data, tmp_path):
    cfg = _config(copy_data, tmp_path / "m", max_steps=20, validate_every=10, log_every=5)
    train(cfg)
    out = plot_curves(tmp_path / "m")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = run_mtkit("plot", tmp_path / "m", "-o", tmp_path / "c.png")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(MtkitError, match="metrics.jsonl not found"):
        plot_curves(tmp_path)


def test_max_time_stops_the_run(copy_data, tmp_path):
    cfg = _config(copy_data, tmp_path / "t", max_steps=100_000, max_time=0.02, validate_every=100_000)
    train(cfg)
    last = load_checkpoint(tmp_path / "t" / "checkpoint_last.pt")
    assert 0 < last["step"] < 100_000
    assert last["train_state"]["elapsed"] >= 0.02 * 60


def test_out_of_memory_names_max_tokens(copy_data, tmp_path, monkeypatch):
    import mtkit.train.trainer as trainer_module

    def out_of_memory(self, group):
        raise trainer_module._OUT_OF_MEMORY("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(trainer_module.Trainer, "_update", out_of_memory)
    with pytest.raises(MtkitError, match=r"out of memory .* training.max_tokens=400: lower max_tokens"):
        train(_config(copy_data, tmp_path / "oom", max_steps=5))


def test_diverged_weights_are_never_checkpointed(copy_data, tmp_path):
    """An lr that overflows the weights to ±inf stops the run before any checkpoint holds them."""
    cfg = _config(copy_data, tmp_path / "div", max_steps=10, validate_every=2, lr=1e39, warmup_steps=0)
    with pytest.raises(MtkitError, match="training diverged: parameter .* is not finite"):
        train(cfg)
    for path in (tmp_path / "div").glob("*.pt"):
        state = load_checkpoint(path)
        assert all(torch.isfinite(t).all() for t in state["model"].values() if t.is_floating_point()), path


def test_a_model_directory_keeps_the_bpe_model_it_was_created_with(copy_data, tmp_path):
    """Re-preparing the data with another BPE model must not silently change a trained model."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(copy_data, data)
    train(_config(data, tmp_path / "m", max_steps=2, validate_every=2))
    before = (tmp_path / "m" / "bpe.model").read_bytes()
    other = make_data_dir(tmp_path / "other", n_train=50, n_dev=4, vocab_size=30, seed=5)
    shutil.copyfile(other / "bpe.model", data / "bpe.model")
    with pytest.raises(MtkitError, match="differs from .*bpe.model.* train into a new training.model_dir"):
        train(_config(data, tmp_path / "m", max_steps=4, validate_every=2))
    assert (tmp_path / "m" / "bpe.model").read_bytes() == before


# ------------------------------------------------------------------------- the GPU path, on a CPU
_READ_BACKS = ("item", "tolist", "numpy", "nonzero", "__bool__", "__int__", "__float__", "__index__")


def _count_read_backs(monkeypatch) -> list[str]:
    """Patch every Tensor method that brings a value to the host (on a GPU: waits for it) to record
    its name: the mock device counter."""
    calls: list[str] = []
    for name in _READ_BACKS:
        real = getattr(torch.Tensor, name)

        def counted(self, *args, _real=real, _name=name, **kwargs):
            calls.append(_name)
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    return calls


@pytest.mark.parametrize("gpu_path", [True, False])
def test_updates_read_nothing_back_on_the_gpu_path(copy_data, tmp_path, monkeypatch, gpu_path):
    """With the settings a GPU trains with (PAD rows weighted out instead of looked up, the
    non-finite check left to the log line) an update reads no tensor value back, so the host never
    waits for the device; on a CPU both reads are free and kept."""
    from mtkit.device import DistInfo
    from mtkit.train.trainer import Trainer

    cfg = _config(copy_data, tmp_path / "m", max_steps=10, shape_buckets="on")
    trainer = Trainer(cfg, DistInfo(), torch.device("cpu"), resume=False)
    trainer.updater.drop_padding = trainer.updater.read_back_each_update = not gpu_path
    work = trainer._work(0, 0)
    groups = [next(work).batches for _ in range(5)]
    calls = _count_read_backs(monkeypatch)
    for group in groups:
        trainer._update(group)
    monkeypatch.undo()
    if gpu_path:
        assert calls == []
    else:
        assert "nonzero" in calls and "__int__" in calls
    trainer._log()  # the log line reads the sums: once per log_every updates
    assert _events(tmp_path / "m", "train")[-1]["loss"] > 0


def test_bucketed_training_resumes_like_an_uninterrupted_run(copy_data, tmp_path):
    a, b = straight_and_resumed(lambda d, n: _config(copy_data, d, max_steps=n, shape_buckets="on",
                                                     save_every=20), tmp_path, 40)
    assert all(torch.equal(a[k], b[k]) for k in a)
    events = _events(tmp_path / "straight", "train")
    assert all(e["mfu"] is None for e in events)  # no peak FLOP/s known for a CPU: no MFU shown
    assert 0 < events[-1]["padding"] < 1


def test_cuda_graphs_are_refused_where_they_cannot_run(copy_data, tmp_path):
    from mtkit.errors import ConfigError

    with pytest.raises(ConfigError, match="cuda_graphs=on: not possible here .the device is cpu"):
        train(_config(copy_data, tmp_path / "g", cuda_graphs="on"))
