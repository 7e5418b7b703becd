"""Checkpointing of a training run: resuming from checkpoint_last.pt, and writing the last, best and
kept step checkpoints (a mixin of `Trainer`, which owns the model, optimizer, schedule and state).

The mixin does not import the trainer: it declares, as class annotations, the few attributes it uses
of the run it is mixed into, so the dependency goes one way (trainer → checkpointing) and a type
checker still sees every name.

Order matters for kills: a step checkpoint and checkpoint_best.pt are written before
checkpoint_last.pt, so a kill in between is redone on resume. No checkpoint ever holds non-finite
weights: a diverged run stops before writing one.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from mtkit import checkpoint as files
from mtkit.checkpoint import capture_rng_state, load_checkpoint, restore_rng_state, save_checkpoint
from mtkit.config.experiment import from_dict, to_dict
from mtkit.errors import CheckpointError, MtkitError
from mtkit.textio import warn
from mtkit.train.distributed import broadcast_object
from mtkit.train.runtime import plain_optimizer_state
from mtkit.train.state import TrainState

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Callable

    from mtkit.config.experiment import Config, TrainingConfig
    from mtkit.data.meta import DataMeta
    from mtkit.device import DistInfo
    from mtkit.train.ema import WeightAverage
    from mtkit.train.schedules import LRSchedule


class Checkpointing:
    """Resume and checkpoint methods of `Trainer` (see the module docstring).

    What they use of the run, set by the class this is mixed into (`Trainer.__init__`):"""

    cfg: Config
    tc: TrainingConfig  # cfg.training
    info: DistInfo
    model_dir: Path
    meta: DataMeta
    model: nn.Module
    optimizer: torch.optim.Optimizer
    schedule: LRSchedule
    ema: WeightAverage | None  # the weight average (training.ema_decay), on rank 0
    scaler: torch.amp.GradScaler | None
    state: TrainState
    elapsed_before: float  # training seconds of earlier processes
    _elapsed: Callable[[], float]  # training seconds so far, this process's included

    def _maybe_resume(self, resume: bool | None) -> int | None:
        last = self.model_dir / files.LAST
        if resume is None:  # rank 0 decides, so that no rank resumes while another starts afresh
            resume = bool(broadcast_object(last.is_file(), self.info))
        if not resume:
            if self.info.is_main and last.is_file():
                warn(f"{self.model_dir} holds checkpoints of an earlier run: starting afresh "
                     "(--no-resume) and removing them")
                files.remove_checkpoints(self.model_dir)
            return None
        if not last.is_file():
            raise CheckpointError(f"--resume: no {files.LAST} in {self.model_dir}")
        self._load_state(load_checkpoint(last, map_location="cpu"), last)
        st = self.state
        if self.info.is_main:  # step files newer than the checkpoint came from the interrupted run
            files.remove_checkpoints(self.model_dir, newer_than=st.step)
            print(f"resuming from {last} at update {st.step} (epoch {st.epoch}, batch {st.batch})",
                  file=sys.stderr, flush=True)
        return st.step

    def _load_state(self, state: dict[str, Any], path: Path) -> None:
        for key in ("optimizer", "scheduler", "train_state", "rng"):
            if key not in state:
                raise CheckpointError(f"{path}: holds no training state ({key} missing); cannot resume")
        if from_dict(state["config"], stored=True).model != self.cfg.model:
            raise CheckpointError(f"{path}: was trained with a different model section of the config; "
                                  "restore it or train into a new model_dir")
        try:
            self.model.load_state_dict(state["model"])
            flags = [{k: g[k] for k in ("fused", "foreach", "capturable") if k in g}
                     for g in self.optimizer.param_groups]
            self.optimizer.load_state_dict(state["optimizer"])
            for group, own in zip(self.optimizer.param_groups, flags, strict=True):
                group.update(own)  # this run's kernels, not the checkpoint's
        except (RuntimeError, KeyError, ValueError) as exc:
            reason = str(exc).splitlines()[0][:200]
            raise CheckpointError(f"{path}: does not fit this model ({reason})") from None
        self.schedule.load_state_dict(state["scheduler"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        if self.ema is not None:
            if state.get("ema"):
                self.ema.load_state_dict(state["ema"], str(path))
            else:  # switched on since the checkpoint: the average starts from the weights resumed
                warn(f"{path}: holds no weight average (training.ema_decay was off): starting it now")
                self.ema = type(self.ema)(self.model, self.ema.decay)
        st = TrainState.from_dict(state["train_state"], str(path))
        if (st.max_tokens, st.seed) != (self.tc.max_tokens, self.tc.seed):
            warn("training.max_tokens or training.seed changed since the checkpoint: the epoch's batches "
                 "differ, so the rest of this epoch does not continue the old order exactly")
        if st.world_size != self.info.world_size:  # same global position, counted in this world's batches
            st.batch = st.batch * st.world_size // self.info.world_size
        st.world_size, st.max_tokens, st.seed = self.info.world_size, self.tc.max_tokens, self.tc.seed
        self.state = st
        self.elapsed_before = st.elapsed
        restore_rng_state(state["rng"])

    # ------------------------------------------------------------------------------ checkpoints
    def _model_state(self, valid: dict[str, Any] | None, averaged: bool = False) -> dict[str, Any]:
        """A model checkpoint: the trained weights, or with `averaged` the weight average."""
        averaging = averaged and self.ema is not None
        weights = self.ema.model_state(self.model) if averaging else self.model.state_dict()  # type: ignore[union-attr]
        return {"model": weights, "config": to_dict(self.cfg), "vocab": self.meta.to_dict(),
                "step": self.state.step, "epoch": self.state.epoch, "metrics": {"valid": valid}}

    def _check_finite_weights(self) -> None:
        """No checkpoint may hold non-finite weights: stop before writing one (the last good
        checkpoint stays, and resuming from it stays possible)."""
        for name, tensor in self.model.state_dict().items():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise MtkitError(
                    f"training diverged: parameter {name} is not finite at update {self.state.step}; "
                    f"no checkpoint was written (the last good one is kept). Lower training.lr or raise "
                    f"training.warmup_steps, then resume or start afresh")
        if self.ema is not None and not self.ema.all_finite():
            raise MtkitError(f"training diverged: the weight average is not finite at update "
                             f"{self.state.step}; no checkpoint was written (the last good one is kept)")

    def _save_last(self) -> None:
        if not self.info.is_main:
            return
        self._check_finite_weights()
        self.state.elapsed = self._elapsed()
        state = self._model_state(self.state.last_valid)
        state.update({
            "optimizer": plain_optimizer_state(self.optimizer),
            "scheduler": self.schedule.state_dict(),
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "rng": capture_rng_state(),
            "ema": self.ema.state_dict() if self.ema is not None else None,
            "train_state": self.state.to_dict(),
        })
        save_checkpoint(state, self.model_dir / files.LAST)

    def _keep_checkpoints(self, valid: dict[str, Any]) -> None:
        """checkpoint_step{N}.pt when it ranks among the best k or the last N; the best; the last."""
        self._check_finite_weights()
        st = self.state
        score = valid["score"] if valid["score"] is None or math.isfinite(valid["score"]) else None
        st.history.append({"step": st.step, "score": score})
        keep = files.steps_to_keep(st.history, valid["metric"], self.tc.keep_best, self.tc.keep_last)
        step_file = files.step_path(self.model_dir, st.step)
        if st.step in keep:
            save_checkpoint(self._model_state(valid, averaged=valid.get("weights") == "ema"), step_file)
        for h in st.history:
            if h["step"] not in keep:
                files.step_path(self.model_dir, h["step"]).unlink(missing_ok=True)
        st.history = [h for h in st.history if h["step"] in keep]
        unscored = st.best is None and score is None  # no dev set: the latest is the best there is
        if (unscored or (st.best is not None and st.best.step == st.step)) and step_file.is_file():
            files.copy_atomically(step_file, self.model_dir / files.BEST)
        self._save_last()  # last, so that a kill in between is redone on resume
