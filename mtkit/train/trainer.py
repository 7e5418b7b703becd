"""`mtkit train`: the training loop.

One update = ``update_freq`` token-budget batches, run by `mtkit.train.update.Updater` (forward,
loss, backward, the divided, clipped, fused Adam step; on a GPU optionally as CUDA graphs, see
`mtkit.train.graphs`; minimum risk training: `mtkit.train.mrt`). Nothing is read back from the
accelerator per update: loss sums and the non-finite counters stay tensors until the next log line.
On a GPU the next batches are collated and pinned on a background thread (`mtkit.data.prefetch`)
while the current update runs.

The position in the data is (epoch, index of the next batch); together with the model, optimizer,
schedule, RNG states and validation history it goes into ``checkpoint_last.pt``, so a resumed run
continues exactly where the last checkpoint was taken. Dropout is also reseeded from
(seed, rank, update) before every update, so the masks never depend on what ran before.
A fine-tune (training.init_from, see `mtkit.train.init_from`) is such a run that starts from a parent's
weights: its checkpoint_last.pt is written at once, so from there on it resumes like any other.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from mtkit import checkpoint as files
from mtkit.config.experiment import BUDGET_SCHEDULES, Config
from mtkit.data.batching import Batch, TokenBatchSampler, collate, sampler_for
from mtkit.data.bpe import Bpe
from mtkit.data.prefetch import Prefetcher
from mtkit.data.shards import ParallelData
from mtkit.decode.loader import decoding_copy
from mtkit.device import autocast, autocast_dtype, resolve_device, thread_count, threads
from mtkit.errors import ConfigError, DataError, MtkitError
from mtkit.metric import is_better
from mtkit.metrics_log import MetricsLog
from mtkit.models import build_model
from mtkit.models.base import Seq2Seq
from mtkit.textio import warn
from mtkit.train import init_from
from mtkit.train.budget import BudgetEstimate, BudgetPlanner
from mtkit.train.checkpointing import Checkpointing
from mtkit.train.distributed import (
    DistInfo,
    all_reduce_sum,
    broadcast_object,
    dist_info_from_env,
    process_group,
)
from mtkit.train.ema import WeightAverage
from mtkit.train.flops import peak_flops, update_flops
from mtkit.train.graphs import use_cuda_graphs, use_shape_buckets
from mtkit.train.model_dir import recorded_config, write_model_files
from mtkit.train.mrt import updater_for
from mtkit.train.progress import TrainingDisplay, train_line, valid_line
from mtkit.train.runtime import learning_rate_on_device, make_optimizer, release_freed_memory, resident_fields
from mtkit.train.schedules import LRSchedule
from mtkit.train.sizing import (
    PROBE_UPDATES,
    PROBE_WARMUP,
    SizeChoice,
    apply_choice,
    check_auto,
    probe_and_choose,
    recorded_choice,
)
from mtkit.train.state import TrainState
from mtkit.train.validation import DevSet, build_dev_set, evaluate

#: a time budget's new estimate moves the plan only when it differs by more than this share of the
#: updates left (or 2 updates): the speed measured between log steps jitters by a percent or so
REPLAN_SHARE = 0.02

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
    thread_limit = threads(thread_count(cfg.training.threads, info.local_world_size))
    with lock, thread_limit, process_group(info, device):
        Trainer(cfg, info, device, resume, parent).run()


@dataclass
class UpdateWork:
    """One update's batches, collated (and pinned on a GPU), with where they sit in the epoch."""

    epoch: int
    start: int  # index of the first batch in the epoch's list
    epoch_batches: int  # batches in this epoch
    batches: list[Batch]
    flops: float | None  # model FLOPs (see mtkit.train.flops)


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
        self.autocast_dtype = autocast_dtype(tc.precision, device, "training.precision=",
                                            lstm=cfg.model.arch == "rnn" and cfg.model.rnn_type == "lstm")
        self.buckets = use_shape_buckets(tc.shape_buckets, device)
        self.sampler: TokenBatchSampler = sampler_for(self.train_data, tc.max_tokens, tc.seed, True,
                                                      info.rank, info.world_size, self.buckets)
        self.size_choice: SizeChoice | None = None
        size_line = ""
        if cfg.model.size == "auto" and not tc.init_from:  # a fine-tune has its parent's shape
            cfg, size_line = self._choose_size(cfg, resume)  # may set training.lr too
            self.cfg, self.tc = cfg, cfg.training
            tc = self.tc
        torch.manual_seed(tc.seed)
        self.model = build_model(cfg.model, self.meta.src_vocab_size, self.meta.tgt_vocab_size,
                                 self.meta.one_vocabulary()).to(device)
        self.start_lines = [init_from.freeze(self.model, tc.freeze, cfg.model.arch), size_line]
        self.graphed = use_cuda_graphs(cfg, device, info, self.buckets)
        self.optimizer = make_optimizer(self.model, tc, device, capturable=self.graphed)
        self.scaler = torch.amp.GradScaler(device.type) if self.autocast_dtype == torch.float16 else None
        model_dim = cfg.model.d_model if cfg.model.arch == "transformer" else cfg.model.hidden_size
        self.schedule = LRSchedule(tc, model_dim)
        # the weight average lives where validation runs (rank 0); made before a resume, which loads it
        self.ema = WeightAverage(self.model, tc.ema_decay) if tc.ema_decay > 0 and info.is_main else None
        self.state = TrainState(world_size=info.world_size, max_tokens=tc.max_tokens, seed=tc.seed)
        self.elapsed_before = 0.0  # training seconds of earlier processes (resumed runs)
        resume_step = self._maybe_resume(resume)
        if resume_step is None and parent is not None:
            self.start_lines += init_from.start_from_parent(parent, self.model, self.optimizer, self.schedule,
                                                            self.scaler, self.state, self.meta, tc,
                                                            info.world_size)
            if self.ema is not None:  # the average starts from the parent's weights
                self.ema = WeightAverage(self.model, tc.ema_decay)
        self.train_model: nn.Module = self.model
        if info.enabled:
            from torch.nn.parallel import DistributedDataParallel

            self.train_model = DistributedDataParallel(
                self.model, device_ids=[device.index] if device.type == "cuda" else None)
        if tc.compile:
            self.train_model = torch.compile(self.train_model, dynamic=True)
        self.prefetch = device.type == "cuda"
        gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else None  # MFU: FLOPs are CE's
        self.peak_flops = None if tc.objective == "mrt" else peak_flops(gpu, self.autocast_dtype is not None)
        if self.graphed:
            learning_rate_on_device(self.optimizer, device)
        self.updater = updater_for(cfg, self.tgt_bpe, self.model, self.train_model, self.optimizer,
                                   self.scaler, info, device, self.autocast_dtype, self.graphed)
        self.run_totals = [0.0, 0.0, 0.0]  # target tokens, model FLOPs, training seconds of this process
        if info.is_main:
            write_model_files(cfg, self.meta, self.model_dir)
        self.metrics = MetricsLog(self.model_dir / files.METRICS_FILE, resume_step) if info.is_main else None
        if self.metrics is not None and self.size_choice is not None:
            self.metrics.write(self.size_choice.record())
        self.started = time.monotonic()
        self.display = TrainingDisplay(info.is_main)
        self._reset_log_counters()
        self.planner = self._budget_planner()
        if resume_step is None and parent is not None:
            self._save_last()  # started: a restart resumes this run and needs the parent no more

    # ------------------------------------------------------------------------------------ setup
    def _load_tgt_bpe(self) -> Bpe | None:
        path = Path(self.cfg.data.dir) / self.meta.tgt_bpe
        return Bpe(path) if path.is_file() else None

    # ------------------------------------------------------------------------------ model.size
    def _choose_size(self, cfg: Config, resume: bool | None) -> tuple[Config, str]:
        """``model.size: auto``: the shape this model directory records (a resumed run), else the one
        `mtkit.train.sizing` measures and chooses for the budget (rank 0 probes; every rank follows)."""
        check_auto(cfg)
        if resume is not False and (self.model_dir / files.LAST).is_file():
            cfg = recorded_choice(cfg, recorded_config(self.model_dir))
            model = cfg.model
            line = (f"model.size auto: {self.model_dir}'s shape, as chosen when the run started (d_model "
                    f"{model.d_model}, d_ff {model.d_ff}, dropout {model.dropout:g}, lr {cfg.training.lr:g})")
            return cfg, line
        choice: SizeChoice | None = None
        if self.info.is_main:
            print("model.size auto: timing a few training updates of each width ...", file=sys.stderr,
                  flush=True)
            uf = self.tc.update_freq
            epoch = self.sampler.epoch_batches(1)
            updates = [[self._collate(ids) for ids in epoch[i:i + uf]]
                       for i in range(0, min(len(epoch), uf * (PROBE_WARMUP + PROBE_UPDATES)), uf)]
            choice = probe_and_choose(cfg, self.meta, updates, self._updates_per_epoch(), self.device,
                                      self.autocast_dtype)
        choice = broadcast_object(choice, self.info)  # type: ignore[assignment]
        assert choice is not None
        resolved, kept = apply_choice(cfg, choice)
        self.size_choice = choice
        return resolved, choice.describe(kept)

    # ----------------------------------------------------------------------------------- budget
    def _budget_planner(self) -> BudgetPlanner:
        """The planner of a budget schedule's total, and the first plan where the total is known now."""
        tc = self.tc
        fixed = min((n for n in (tc.max_steps, self._epoch_updates()) if n), default=None)
        if self.schedule.budgeted and fixed is None and not tc.max_time:
            what = (f"training.schedule={tc.schedule}" if tc.schedule in BUDGET_SCHEDULES
                    else "training.cooldown_fraction")
            raise ConfigError(f"{what} decays the LR over the run's budget: set training.max_steps, "
                              "max_epochs or max_time (--max-time)")
        planner = BudgetPlanner(fixed, tc.max_time * 60, tc.validate_every)
        first = planner.initial()
        if self.schedule.budgeted and first is not None:
            decay = self.schedule.decay
            if decay is None or decay.total != first.total + self.state.lr_offset:  # new, or a new max_steps
                self._replan(first)
        return planner

    def _epoch_updates(self) -> int | None:
        """The updates max_epochs allows (None: no epoch bound)."""
        if not self.tc.max_epochs:
            return None
        return self._updates_per_epoch() * self.tc.max_epochs

    def _updates_per_epoch(self) -> int:
        return math.ceil(len(self.sampler) / self.tc.update_freq)

    def _replan(self, estimate: BudgetEstimate) -> None:
        """Move the budget schedule's decay to end at the estimated total (recorded in metrics.jsonl)."""
        offset = self.state.lr_offset
        old = self.schedule.decay
        if old is not None and estimate.seconds_per_update is not None:  # a time estimate: ignore jitter
            left = old.total - offset - self.step
            if abs(estimate.total - (old.total - offset)) < max(2, REPLAN_SHARE * left):
                return
        plan = self.schedule.plan(self.step + offset, estimate.total + offset)
        if old is not None and (old.total, old.start) == (plan.total, plan.start):
            return
        if self.info.is_main and self.metrics is not None:
            self.metrics.write({"event": "plan", "step": self.step, "planned_updates": plan.total - offset,
                                "decay_start": plan.start - offset, "elapsed": round(self._elapsed(), 2),
                                "seconds_per_update": estimate.seconds_per_update,
                                "seconds_per_validation": estimate.seconds_per_validation})
        if old is None and self.info.is_main:
            measured = "" if estimate.seconds_per_update is None else (
                f" in {self.tc.max_time:g} min at {estimate.seconds_per_update:.3f} s per update (measured "
                f"over updates {self.planner.mark[0] + 1 if self.planner.mark else 1}-{self.step})")
            start, kind = plan.start - offset, self.tc.schedule
            decay = (f"warm-up {start:,}, then {kind} decay" if kind in BUDGET_SCHEDULES
                     else f"{kind}, then from update {start + 1:,} a linear cooldown")
            self.display.log(f"budget: {plan.total - offset:,} updates{measured}; {decay} to "
                             f"{self.tc.min_lr:g}")

    def _track_budget(self) -> None:
        """After each update: time the run and re-estimate a time budget's total when it is due."""
        planner = self.planner
        if not (self.schedule.budgeted and planner.timed):
            return
        train_seconds = time.monotonic() - self.started - planner.valid_seconds  # this process's
        planner.observe(self.step, train_seconds)
        if planner.due(self.step, self.tc.log_every):
            estimate = planner.estimate(self.step, train_seconds, self._elapsed())
            estimate = broadcast_object(estimate, self.info)  # every rank follows rank 0's clock
            if estimate is not None:
                self._replan(estimate)

    # ------------------------------------------------------------------------------- validation
    def _autocast(self) -> contextlib.AbstractContextManager:
        return autocast(self.device, self.autocast_dtype)

    def _decoding(self) -> Callable[[Seq2Seq], Seq2Seq] | None:
        """What validation searches with: under ``training.precision: auto``, the model as `mtkit translate`
        decodes it with ``--precision auto`` (bf16 weights on a bf16 CPU or GPU, int8 linear layers on an
        AVX2 CPU: `decoding_copy`), which measured up to 1.5x faster per sentence than searching the
        fp32 training weights under autocast; with an explicit precision, the training weights."""
        if self.tc.precision != "auto":
            return None
        return functools.partial(decoding_copy, device=self.device)

    def _validate(self) -> bool:
        """Evaluate on dev (rank 0), keep checkpoints, update plateau/early stopping; True = stop."""
        start = time.monotonic()
        metric = self.tc.valid_metric
        result: dict[str, Any] = {}
        if self.device.type == "cpu":  # before and after: see release_freed_memory
            release_freed_memory()
        if self.info.is_main and self.dev is not None:
            assert self.tgt_bpe is not None
            result = evaluate(self.model, self.dev, self.cfg, self.device, self._autocast(), self.tgt_bpe,
                              self._decoding())
            if self.ema is not None:
                result = self._score_average(result)
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
        seconds = time.monotonic() - start
        self.paused += seconds
        self.planner.note_validation(seconds)  # kept out of the budget's seconds per update
        return stop

    def _score_average(self, trained: dict[str, Any]) -> dict[str, Any]:
        """Score the weight average too; the result is the better one's, with both scores beside it and
        ``weights`` naming which one the step's checkpoint holds."""
        assert self.ema is not None and self.dev is not None and self.tgt_bpe is not None
        with self.ema.swapped_in(self.model):
            averaged = evaluate(self.model, self.dev, self.cfg, self.device, self._autocast(), self.tgt_bpe,
                                self._decoding())
        key = f"dev_{self.tc.valid_metric}"
        ema_wins = is_better(self.tc.valid_metric, averaged.get(key), trained.get(key))
        return {**(averaged if ema_wins else trained), "weights": "ema" if ema_wins else "trained",
                f"trained_{key}": trained.get(key), f"ema_{key}": averaged.get(key)}

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
        """Zero the sums of the next log line."""
        self.updater.reset_log()
        self.count_tokens = 0  # target tokens this rank trained on since the last log
        self.count_real = 0
        self.count_padded = 0
        self.count_flops: float | None = 0.0
        self.log_clock = time.monotonic()
        self.paused = 0.0

    # ----------------------------------------------------------------------------- the batches
    def _collate(self, ids: np.ndarray) -> Batch:
        batch = collate(self.train_data, ids, self.sampler.batch_shape(ids))
        return batch.pin_memory() if self.device.type == "cuda" else batch  # pinned: copies do not wait

    def _work(self, epoch: int, start: int) -> Iterator[UpdateWork]:
        """The updates from (epoch, start) on, collated, in training order (one epoch after another)."""
        data, uf = self.train_data, self.tc.update_freq
        while True:
            batches = self.sampler.epoch_batches(epoch)
            while start < len(batches):
                group = batches[start:start + uf]
                flops = [update_flops(self.cfg.model, self.meta.tgt_vocab_size, data.src.lengths[ids],
                                      data.tgt.lengths[ids]) for ids in group]
                yield UpdateWork(epoch, start, len(batches), [self._collate(ids) for ids in group],
                                 None if None in flops else float(sum(flops)))  # type: ignore[arg-type]
                start += len(group)
            epoch, start = epoch + 1, 0

    # ----------------------------------------------------------------------------- one update
    def _update(self, batches: list[Batch]) -> None:
        """One optimizer update over `batches` (update_freq batches)."""
        self.state.step += 1
        lr = self._lr()
        for g in self.optimizer.param_groups:
            if isinstance(g["lr"], torch.Tensor):
                g["lr"].fill_(lr)  # read by the captured step at its replay
            else:
                g["lr"] = lr
        # dropout reseeded from (seed, rank, update): the masks never depend on what ran before
        torch.manual_seed((self.tc.seed * 1_000_003 + self.info.rank * 7_919 + self.step) % (2 ** 63))
        for batch in batches:
            self.count_tokens += batch.num_tgt_tokens
            self.count_real += batch.num_src_tokens + batch.num_tgt_tokens
            self.count_padded += batch.src.numel() + batch.tgt_in.numel()
        self.updater.update(batches, self.step)
        if self.ema is not None:
            self.ema.update(self.step)
        if self.updater.read_back_each_update:  # reading a CPU tensor costs no device sync: check at once
            self._check_nonfinite()

    def _check_nonfinite(self) -> None:
        self.updater.check_nonfinite(self.step, self.info.is_main)

    def _log(self) -> None:
        self._check_nonfinite()
        stats = self.updater.log_sums().double()
        counts = torch.tensor([self.count_tokens, self.count_real, self.count_padded], dtype=torch.float64,
                              device=self.device)
        stats = all_reduce_sum(torch.cat([counts, stats]), self.info).tolist()
        tokens, real, padded, loss_sum, nll_sum, ok_tokens, *extra = stats
        seconds = max(1e-9, time.monotonic() - self.log_clock - self.paused)
        nll = nll_sum / ok_tokens if ok_tokens else float("nan")
        flops = self.count_flops * self.info.world_size if self.count_flops is not None else None
        mfu = flops / seconds / self.peak_flops if flops is not None and self.peak_flops else None
        self.run_totals = [self.run_totals[0] + tokens, self.run_totals[1] + (flops or 0.0),
                           self.run_totals[2] + seconds]
        event = {
            "event": "train", "step": self.step, "epoch": self.state.epoch,
            "loss": loss_sum / ok_tokens if ok_tokens else float("nan"), "nll": nll,
            "ppl": math.exp(min(nll, 100.0)) if ok_tokens else None, "lr": self._lr(),
            "tokens_per_s": tokens / seconds, "padding": 1.0 - real / padded if padded else 0.0,
            "mfu": None if mfu is None else round(mfu, 5),
            "planned_updates": (self.schedule.decay.total - self.state.lr_offset
                                if self.schedule.decay is not None else None),
            "elapsed": round(self._elapsed(), 2),
        }
        event.update({**self.updater.log_fields(extra), **resident_fields()})
        if self.device.type == "cuda":  # what the card held at most so far (the caching allocator's view)
            event["gpu_peak_mib"] = round(torch.cuda.max_memory_allocated(self.device) / 2 ** 20)
        if self.info.is_main:
            assert self.metrics is not None
            self.metrics.write(event)
            stats = f"loss {event['loss']:.3f} | lr {event['lr']:.2e} | {event['tokens_per_s']:,.0f} tok/s"
            self.display.advance(self.step, self._elapsed(), stats)
            self.display.log(train_line(event))
        self._reset_log_counters()

    def _total_updates(self) -> int | None:
        """The progress bar's target: max_steps, else the updates of max_epochs, else none."""
        return self.tc.max_steps or self._epoch_updates()

    def _time_is_up(self) -> bool:
        if not self.tc.max_time:
            return False
        if self.info.enabled and self.step % self.tc.log_every:
            return False  # ranks must agree: under DDP the clock is read (and broadcast) at log steps
        return bool(broadcast_object(self._elapsed() >= self.tc.max_time * 60, self.info))

    def run(self) -> None:
        tc = self.tc
        # the budget counts the seconds model.size auto spent timing widths
        self.started = time.monotonic() - (self.size_choice.probe_seconds if self.size_choice else 0.0)
        st = self.state
        self.display.start(self._total_updates(), st.step, tc.max_time * 60, self.elapsed_before)
        self._announce()
        self._reset_log_counters()
        self.model.train()
        stop_reason: str | None = None
        prefetcher: Prefetcher | None = None
        try:
            if tc.max_steps and st.step >= tc.max_steps:
                stop_reason = f"max_steps {tc.max_steps} already reached"
            elif tc.max_epochs and st.epoch > tc.max_epochs:
                stop_reason = f"max_epochs {tc.max_epochs} already reached"
            work: Iterator[UpdateWork] = self._work(st.epoch, st.batch)
            if self.prefetch and stop_reason is None:  # the next updates are collated while this one runs
                work = prefetcher = Prefetcher(work, depth=max(2, 2 * tc.update_freq))
            while stop_reason is None:
                todo = next(work)
                assert (todo.epoch, todo.start) == (st.epoch, st.batch), "batches out of order"
                try:
                    self._update(todo.batches)
                except _OUT_OF_MEMORY:
                    raise MtkitError(
                        f"out of memory on {self.device} at update {self.step} with training.max_tokens="
                        f"{tc.max_tokens}: lower max_tokens (and raise update_freq to keep the batch size)"
                    ) from None
                if self.count_flops is not None:
                    self.count_flops = None if todo.flops is None else self.count_flops + todo.flops
                st.batch += len(todo.batches)
                epoch_done = st.batch >= todo.epoch_batches
                if epoch_done:
                    st.epoch += 1
                    st.batch = 0
                stop_reason = self._after_update(epoch_done)
        finally:
            if prefetcher is not None:
                prefetcher.close()
            self.updater.close()
            self.display.close()
        if self.info.is_main:
            best = st.best
            summary = f"; best {tc.valid_metric} {best.score:.3f} at update {best.step}" if best else ""
            self.display.log(f"done: {stop_reason} (update {st.step}, epoch {st.epoch}){summary}")
            if self.run_totals[2] > 0:
                self.display.log(self._speed_summary())

    def _after_update(self, epoch_done: bool) -> str | None:
        tc = self.tc
        step = self.step
        self._track_budget()
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

    def _speed_summary(self) -> str:
        """The run's mean speed (validations left out): target tokens/s and, where known, the MFU."""
        tokens, flops, seconds = self.run_totals
        line = f"speed: {tokens / seconds:,.0f} tgt tok/s over {seconds:,.1f} s of training"
        if flops and self.peak_flops:
            line += (f", model FLOP utilisation {100 * flops / seconds / self.peak_flops:.1f}% "
                     f"({flops / seconds / 1e12:,.1f} of {self.peak_flops / 1e12:,.0f} TFLOP/s)")
        graphs = self.updater.graphs
        if graphs is not None:
            line += (f"; {graphs.captured} CUDA graphs captured in {graphs.capture_seconds:.1f} s"
                     if graphs.enabled else "; CUDA graphs off after a failed capture")
        return line

    def _announce(self) -> None:
        if not self.info.is_main:
            return
        precision = {None: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}[self.autocast_dtype]
        optimizer = f"{'fused ' if self.updater.fused else ''}{self.tc.optimizer}"
        self.display.log(
            f"{self.cfg.model.arch}: {self.model.num_parameters():,} parameters | device {self.device} "
            f"x{self.info.world_size} | {precision} | {self.threads} threads | {optimizer}"
            f"{self.updater.describe()}")
        dev_pairs = len(self.dev.data) if self.dev else 0
        self.display.log(
            f"train: {len(self.train_data):,} pairs, {len(self.sampler):,} batches/epoch per rank "
            f"(max_tokens {self.tc.max_tokens}, update_freq {self.tc.update_freq}), padding "
            f"{100 * self.sampler.padding_fraction(self.state.epoch):.1f}% | dev: {dev_pairs:,} pairs")
        if self.buckets:
            shapes = len(self.sampler.shapes(self.state.epoch))
            graphs = "replayed as CUDA graphs" if self.graphed else "run eagerly"
            self.display.log(f"batches in {shapes} shapes (training.shape_buckets), updates {graphs}")
        for line in filter(None, self.start_lines):
            self.display.log(line)
