"""Fine-tuning (training.init_from, `mtkit train --init-from`): a new run starts from a parent's weights,
carries over exactly what it is told to, refuses a contradicting architecture or vocabulary before
writing anything, and is an ordinary resumable run once started. Also bpe.model_from in prepare,
training.freeze, and the recipes/adapt Makefile (with a stand-in for mtkit)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from rich.console import Console

from mtkit.checkpoint import load_checkpoint
from mtkit.config.experiment import from_dict, load_config, save_config, to_dict
from mtkit.data.meta import read_meta
from mtkit.data.prepare import prepare
from mtkit.errors import CheckpointError, ConfigError, DataError
from mtkit.metrics_log import read_metrics
from mtkit.train import init_from
from mtkit.train.distributed import dist_info_from_env
from mtkit.train.trainer import Trainer, train

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import run_mtkit  # noqa: E402
from train_helpers import make_data_dir  # noqa: E402

ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
RECIPES = Path(__file__).resolve().parents[1] / "recipes"
TINY = {"arch": "transformer", "d_model": 32, "heads": 2, "d_ff": 64, "encoder_layers": 1,
        "decoder_layers": 1, "dropout": 0.2}
TRAINING = {"max_tokens": 400, "lr": 3e-3, "schedule": "inverse_sqrt", "warmup_steps": 20,
            "label_smoothing": 0.1, "log_every": 10, "validate_every": 20, "threads": 1, "device": "cpu",
            "valid_metric": "loss", "max_steps": 3,  # short, even where a refusal fails to happen
            "precision": "fp32"}  # as in tests/train_helpers.tiny_config: tiny models train faster
PARENT_STEPS = 40
ALL = ["optimizer", "schedule", "step"]


def _config(data: Path, model_dir: Path, model: dict[str, Any] | None = None, **training: Any):
    """A config; without `model` it has no model section at all (as a fine-tune's may)."""
    raw: dict[str, Any] = {"data": {"dir": str(data)}, "training": {**TRAINING, "model_dir": str(model_dir),
                                                                  **training},
                           "decoding": {"beam_size": 1, "max_len_a": 1.0, "max_len_b": 5}}
    if model is not None:
        raw["model"] = model
    return from_dict(raw)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return make_data_dir(tmp_path_factory.mktemp("ft-data"), n_train=300, n_dev=12, random_ids=(3, 9),
                         vocab_size=24)


@pytest.fixture(scope="module")
def parent(data, tmp_path_factory) -> Path:
    model_dir = tmp_path_factory.mktemp("ft-parent") / "parent"
    train(_config(data, model_dir, TINY, max_steps=PARENT_STEPS))
    return model_dir


def _weights(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["model"]


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _train_events(model_dir: Path) -> list[dict[str, Any]]:
    return [e for e in read_metrics(model_dir / "metrics.jsonl") if e["event"] == "train"]


# ------------------------------------------------------------------------------------ starting
def test_before_its_first_update_a_fine_tune_holds_the_parents_weights(data, parent, tmp_path):
    # no model section at all: the architecture comes from the parent; only the dropout changes
    cfg, found = init_from.resolve(_config(data, tmp_path / "ft", {"dropout": 0.3}, init_from=str(parent)),
                                   None)
    assert found is not None and (cfg.model.d_model, cfg.model.dropout) == (32, 0.3)
    trainer = Trainer(cfg, dist_info_from_env(), torch.device("cpu"), None, found)
    best = parent / "checkpoint_best.pt"
    assert _same(trainer.model.state_dict(), _weights(best))
    last = load_checkpoint(tmp_path / "ft" / "checkpoint_last.pt")  # started: written before any update
    assert last["step"] == 0 and _same(last["model"], _weights(best))
    recorded = load_config(tmp_path / "ft" / "config.yaml")  # the model directory says where it came from
    assert recorded.training.init_from == str(best.resolve())
    assert recorded.training.init_from_sha256 == hashlib.sha256(best.read_bytes()).hexdigest()
    assert last["config"]["training"]["init_from_sha256"] == recorded.training.init_from_sha256


def test_by_default_only_the_weights_carry_over(data, parent, tmp_path, capfd):
    model_dir = tmp_path / "ft"
    train(_config(data, model_dir, init_from=str(parent), max_steps=3, log_every=1))
    err = capfd.readouterr().err
    assert "carried over: weights\n" in err
    assert "fresh: optimizer state, LR schedule (from its warm-up), step counter, data position" in err
    first = _train_events(model_dir)[0]
    assert first["step"] == 1 and first["lr"] == pytest.approx(3e-3 / 20)  # warm-up from its start
    last = load_checkpoint(model_dir / "checkpoint_last.pt")
    assert int(last["optimizer"]["state"][0]["step"]) == 3  # Adam's own count: 3 updates, not 43
    assert last["train_state"]["step"] == 3 and last["train_state"]["epoch"] == 1
    assert [h["step"] for h in last["train_state"]["history"]] == [3]  # not the parent's validations


@pytest.mark.parametrize(("keep", "first_step", "first_lr"), [
    (["schedule"], 1, 3e-3 * ((20 / (PARENT_STEPS + 1)) ** 0.5)),  # the parent's LR curve goes on
    (["step"], PARENT_STEPS + 1, 3e-3 / 20),  # the counter goes on, the schedule starts its warm-up
])
def test_keeping_the_schedule_or_the_step_counter(data, parent, tmp_path, keep, first_step, first_lr):
    model_dir = tmp_path / "ft"
    train(_config(data, model_dir, init_from=str(parent), init_keep=keep, max_steps=first_step + 1,
                  log_every=1))
    first = _train_events(model_dir)[0]
    assert (first["step"], first["lr"]) == (first_step, pytest.approx(first_lr))


def test_keeping_optimizer_schedule_and_step_continues_like_resuming_the_parent(data, parent, tmp_path):
    resumed = tmp_path / "resumed"
    shutil.copytree(parent, resumed)
    train(_config(data, resumed, TINY, max_steps=PARENT_STEPS + 2))
    # the same dropout as the parent (a fine-tune may change it: a config without a model section would)
    train(_config(data, tmp_path / "kept", TINY, init_from=str(parent), init_keep=ALL,
                  max_steps=PARENT_STEPS + 2))
    train(_config(data, tmp_path / "fresh", TINY, init_from=str(parent), max_steps=2))
    expected = _weights(resumed / "checkpoint_last.pt")
    assert _same(_weights(tmp_path / "kept" / "checkpoint_last.pt"), expected)
    assert not _same(_weights(tmp_path / "fresh" / "checkpoint_last.pt"), expected)


def test_fine_tuning_defaults_apply_only_to_keys_left_at_their_defaults(data, parent, tmp_path):
    def resolved(**training):
        raw = {"data": {"dir": str(data)}, "training": {"model_dir": str(tmp_path / "ft"),
                                                          "init_from": str(parent), **training}}
        return init_from.resolve(from_dict(raw), None)[0].training

    tc = resolved()
    assert (tc.lr, tc.warmup_steps) == (pytest.approx(3e-3 * init_from.FINETUNE_LR_FACTOR), 100)
    assert (resolved(lr=2e-4, warmup_steps=0).lr, resolved(warmup_steps=0).warmup_steps) == (2e-4, 0)
    assert resolved(init_keep=["schedule"]).warmup_steps == 1000  # the parent's schedule goes on


# ------------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(("model", "bpe", "key"), [
    ({"d_model": 64, "heads": 2}, {}, "model.d_model"),
    ({"encoder_layers": 2}, {}, "model.encoder_layers"),
    ({"arch": "rnn", "d_model": 256, "heads": 4, "d_ff": 1024}, {}, "model.arch"),
    ({}, {"vocab_size": 30}, "bpe.vocab_size"),
])
def test_an_architecture_that_contradicts_the_parent_is_refused_by_key(data, parent, tmp_path, model, bpe,
                                                                       key):
    raw = to_dict(_config(data, tmp_path / "ft", {**TINY, **model}, init_from=str(parent)))
    raw["bpe"].update(bpe)
    with pytest.raises(ConfigError, match=rf"^{key}: .*contradicts the parent"):
        train(from_dict(raw))
    assert not (tmp_path / "ft").exists()


def test_a_data_directory_with_another_vocabulary_is_refused(parent, tmp_path):
    bigger = make_data_dir(tmp_path / "bigger", n_train=50, n_dev=4, vocab_size=30)
    with pytest.raises(DataError, match=r"another vocabulary \(joint, 30 tokens\).*set bpe.model_from: "):
        train(_config(bigger, tmp_path / "ft", init_from=str(parent)))
    other = make_data_dir(tmp_path / "other", n_train=50, n_dev=4, vocab_size=24, seed=7)
    assert (other / "bpe.model").read_bytes() != (parent / "bpe.model").read_bytes()
    with pytest.raises(DataError, match=r"is not the parent's .*other pieces.*run `mtkit prepare"):
        train(_config(other, tmp_path / "ft", init_from=str(parent)))
    assert not (tmp_path / "ft").exists()


def test_the_cli_refusal_is_one_line_and_writes_nothing(data, parent, tmp_path):
    config = tmp_path / "ft.yaml"
    save_config(_config(data, tmp_path / "ft", {**TINY, "d_ff": 128}), config)
    result = run_mtkit("train", config, "--init-from", parent, "--keep", "optimizer,step")
    assert result.returncode == ConfigError.exit_code
    assert result.stderr.startswith("error: model.d_ff: 128 contradicts the parent")
    assert result.stderr.count("\n") == 1 and not (tmp_path / "ft").exists()


def test_what_cannot_be_kept_or_started_is_refused(data, parent, tmp_path):
    with pytest.raises(ConfigError, match="holds no optimizer state"):  # only checkpoint_last.pt has it
        train(_config(data, tmp_path / "a", init_from=str(parent / "checkpoint_best.pt"),
                      init_keep=["optimizer"]))
    with pytest.raises(ConfigError, match="training.init_keep is set but training.init_from is not"):
        train(_config(data, tmp_path / "b", TINY, init_keep=["step"]))
    with pytest.raises(ConfigError, match="is in training.model_dir itself"):
        train(_config(data, parent, init_from=str(parent)))
    with pytest.raises(ConfigError, match=r"training.init_keep\[0\]: 'moments' is not one of"):
        _config(data, tmp_path / "c", init_from=str(parent), init_keep=["moments"])
    with pytest.raises(ConfigError, match="init_from_sha256"):
        train(_config(data, tmp_path / "d", init_from=str(parent), init_from_sha256="0" * 64))
    assert not any((tmp_path / name).exists() for name in "abcd")


# ----------------------------------------------------------------------------------- vocabulary
def test_prepare_encodes_new_data_with_the_parents_bpe_model(data, parent, tmp_path):
    lines = (data.parent / "corpus.txt").read_text(encoding="utf-8").splitlines()
    files = {}
    for split, part in (("train", lines[:150]), ("dev", lines[150:170])):
        for side in ("xx", "yy"):
            files[f"{split}_{'src' if side == 'xx' else 'tgt'}"] = str(tmp_path / f"{split}.{side}")
            (tmp_path / f"{split}.{side}").write_text("\n".join(part) + "\n", encoding="utf-8")

    def prepared(name: str, **bpe: Any) -> Path:
        cfg = from_dict({"data": {**files, "dir": str(tmp_path / name)}, "bpe": {"vocab_size": 30, **bpe}})
        prepare(cfg, console=Console(file=io.StringIO()))
        return tmp_path / name

    for given in (parent, parent / "checkpoint_best.pt", parent / "bpe.model"):
        out = prepared(f"bin-{given.name}", model_from=str(given))
        assert (out / "bpe.model").read_bytes() == (parent / "bpe.model").read_bytes()
        assert read_meta(out).src_vocab_size == read_meta(parent).src_vocab_size
        init_from.resolve(_config(out, tmp_path / "ft", init_from=str(parent)), None)  # accepted
    own = prepared("own")  # a BPE model of its own: --init-from says how to prepare instead
    with pytest.raises(DataError, match=f"set bpe.model_from: {parent} and run `mtkit prepare CONFIG`"):
        init_from.resolve(_config(own, tmp_path / "ft", init_from=str(parent)), None)
    with pytest.raises(ConfigError, match="set bpe.joint: true"):
        prepared("x", model_from=str(parent), joint=False)
    with pytest.raises(ConfigError, match="bpe.model_from and bpe.model"):
        prepared("y", model_from=str(parent), model=str(parent / "bpe.model"))
    with pytest.raises(ConfigError, match="bpe.model_from: .* not a .model file, a model directory"):
        prepared("z", model_from=str(tmp_path / "nowhere"))


# --------------------------------------------------------------------------------------- freeze
def test_frozen_groups_stay_as_the_parent_left_them(data, parent, tmp_path):
    model_dir = tmp_path / "ft"
    train(_config(data, model_dir, init_from=str(parent), freeze=["embeddings", "encoder"], max_steps=4))
    before, after = _weights(parent / "checkpoint_best.pt"), _weights(model_dir / "checkpoint_last.pt")
    frozen = ("src_embed.", "tgt_embed.", "output_proj.", "encoder_layers.")  # output_proj is tied
    assert all(torch.equal(before[k], after[k]) for k in before if k.startswith(frozen))
    assert not all(torch.equal(before[k], after[k]) for k in before if k.startswith("decoder_layers."))
    with pytest.raises(ConfigError, match="the whole model: nothing would be trained"):
        train(_config(data, tmp_path / "all", TINY, freeze=["embeddings", "encoder", "decoder", "output"]))
    with pytest.raises(CheckpointError, match="covers other parameters than this run trains"):
        train(_config(data, tmp_path / "b", init_from=str(parent), init_keep=["optimizer"],
                      freeze=["decoder"]))


# ----------------------------------------------------------------------------------- resumption
def _mtkit_train(config: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mtkit", "train", str(config)], env=ENV,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_sigkill_during_a_fine_tune_resumes_exactly_without_the_parent(data, parent, tmp_path):
    own_parent = tmp_path / "parent"
    shutil.copytree(parent, own_parent)
    # killed at its second save (update 6): 40 updates resume through two validations, as 80 did
    settings = {"init_from": str(own_parent), "max_steps": 40, "save_every": 3, "validate_every": 20}
    train(_config(data, tmp_path / "straight", **settings))
    config = tmp_path / "killed.yaml"
    save_config(_config(data, tmp_path / "killed", **settings), config)

    victim = _mtkit_train(config)
    last = tmp_path / "killed" / "checkpoint_last.pt"
    deadline, first = time.monotonic() + 120, None
    while victim.poll() is None and time.monotonic() < deadline:  # kill after the first save past update 0
        inode = last.stat().st_ino if last.exists() else None
        first = first or inode
        if inode is not None and inode != first:
            break
        time.sleep(0.002)
    victim.send_signal(signal.SIGKILL)
    victim.communicate(timeout=60)
    killed_at = load_checkpoint(last)["step"]
    assert 0 < killed_at < settings["max_steps"], "the run was not interrupted mid-way"

    own_parent.rename(tmp_path / "moved")  # once started, the fine-tune is an ordinary run
    resumed = run_mtkit("train", config)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming from {last} at update {killed_at}" in resumed.stderr
    assert _same(_weights(tmp_path / "straight" / "checkpoint_last.pt"), _weights(last))
    assert _same(_weights(tmp_path / "straight" / "checkpoint_best.pt"),
                 _weights(tmp_path / "killed" / "checkpoint_best.pt"))


# ------------------------------------------------------------------------------------- the recipe
def test_adapt_configs_fine_tune_the_deb_transformer_and_train_the_same_one_from_scratch():
    finetune = load_config(RECIPES / "adapt" / "finetune.yaml")
    scratch = load_config(RECIPES / "adapt" / "scratch.yaml")
    deb = load_config(RECIPES / "deb-en-de" / "transformer.yaml")
    assert to_dict(finetune)["data"] == to_dict(scratch)["data"]  # one data-bin serves both
    assert to_dict(finetune)["bpe"] == to_dict(scratch)["bpe"]
    parent = "../deb-en-de/" + deb.training.model_dir
    assert finetune.training.init_from == finetune.bpe.model_from == parent
    assert not scratch.training.init_from
    # the parent's architecture; the dropout is the fine-tune's (the parent trains without it)
    assert dataclasses.replace(scratch.model, dropout=deb.model.dropout) == deb.model
    assert scratch.model.dropout == finetune.model.dropout
    merged = init_from.merged_model(finetune.model, deb.model, Path(parent))
    assert merged == dataclasses.replace(deb.model, dropout=finetune.model.dropout)
    assert (finetune.data.src_lang, finetune.data.tgt_lang) == ("en", "de")
    assert finetune.training.max_tokens == scratch.training.max_tokens  # the same budget, the same batches


def test_forgetting_reports_the_share_of_the_parents_scores_kept(tmp_path):
    scores = {"sentences": 2000, "labels": {"bleu": "BLEU", "chrf": "chrF2"},
              "systems": [{"name": "parent", "scores": {"bleu": 30.0, "chrf": 60.0}},
                          {"name": "finetune", "scores": {"bleu": 24.0, "chrf": 57.0}}]}
    (tmp_path / "s.json").write_text(json.dumps(scores))
    script = RECIPES / "adapt" / "forgetting.py"
    result = subprocess.run([sys.executable, str(script), str(tmp_path / "s.json")], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "BLEU   parent  30.00  fine-tuned  24.00  kept 80.0%" in result.stdout
    assert "kept 95.0%" in result.stdout


FAKE_MTKIT = r'''
"""Stand-in for `mtkit`: writes what each stage writes, checks the parent is there, logs the call."""
import json, os, shutil, sys
from pathlib import Path
from mtkit.config.experiment import load_config

args = sys.argv[1:]
with open(os.environ["FAKE_LOG"], "a") as log:
    log.write(Path.cwd().name + " " + " ".join(args) + "\n")
cmd = args[0]

def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default

if cmd == "prepare":
    cfg = load_config(args[1])
    if cfg.bpe.model_from:
        assert Path(cfg.bpe.model_from, "checkpoint_best.pt").is_file(), "prepare before the parent"
    out = Path(cfg.data.dir)
    stamp = "".join(f"{p}:{os.stat(p).st_mtime_ns}" for p in (cfg.data.train_src, cfg.data.train_tgt))
    if not (out / "meta.json").is_file() or (out / "meta.json").read_text() != stamp:
        out.mkdir(parents=True, exist_ok=True)
        (out / "meta.json").write_text(stamp)
elif cmd == "train":
    cfg = load_config(args[1])
    if cfg.training.init_from:
        assert Path(cfg.training.init_from, "checkpoint_best.pt").is_file(), "fine-tune before the parent"
    model = Path(cfg.training.model_dir)
    model.mkdir(parents=True, exist_ok=True)
    (model / "checkpoint_best.pt").write_text(opt("--max-time", "0"))
elif cmd == "translate":
    assert Path(opt("--model"), "checkpoint_best.pt").is_file()
    shutil.copyfile(opt("-i"), opt("-o"))
elif cmd == "score":
    hyps = [a for i, a in enumerate(args) if i and args[i - 1] == "--hyp"]
    if "--json" in args:
        systems = [{"name": h, "scores": {"bleu": 20.0 + i}} for i, h in enumerate(hyps)]
        print(json.dumps({"sentences": 1, "labels": {"bleu": "BLEU"}, "systems": systems}))
    else:
        print("TABLE", " ".join(hyps))
'''

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def _recipes(root: Path) -> Path:
    """recipes/{common.mk, deb.mk, train.mk, student.mk, deb-en-de, demo, adapt} under root, with a deb
    corpus and the Bible as fetch_bible.py leaves it (nothing is downloaded)."""
    (root / "recipes").mkdir()
    for shared in ("common.mk", "deb.mk", "train.mk", "student.mk"):
        shutil.copy(RECIPES / shared, root / "recipes" / shared)
    for name in ("deb-en-de", "demo", "adapt"):
        shutil.copytree(RECIPES / name, root / "recipes" / name,
                        ignore=shutil.ignore_patterns("work", "__pycache__"))
    corpus, bible = root / "deb-corpus", root / "recipes" / "adapt" / "work" / "bible"
    corpus.mkdir()
    bible.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        for lang in ("en", "de"):
            (corpus / f"{split}.{lang}{'.gz' if split == 'train' else ''}").write_text(f"a {split} segment\n")
            (bible / f"{split}.{lang}").write_text(f"a {split} verse in {lang}\n")
    (bible / "SOURCE.txt").write_text("test corpus\n")
    return root / "recipes" / "adapt"


def _make(recipe: Path, fake: Path, log: Path, *variables: str) -> list[str]:
    """Run make in the adapt recipe; return the calls as "RECIPE COMMAND" (a no-op run prints nothing)."""
    log.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    env["FAKE_LOG"] = str(log)
    proc = subprocess.run(["make", "--no-print-directory", f"MTKIT={sys.executable} {fake}",
                           f"DEB_DATA={recipe.parents[1] / 'deb-corpus'}", *variables],
                          cwd=recipe, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [" ".join(line.split()[:2]) for line in log.read_text().splitlines()]
    if not calls:
        assert proc.stdout.strip() in ("", "make: Nothing to be done for 'all'."), proc.stdout
    return sorted(calls)


@needs_make
def test_adapt_recipe_trains_the_missing_parent_then_reruns_only_stale_stages(tmp_path):
    recipe = _recipes(tmp_path)
    fake, log = tmp_path / "fake_mtkit.py", tmp_path / "calls.log"
    fake.write_text(FAKE_MTKIT)
    parent_run = ["deb-en-de prepare", "deb-en-de train"]
    both = ["adapt train", "adapt train"]
    translations = ["adapt translate"] * 5  # Bible: parent, scratch, finetune; deb test: parent, finetune
    scores = ["adapt score"] * 3

    assert _make(recipe, fake, log, "TIME=1") == sorted(
        [*parent_run, "adapt prepare", *both, *translations, *scores])
    assert (recipe / "work" / "finetune" / "checkpoint_best.pt").read_text() == "1"
    assert (recipe.parent / "deb-en-de" / "work" / "transformer" / "checkpoint_best.pt").read_text() == "35"
    assert "kept 105.0%" in (recipe / "work" / "forgetting.txt").read_text()
    assert "bible.parent.de work/hyp/bible.scratch.de work/hyp/bible.finetune.de" in \
        (recipe / "work" / "scores.bible.txt").read_text()  # the parent is the baseline
    assert _make(recipe, fake, log, "TIME=1") == []  # finished: nothing to do

    # a longer budget trains both models on (resuming); the parent is never retrained from here
    assert _make(recipe, fake, log, "TIME=2") == sorted([*both, *["adapt translate"] * 3, *scores])
    # a parent retrained by its own recipe: the fine-tune starts again, the scratch model stays
    time.sleep(0.05)
    os.utime(recipe.parent / "deb-en-de" / "work" / ".stamps" / "transformer.trained")
    assert _make(recipe, fake, log, "TIME=2") == sorted(
        ["adapt prepare", "adapt train", *["adapt translate"] * 4, *scores])
    assert _make(recipe, fake, log, "TIME=2") == []
