"""Fine-tuning: a new run that starts from a trained model (``training.init_from``).

What carries over is explicit: by default the weights only, with a fresh optimizer, LR schedule (from
its warm-up), update counter, data position and validation history; ``training.init_keep`` (``mtkit
train --keep``) adds the optimizer, the schedule and/or the step counter. Three moments:

1. ``resolve`` runs before anything is written: it loads the parent checkpoint, takes its architecture
   (the new config may change only the dropouts; another model key set to something else is an error
   naming the key), checks the data directory's vocabulary against the parent's, fills in the
   fine-tuning defaults (LR, warm-up) and records the parent (checkpoint path and SHA-256) in the
   resolved config. A mismatch is one error line, and no model directory is made.
2. ``start_from_parent`` runs in the new Trainer when it starts afresh: it copies the weights and what
   init_keep names, and returns the lines that say what carried over and what starts fresh.
3. The trainer then writes checkpoint_last.pt at once, so the run is an ordinary one from there: a
   restart resumes it and never reads the parent again (``resolve`` takes the parent's architecture
   from the run's own config.yaml).

``freeze`` (training.freeze) takes parameter groups out of training; the optimizer never sees them.
"""

from __future__ import annotations

import dataclasses
import filecmp
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from mtkit import checkpoint as files
from mtkit.config.experiment import BpeConfig, Config, ModelConfig, TrainingConfig, from_dict
from mtkit.data.meta import DataMeta, read_meta
from mtkit.errors import CheckpointError, ConfigError, DataError
from mtkit.textio import warn
from mtkit.train.model_dir import recorded_config
from mtkit.train.schedules import LRSchedule
from mtkit.train.state import TrainState

#: model keys a fine-tune may change: regularisation, not architecture
MAY_DIFFER = ("dropout", "attention_dropout", "activation_dropout")
#: fine-tuning defaults, for the keys a config leaves at their general defaults (docs/finetune.md)
FINETUNE_WARMUP = 100
FINETUNE_LR_FACTOR = 0.25  # × the parent's training.lr, when the schedule kind is the parent's
#: training.freeze groups → the model's submodules (both families; absent ones are skipped)
FREEZE_GROUPS = {
    "embeddings": ("src_embed", "tgt_embed", "positions", "src_positions"),
    "encoder": ("encoder_layers", "encoder_norm", "encoder"),
    "decoder": ("decoder_layers", "decoder_norm", "decoder_rnn", "attentional", "scorer", "bridge"),
    "output": ("output_proj",),
}
_STATE_OF = {"optimizer": "optimizer", "schedule": "scheduler", "step": "step"}  # init_keep → checkpoint key
_DEVICE_FLAGS = ("fused", "foreach", "capturable", "differentiable")  # this run's, not the parent's


@dataclass
class Parent:
    """The checkpoint a fine-tune starts from, loaded once by ``resolve``."""

    path: Path
    sha256: str
    state: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # fine-tuning defaults that were applied


# ---------------------------------------------------------------------------------------- resolve
def resolve(cfg: Config, resume: bool | None) -> tuple[Config, Parent | None]:
    """The config the run trains with, and the parent to start from (None: no init_from, or a run that
    has started already and resumes). Raises before anything is written when the config or the data
    contradicts the parent."""
    tc = cfg.training
    if not tc.init_from:
        if tc.init_keep:
            raise ConfigError("training.init_keep is set but training.init_from is not: name the parent "
                              "model whose optimizer, schedule or step to keep")
        return cfg, None
    model_dir, given = Path(tc.model_dir), Path(tc.init_from)
    if model_dir.resolve() in (given.resolve(), given.resolve().parent if given.is_file() else None):
        raise ConfigError(f"training.init_from {given} is in training.model_dir itself: fine-tune into a new "
                          "model directory")
    if resume is not False and (model_dir / files.LAST).is_file():
        return _started_run(cfg, model_dir), None
    path = _parent_checkpoint(given, bool(tc.init_keep))
    sha = file_sha256(path)
    if tc.init_from_sha256 and tc.init_from_sha256 != sha:
        raise ConfigError(f"training.init_from_sha256: {path} has SHA-256 {sha}, not {tc.init_from_sha256}")
    state = files.load_checkpoint(path)
    parent_cfg = from_dict(state["config"], stored=True)
    model = merged_model(cfg.model, parent_cfg.model, path)
    for member in tc.init_keep:
        if state.get(_STATE_OF[member]) is None:
            raise ConfigError(f"training.init_keep: {path} holds no {member} state (only a "
                              "checkpoint_last.pt does): give the parent's model directory or its "
                              "checkpoint_last.pt")
    parent_meta = DataMeta.from_dict(state.get("vocab"), f"{path} (vocab)")
    _check_vocab_size_key(cfg.bpe, parent_meta, path)
    check_vocabulary(Path(cfg.data.dir), parent_meta, path, tc.init_from)
    training, notes = _finetune_defaults(tc, parent_cfg.training)
    training = dataclasses.replace(training, init_from=str(path.resolve()), init_from_sha256=sha)
    return dataclasses.replace(cfg, model=model, training=training), Parent(path, sha, state, notes)


def _parent_checkpoint(given: Path, keep: bool) -> Path:
    """A checkpoint file as given, or the model directory's best (last when init_keep needs its state)."""
    if given.is_file():
        return given
    if not given.is_dir():
        raise ConfigError(f"training.init_from: {given} not found (expected a model directory or a "
                          "checkpoint file)")
    name = files.LAST if keep else files.BEST
    if (given / name).is_file():
        return given / name
    if not keep and (given / files.LAST).is_file():
        warn(f"{given}: no {files.BEST}, fine-tuning from {files.LAST}")
        return given / files.LAST
    why = " (init_keep needs the parent's training state, which only that file holds)" if keep else ""
    raise ConfigError(f"training.init_from: {given} holds no {name}{why}")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def merged_model(new: ModelConfig, parent: ModelConfig, where: Path) -> ModelConfig:
    """The parent's model section with the new dropouts. The YAML loader fills in defaults, so a key
    that differs from the parent and from its default is one the user set: that contradicts the
    parent and is refused by name."""
    defaults = ModelConfig()
    for f in dataclasses.fields(ModelConfig):
        mine, theirs = getattr(new, f.name), getattr(parent, f.name)
        if f.name not in MAY_DIFFER and mine != theirs and mine != getattr(defaults, f.name):
            raise ConfigError(
                f"model.{f.name}: {mine!r} contradicts the parent {where} ({theirs!r}); a fine-tune takes "
                f"its architecture from the parent: drop model.{f.name} from the config (only "
                f"{', '.join('model.' + k for k in MAY_DIFFER)} may change)")
    return dataclasses.replace(parent, **{k: getattr(new, k) for k in MAY_DIFFER})


def _check_vocab_size_key(bpe: BpeConfig, parent: DataMeta, where: Path) -> None:
    size = bpe.vocab_size
    if size != BpeConfig().vocab_size and size not in (parent.src_vocab_size, parent.tgt_vocab_size):
        raise ConfigError(f"bpe.vocab_size: {size} contradicts the parent {where} ({parent.tgt_vocab_size}); "
                          "a fine-tune keeps its parent's vocabulary: drop bpe.vocab_size and prepare the "
                          "data with bpe.model_from")


def _describe(meta: DataMeta) -> str:
    if meta.joint:
        return f"joint, {meta.src_vocab_size} tokens"
    return f"{meta.src_vocab_size} source / {meta.tgt_vocab_size} target tokens"


def check_vocabulary(data_dir: Path, parent: DataMeta, where: Path, given: str) -> None:
    """The data must be encoded with the parent's own BPE model(s): same sizes and the same files."""
    how = f"encode it with the parent's BPE model: set bpe.model_from: {given} and run `mtkit prepare CONFIG`"
    meta = read_meta(data_dir)
    if not meta.same_vocabulary(parent):
        raise DataError(f"data.dir {data_dir} has another vocabulary ({_describe(meta)}) than the parent "
                        f"{where} ({_describe(parent)}): {how}")
    for mine, theirs in zip(meta.bpe_files(), parent.bpe_files(), strict=False):
        a, b = data_dir / mine, where.parent / theirs
        if not b.is_file():
            warn(f"{b} not found: the BPE models of the data and of the parent cannot be compared (their "
                 "sizes agree)")
        elif a.is_file() and not filecmp.cmp(a, b, shallow=False):
            raise DataError(f"data.dir {data_dir}: its BPE model {a.name} is not the parent's {b} (same "
                            f"size, other pieces): {how}")


def _finetune_defaults(tc: TrainingConfig, parent: TrainingConfig) -> tuple[TrainingConfig, list[str]]:
    """A short warm-up and a quarter of the parent's LR, for the keys the config leaves at their general
    defaults (which suit training from scratch); not when the parent's schedule is kept."""
    if "schedule" in tc.init_keep:
        return tc, []
    general = TrainingConfig()
    changes: dict[str, Any] = {}
    if tc.warmup_steps == general.warmup_steps:
        changes["warmup_steps"] = FINETUNE_WARMUP
    if tc.lr == general.lr and tc.schedule == parent.schedule:
        changes["lr"] = parent.lr * FINETUNE_LR_FACTOR
    if not changes:
        return tc, []
    note = "fine-tuning defaults: " + ", ".join(f"training.{k} {v:g}" for k, v in changes.items())
    if "lr" in changes:
        note += f" ({FINETUNE_LR_FACTOR:g} × the parent's lr {parent.lr:g})"
    return dataclasses.replace(tc, **changes), [note + "; set them in the config to choose others"]


def _started_run(cfg: Config, model_dir: Path) -> Config:
    """A fine-tune that has begun resumes like any run: the parent's architecture and the defaults it
    started with come from the run's own resolved config, so the parent is not needed any more."""
    recorded = recorded_config(model_dir)
    rt = recorded.training
    if not rt.init_from:
        raise ConfigError(f"training.init_from: {model_dir} holds a run that did not start from a parent (it "
                          "applies only when a run starts): train into a new training.model_dir, or start "
                          "this one again with --no-resume")
    given = Path(cfg.training.init_from)
    now = given if given.is_file() else given / (files.LAST if cfg.training.init_keep else files.BEST)
    if now.is_file() and now.resolve() != Path(rt.init_from).resolve():
        warn(f"{model_dir} started from {rt.init_from}: training.init_from {given} is ignored while it "
             "resumes (--no-resume starts it again from the new parent)")
    general = TrainingConfig()
    kept = {k: getattr(rt, k) for k in ("lr", "warmup_steps")
            if getattr(cfg.training, k) == getattr(general, k)}
    training = dataclasses.replace(cfg.training, init_from=rt.init_from,
                                   init_from_sha256=rt.init_from_sha256, **kept)
    return dataclasses.replace(cfg, model=merged_model(cfg.model, recorded.model, Path(rt.init_from)),
                               training=training)


# ------------------------------------------------------------------------------------------ start
def start_from_parent(parent: Parent, model: nn.Module, optimizer: torch.optim.Optimizer,
                      schedule: LRSchedule, scaler: Any, state: TrainState, meta: DataMeta,
                      tc: TrainingConfig, world_size: int) -> list[str]:
    """Copy the parent's weights, and what init_keep names, into a freshly built run. Returns the
    lines to print: what carried over and what starts fresh."""
    saved, keep = parent.state, set(tc.init_keep)
    try:
        model.load_state_dict(saved["model"])
    except (RuntimeError, KeyError) as exc:
        raise CheckpointError(f"{parent.path}: its weights do not fit this model "
                              f"({str(exc).splitlines()[0][:200]})") from None
    parent_step = int(saved.get("step") or 0)
    kept, fresh = ["weights"], []
    if "optimizer" in keep:
        _load_optimizer(optimizer, saved["optimizer"], tc, parent.path)
        if scaler is not None and saved.get("scaler"):
            scaler.load_state_dict(saved["scaler"])
        kept.append("optimizer state")
    else:
        fresh.append("optimizer state")
    if "schedule" in keep:
        schedule.load_state_dict(saved["scheduler"])
        kept.append(f"LR schedule (from update {parent_step})")
    else:
        fresh.append("LR schedule (from its warm-up)" if tc.warmup_steps else "LR schedule")
    if "step" in keep:
        state.step = parent_step
        kept.append(f"step counter ({parent_step})")
        position = _data_position(saved, meta, tc, world_size)
        if position is not None:
            state.epoch, state.batch = position
            kept.append(f"data position (epoch {state.epoch}, batch {state.batch}: the parent's own data)")
        else:
            fresh.append("data position (not the parent's training data or batching)")
    else:
        fresh += ["step counter", "data position"]
    fresh.append("validation history")
    state.lr_offset = (parent_step if "schedule" in keep else 0) - (parent_step if "step" in keep else 0)
    parent.state = {}  # the run owns its copies now: let the parent's tensors go
    return [f"fine-tuning from {parent.path} (update {parent_step}, sha256 {parent.sha256[:16]}…)",
            "  carried over: " + ", ".join(kept), "  fresh: " + ", ".join(fresh),
            *(f"  {note}" for note in parent.notes)]


def _data_position(saved: dict[str, Any], meta: DataMeta, tc: TrainingConfig,
                   world_size: int) -> tuple[int, int] | None:
    """The parent's (epoch, batch) when this run trains on the same prepared data with the same
    batching, so that keeping everything continues exactly like resuming the parent."""
    ts, vocab = saved.get("train_state"), saved.get("vocab") or {}
    if not isinstance(ts, dict) or not meta.fingerprint or vocab.get("fingerprint") != meta.fingerprint:
        return None
    if (ts.get("max_tokens"), ts.get("seed")) != (tc.max_tokens, tc.seed):
        return None
    return int(ts["epoch"]), int(ts["batch"]) * int(ts.get("world_size") or 1) // world_size


def _load_optimizer(optimizer: torch.optim.Optimizer, saved: dict[str, Any], tc: TrainingConfig,
                    where: Path) -> None:
    """The parent's Adam moments, with this config's hyperparameters and this device's kernel flags."""
    mine = [p for g in optimizer.param_groups for p in g["params"]]
    theirs = [i for g in saved.get("param_groups", []) for i in g["params"]]
    fits = len(mine) == len(theirs) and all((saved["state"].get(i) or {}).get("exp_avg", p).shape == p.shape
                                            for i, p in zip(theirs, mine, strict=True))
    if not fits:
        raise CheckpointError(f"training.init_keep optimizer: the optimizer state of {where} covers other "
                              "parameters than this run trains (training.freeze differs from the parent's?): "
                              "drop optimizer from init_keep")
    flags = [{k: g[k] for k in _DEVICE_FLAGS if k in g} for g in optimizer.param_groups]
    optimizer.load_state_dict(saved)
    for group, own in zip(optimizer.param_groups, flags, strict=True):
        group.update(own)
        group.update(betas=(tc.betas[0], tc.betas[1]), eps=tc.eps, weight_decay=tc.weight_decay)


# ----------------------------------------------------------------------------------------- freeze
def freeze(model: nn.Module, groups: list[str], arch: str) -> str:
    """Stop training the named parameter groups (before the optimizer is built); returns a line for
    the log, or "" when nothing is frozen. A tensor shared by two groups (tied embeddings) is one
    tensor: freezing either group freezes it."""
    if not groups:
        return ""

    def params_of(group: str) -> dict[int, nn.Parameter]:
        found: dict[int, nn.Parameter] = {}
        for name in FREEZE_GROUPS[group]:
            module = getattr(model, name, None)
            if isinstance(module, nn.Module):
                found.update((id(p), p) for p in module.parameters())
        return found

    embeddings = params_of("embeddings")
    frozen: dict[int, nn.Parameter] = {}
    for group in groups:
        found = params_of(group)
        if group in ("encoder", "decoder"):  # an RNN encoder holds the source embedding: not its own
            found = {k: p for k, p in found.items() if k not in embeddings}
        if not found:
            raise ConfigError(f"training.freeze: this {arch} model has no {group} parameters")
        frozen.update(found)
    every = list(model.parameters())
    if len(frozen) == len(every):
        raise ConfigError(f"training.freeze: {', '.join(groups)} is the whole model: nothing would be "
                          "trained")
    for p in frozen.values():
        p.requires_grad_(False)
    count, total = sum(p.numel() for p in frozen.values()), sum(p.numel() for p in every)
    return f"frozen: {', '.join(groups)} ({count:,} of {total:,} parameters)"
