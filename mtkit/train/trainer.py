"""`mtkit train`: the training loop.

One update = ``update_freq`` token-budget batches: forward under autocast, label-smoothed loss summed
over target tokens, backward; then the gradients are divided by the number of target tokens of the
whole update (all batches, all ranks), clipped, and the fused Adam step is taken — skipped on device
when the gradient is not finite. Nothing is read back from the accelerator per update: loss sums
and the non-finite counters stay tensors until the next log line.

The position in the data is (epoch, index of the next batch); together with the model, optimizer,
schedule, RNG states and validation history it goes into ``checkpoint_last.pt``, so a resumed run
continues exactly where the last checkpoint was taken. Dropout is also reseeded from
(seed, rank, update) before every update, so the masks never depend on what ran before.
A fine-tune (training.init_from, see `mtkit.train.init_from`) is such a run that starts from a parent's
weights: its checkpoint_last.pt is written at once, so from there on it resumes like any other.
"""

from __future__ import annotations

import contextlib
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from mtkit import checkpoint as files
from mtkit.bpe import Bpe
from mtkit.config import Config
from mtkit.data.batching import Batch, TokenBatchSampler, collate, sampler_for
from mtkit.data.shards import ParallelData
from mtkit.device import autocast, autocast_dtype, resolve_device, thread_count, threads
from mtkit.errors import DataError, MtkitError
from mtkit.metrics_log import MetricsLog
from mtkit.models import build_model
from mtkit.textio import warn
from mtkit.train import init_from
from mtkit.train.checkpointing import Checkpointing
from mtkit.train.distributed import (
    DistInfo,
    all_reduce_sum,
    broadcast_object,
    dist_info_from_env,
    init_distributed,
    shutdown_distributed,
)
from mtkit.train.loss import diversity_penalty, projected_label_smoothed_nll
from mtkit.train.model_dir import write_model_files
from mtkit.train.progress import TrainingDisplay, train_line, valid_line
from mtkit.train.runtime import make_optimizer, release_freed_memory, resident_fields
from mtkit.train.sampling import gold_probability, mix_predictions
from mtkit.train.schedules import LRSchedule
from mtkit.train.state import TrainState
from mtkit.train.validation import DevSet, build_dev_set, evaluate
from mtkit.vocab import PAD_ID

_OUT_OF_MEMORY = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)


def train(cfg: Config, resume: bool | None = None) -> None:
    """Train the model described by `cfg` (resume: True/False, or None = when a checkpoint exists).
    Rank 0 holds the model directory's lock for the whole run."""
    info = dist_info_from_env()
    device = resolve_device(cfg.training.device, info.local_rank if info.enabled else None,
                            setting="training.device=")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    model_dir = Path(cfg.training.model_dir)
    if model_dir.exists() and not model_dir.is_dir():
        raise MtkitError(f"training.model_dir {model_dir} exists and is not a directory")
    cfg, parent = init_from.resolve(cfg, resume)  # a fine-tune's mistakes surface before any write
    lock = files.locked(model_dir) if info.is_main else contextlib.nullcontext()
    with lock, threads(thread_count(cfg.training.threads, info.local_world_size)):
        init_distributed(info, device)
        try:
            Trainer(cfg, info, device, resume, parent).run()
        finally:
            shutdown_distributed()


class Trainer(Checkpointing):
    """One training run: data, model, optimizer, schedule and TrainState; ``run`` loops over updates."""

    def __init__(self, cfg: Config, info: DistInfo, device: torch.device, resume: bool | None,
                 parent: init_from.Parent | None = None):
        self.cfg, self.tc, self.info, self.device = cfg, cfg.training, info, device
        tc = self.tc
        self.model_dir = Path(tc.model_dir)
        self.threads = torch.get_num_threads()
        self.train_data = ParallelData(cfg.data.dir, "train")
        if len(self.train_data) == 0:
            raise DataError(f"{cfg.data.dir}: the training split is empty")
        self.meta = self.train_data.meta
        self.tgt_bpe = self._load_tgt_bpe()
        self.dev: DevSet | None = None  # only rank 0 validates
        if info.is_main and "dev" in self.meta.splits and self.tgt_bpe is not None:
            dev_data = ParallelData(cfg.data.dir, "dev")
            if len(dev_data):
                self.dev = build_dev_set(dev_data, cfg, self.tgt_bpe)
        if self.dev is None and info.is_main:
            warn("no dev split (or target BPE model): validation only writes checkpoints")
        torch.manual_seed(tc.seed)
        self.model = build_model(cfg.model, self.meta.src_vocab_size, self.meta.tgt_vocab_size,
                                 self.meta.joint).to(device)
        self.start_lines = [init_from.freeze(self.model, tc.freeze, cfg.model.arch)]  # before the optimizer
        self.autocast_dtype = autocast_dtype(tc.precision, device, setting="training.precision=")
        self.optimizer = make_optimizer(self.model, tc, device)
        self.fused = bool(self.optimizer.defaults.get("fused"))
        self.scaler = torch.amp.GradScaler(device.type) if self.autocast_dtype == torch.float16 else None
        model_dim = cfg.model.d_model if cfg.model.arch == "transformer" else cfg.model.hidden_size
        self.schedule = LRSchedule(tc, model_dim)
        self.sampler: TokenBatchSampler = sampler_for(self.train_data, tc.max_tokens, tc.seed, True,
                                                      info.rank, info.world_size)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.state = TrainState(world_size=info.world_size, max_tokens=tc.max_tokens, seed=tc.seed)
        self.elapsed_before = 0.0  # training seconds of earlier processes (resumed runs)
        resume_step = self._maybe_resume(resume)
        if resume_step is None and parent is not None:
            self.start_lines += init_from.start_from_parent(parent, self.model, self.optimizer, self.schedule,
                                                            self.scaler, self.state, self.meta, tc,
                                                            info.world_size)
        self.train_model: nn.Module = self.model
        if info.enabled:
            from torch.nn.parallel import DistributedDataParallel

            self.train_model = DistributedDataParallel(
                self.model, device_ids=[device.index] if device.type == "cuda" else None)
        if tc.compile:
            self.train_model = torch.compile(self.train_model, dynamic=True)
        if info.is_main:
            write_model_files(cfg, self.meta, self.model_dir)
        self.metrics = MetricsLog(self.model_dir / files.METRICS_FILE, resume_step) if info.is_main else None
        # consecutive / total skipped updates, as device tensors (read on CPU at once, else at log time)
        self.nonfinite_run = torch.zeros((), device=device)
        self.nonfinite_worst_run = torch.zeros((), device=device)
        self.nonfinite_total = torch.zeros((), device=device)
        self.started = time.monotonic()
        self.display = TrainingDisplay(info.is_main)
        self._reset_log_counters()
        if resume_step is None and parent is not None:
            self._save_last()  # started: a restart resumes this run and needs the parent no more

    # ------------------------------------------------------------------------------------ setup
    def _load_tgt_bpe(self) -> Bpe | None:
        path = Path(self.cfg.data.dir) / self.meta.tgt_bpe
        return Bpe(path) if path.is_file() else None

    # ------------------------------------------------------------------------------- validation
    def _autocast(self) -> contextlib.AbstractContextManager:
        return autocast(self.device, self.autocast_dtype)

    def _validate(self) -> bool:
        """Evaluate on dev (rank 0), keep checkpoints, update plateau/early stopping; True = stop."""
        start = time.monotonic()
        metric = self.tc.valid_metric
        result: dict[str, Any] = {}
        if self.device.type == "cpu":  # before and after: see release_freed_memory
            release_freed_memory()
        if self.info.is_main and self.dev is not None:
            assert self.tgt_bpe is not None
            result = evaluate(self.model, self.dev, self.cfg, self.device, self._autocast(), self.tgt_bpe)
        if self.device.type == "cpu":
            release_freed_memory()
        result = broadcast_object(result, self.info)  # type: ignore[assignment]
        score = result.get(f"dev_{metric}")
        valid = {"metric": metric, "score": score, **result}
        st = self.state
        stop = False
        if score is not None:
            self.schedule.observe(st.record_validation(metric, score))
            stop = self.tc.patience > 0 and st.bad_validations >= self.tc.patience
        st.validated_step = st.step
        st.last_valid = valid
        if self.info.is_main:
            assert self.metrics is not None
            memory = resident_fields()
            # the event first, the checkpoints after: a kill in between resumes from the previous
            # checkpoint, whose resume drops this event, so the log and the checkpoints always agree
            self.metrics.write({"event": "valid", "step": st.step, "epoch": st.epoch,
                                "elapsed": round(self._elapsed(), 2), **result,
                                "best_step": st.best.step if st.best else None,
                                "lr": self._lr(), **memory})
            self._keep_checkpoints(valid)
            self.display.log(valid_line(st.step, valid, st.best, metric, memory))
        self.paused += time.monotonic() - start
        return stop

    # --------------------------------------------------------------------------------- the loop
    def _elapsed(self) -> float:
        return self.elapsed_before + (time.monotonic() - self.started)

    @property
    def step(self) -> int:
        return self.state.step

    def _lr(self) -> float:
        """The LR of the current update (a fine-tune's schedule may run ahead of or behind its counter)."""
        return self.schedule(self.step + self.state.lr_offset)

    def _reset_log_counters(self) -> None:
        dev = self.device
        self.acc_loss = torch.zeros((), device=dev)
        self.acc_nll = torch.zeros((), device=dev)
        self.acc_tokens = torch.zeros((), device=dev)  # target tokens of finite updates (for the means)
        self.count_tokens = 0  # target tokens this rank trained on since the last log
        self.count_real = 0
        self.count_padded = 0
        self.log_clock = time.monotonic()
        self.paused = 0.0

    def _update(self, group: list[np.ndarray]) -> None:
        """One optimizer update over `group` (update_freq batches)."""
        tc = self.tc
        self.state.step += 1
        lr = self._lr()
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        torch.manual_seed((tc.seed * 1_000_003 + self.info.rank * 7_919 + self.step) % (2 ** 63))
        p_gold = gold_probability(tc.scheduled_sampling, self.step, tc.ss_k, tc.ss_min)
        need_attention = tc.diversity_penalty > 0
        batches: list[Batch] = [collate(self.train_data, ids) for ids in group]
        if self.device.type == "cuda":  # pinned: the copies below run asynchronously
            batches = [b.pin_memory() for b in batches]
        update_loss = torch.zeros((), device=self.device)
        update_nll = torch.zeros((), device=self.device)
        local_tokens = 0
        for i, cpu_batch in enumerate(batches):
            batch = cpu_batch.to(self.device, non_blocking=True)
            accumulating = self.info.enabled and i < len(batches) - 1 and hasattr(self.train_model, "no_sync")
            with self.train_model.no_sync() if accumulating else contextlib.nullcontext():  # type: ignore[operator]
                with self._autocast():
                    tgt_in = batch.tgt_in
                    if p_gold < 1.0:
                        tgt_in = mix_predictions(self.model, batch.src, tgt_in, p_gold)
                    features, attn = self.train_model(batch.src, tgt_in, need_attention=need_attention,
                                                      project=False)
                    # the output layer and the loss in row blocks: the [tokens, vocab] logits never exist
                    loss, nll = projected_label_smoothed_nll(features, self.model.output_proj.weight,
                                                             batch.tgt_out, tc.label_smoothing)
                if need_attention and attn is not None:
                    penalty = diversity_penalty(attn, batch.tgt_out != PAD_ID, batch.src != PAD_ID)
                    loss = loss + tc.diversity_penalty * penalty
                del features, attn
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            update_loss += loss.detach()
            update_nll += nll
            local_tokens += cpu_batch.num_tgt_tokens
            self.count_real += cpu_batch.num_src_tokens + cpu_batch.num_tgt_tokens
            self.count_padded += cpu_batch.src.numel() + cpu_batch.tgt_in.numel()
        self.count_tokens += local_tokens
        self._optimizer_step(update_loss, update_nll, local_tokens)

    def _optimizer_step(self, update_loss: torch.Tensor, update_nll: torch.Tensor, local_tokens: int) -> None:
        """Divide the summed gradients by the update's target tokens, clip, step (skip if non-finite)."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        grads = [p.grad for p in self.params if p.grad is not None]
        if self.info.enabled:  # DDP averaged the ranks' sums: scale by world_size / all tokens
            total = all_reduce_sum(torch.tensor(float(local_tokens), device=self.device), self.info)
            torch._foreach_mul_(grads, self.info.world_size / total)
        else:
            torch._foreach_mul_(grads, 1.0 / local_tokens)
        max_norm = self.tc.clip_norm if self.tc.clip_norm > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)
        bad_loss = ~torch.isfinite(update_loss)
        nonfinite = bad_loss if self.scaler is not None else (bad_loss | ~torch.isfinite(grad_norm))
        if self.scaler is not None:  # fp16: the scaler skips overflowing steps and adapts its scale
            self.scaler.step(self.optimizer)
            self.scaler.update()
        elif self.fused:  # the fused kernels skip the step on device when found_inf is set
            self.optimizer.found_inf = nonfinite.float()  # type: ignore[attr-defined]
            self.optimizer.grad_scale = None  # type: ignore[attr-defined]
            try:
                self.optimizer.step()
            finally:
                del self.optimizer.found_inf, self.optimizer.grad_scale  # type: ignore[attr-defined]
        elif not bool(nonfinite):
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.acc_loss += torch.where(nonfinite, 0.0, update_loss)
        self.acc_nll += torch.where(nonfinite, 0.0, update_nll)
        self.acc_tokens += (~nonfinite).float() * local_tokens
        self.nonfinite_run = (self.nonfinite_run + 1) * nonfinite.float()
        self.nonfinite_worst_run = torch.maximum(self.nonfinite_worst_run, self.nonfinite_run)
        self.nonfinite_total += nonfinite.float()
        if self.device.type == "cpu":  # reading a CPU tensor costs no device sync: check at once
            self._check_nonfinite()

    def _check_nonfinite(self) -> None:
        total, worst = int(self.nonfinite_total), int(self.nonfinite_worst_run)
        if total == 0:
            return
        if self.info.is_main:
            warn(f"update {self.step}: skipped {total} update(s) with a non-finite loss or gradient")
        self.nonfinite_total.zero_()
        self.nonfinite_worst_run.copy_(self.nonfinite_run)
        if worst >= self.tc.max_nonfinite:
            raise MtkitError(
                f"training diverged: {worst} consecutive updates had a non-finite loss (up to update "
                f"{self.step}); lower training.lr, raise training.warmup_steps or use precision fp32/bf16")

    def _log(self) -> None:
        self._check_nonfinite()
        stats = torch.stack([self.acc_loss, self.acc_nll, self.acc_tokens]).double()
        counts = torch.tensor([self.count_tokens, self.count_real, self.count_padded], dtype=torch.float64,
                              device=self.device)
        stats = all_reduce_sum(torch.cat([stats, counts]), self.info).tolist()
        loss_sum, nll_sum, ok_tokens, tokens, real, padded = stats
        seconds = max(1e-9, time.monotonic() - self.log_clock - self.paused)
        nll = nll_sum / ok_tokens if ok_tokens else float("nan")
        event = {
            "event": "train", "step": self.step, "epoch": self.state.epoch,
            "loss": loss_sum / ok_tokens if ok_tokens else float("nan"), "nll": nll,
            "ppl": math.exp(min(nll, 100.0)) if ok_tokens else None, "lr": self._lr(),
            "tokens_per_s": tokens / seconds, "padding": 1.0 - real / padded if padded else 0.0,
            "elapsed": round(self._elapsed(), 2),
        }
        event.update(resident_fields())
        if self.info.is_main:
            assert self.metrics is not None
            self.metrics.write(event)
            stats = f"loss {event['loss']:.3f} | lr {event['lr']:.2e} | {event['tokens_per_s']:,.0f} tok/s"
            self.display.advance(self.step, self._elapsed(), stats)
            self.display.log(train_line(event))
        self._reset_log_counters()

    def _total_updates(self) -> int | None:
        tc = self.tc
        if tc.max_steps:
            return tc.max_steps
        if tc.max_epochs:
            return math.ceil(len(self.sampler) / tc.update_freq) * tc.max_epochs
        return None

    def _time_is_up(self) -> bool:
        if not self.tc.max_time:
            return False
        if self.info.enabled and self.step % self.tc.log_every:
            return False  # ranks must agree: under DDP the clock is read (and broadcast) at log steps
        return bool(broadcast_object(self._elapsed() >= self.tc.max_time * 60, self.info))

    def run(self) -> None:
        tc = self.tc
        self.started = time.monotonic()
        st = self.state
        self.display.start(self._total_updates(), st.step, tc.max_time * 60, self.elapsed_before)
        self._announce()
        self._reset_log_counters()
        self.model.train()
        stop_reason: str | None = None
        try:
            if tc.max_steps and st.step >= tc.max_steps:
                stop_reason = f"max_steps {tc.max_steps} already reached"
            elif tc.max_epochs and st.epoch > tc.max_epochs:
                stop_reason = f"max_epochs {tc.max_epochs} already reached"
            while stop_reason is None:
                batches = self.sampler.epoch_batches(st.epoch)
                group = batches[st.batch:st.batch + tc.update_freq]
                try:
                    self._update(group)
                except _OUT_OF_MEMORY:
                    raise MtkitError(
                        f"out of memory on {self.device} at update {self.step} with training.max_tokens="
                        f"{tc.max_tokens}: lower max_tokens (and raise update_freq to keep the batch size)"
                    ) from None
                st.batch += len(group)
                epoch_done = st.batch >= len(batches)
                if epoch_done:
                    st.epoch += 1
                    st.batch = 0
                stop_reason = self._after_update(epoch_done)
        finally:
            self.display.close()
        if self.info.is_main:
            best = st.best
            summary = f"; best {tc.valid_metric} {best.score:.3f} at update {best.step}" if best else ""
            self.display.log(f"done: {stop_reason} (update {st.step}, epoch {st.epoch}){summary}")

    def _after_update(self, epoch_done: bool) -> str | None:
        tc = self.tc
        step = self.step
        if step % tc.log_every == 0:
            self._log()
        else:
            self.display.advance(step, self._elapsed())
        early_stop = False
        if step % tc.validate_every == 0:
            early_stop = self._validate()
        elif tc.save_every and step % tc.save_every == 0:
            self._save_last()
        reason = None
        if early_stop:
            reason = f"early stopping: no improvement in {tc.patience} validations"
        elif tc.max_steps and step >= tc.max_steps:
            reason = f"reached max_steps {tc.max_steps}"
        elif tc.max_epochs and epoch_done and self.state.epoch > tc.max_epochs:
            reason = f"reached max_epochs {tc.max_epochs}"
        elif self._time_is_up():
            reason = f"reached max_time {tc.max_time} min"
        if reason is not None and self.state.validated_step != step:
            self._validate()
        return reason

    def _announce(self) -> None:
        if not self.info.is_main:
            return
        precision = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.autocast_dtype]
        optimizer = f"{'fused ' if self.fused else ''}{self.tc.optimizer}"
        self.display.log(
            f"{self.cfg.model.arch}: {self.model.num_parameters():,} parameters | device {self.device} "
            f"x{self.info.world_size} | {precision} | {self.threads} threads | {optimizer}")
        dev_pairs = len(self.dev.data) if self.dev else 0
        self.display.log(
            f"train: {len(self.train_data):,} pairs, {len(self.sampler):,} batches/epoch per rank "
            f"(max_tokens {self.tc.max_tokens}, update_freq {self.tc.update_freq}), padding "
            f"{100 * self.sampler.padding_fraction(self.state.epoch):.1f}% | dev: {dev_pairs:,} pairs")
        for line in filter(None, self.start_lines):
            self.display.log(line)
