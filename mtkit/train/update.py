"""One optimizer update, computed on the device: forward and backward over the update's batches, then
the gradients divided by the update's target tokens (all batches, all ranks), clipped, and the fused
Adam step taken — skipped on the device when the loss or gradient is not finite.

Nothing is read back from the accelerator per update: the update's loss, NLL and token sums, the
sums of the next log line and the non-finite counters are device tensors, updated in place (so that
CUDA graphs, which hold their addresses, can update them too) and read at log lines. On a CPU,
where reading a tensor costs nothing, the non-finite check runs after every update instead.
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor, nn

from mtkit.config.experiment import TrainingConfig
from mtkit.data.batching import Batch
from mtkit.device import DistInfo, autocast
from mtkit.errors import MtkitError
from mtkit.models.base import Seq2Seq
from mtkit.textio import warn
from mtkit.train.distributed import all_reduce_sum
from mtkit.train.graphs import GraphedUpdate
from mtkit.train.loss import LOSS_BLOCK_ROWS, diversity_penalty, projected_label_smoothed_nll
from mtkit.train.sampling import gold_probability, mix_predictions
from mtkit.vocab import PAD_ID

#: rows of a loss block on a GPU: memory is not short there, and fewer blocks mean fewer kernels
GPU_LOSS_BLOCK_ROWS = 8192


def zero_scalar(device: torch.device) -> Tensor:
    return torch.zeros((), device=device)


class Updater:
    """Runs updates for the trainer and keeps their sums (see the module docstring)."""

    def __init__(self, model: Seq2Seq, train_model: nn.Module, optimizer: torch.optim.Optimizer,
                 scaler: torch.amp.GradScaler | None, tc: TrainingConfig, info: DistInfo,
                 device: torch.device, autocast_dtype: torch.dtype | None, graphed: bool):
        self.model, self.train_model, self.optimizer, self.scaler = model, train_model, optimizer, scaler
        self.tc, self.info, self.device, self.autocast_dtype = tc, info, device, autocast_dtype
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.fused = bool(optimizer.defaults.get("fused"))
        # on a GPU: padding weighted out rather than looked up (a read back), bigger loss blocks
        self.drop_padding = device.type == "cpu"
        self.loss_block_rows = LOSS_BLOCK_ROWS if device.type == "cpu" else GPU_LOSS_BLOCK_ROWS
        self.read_back_each_update = device.type == "cpu"
        self.update_loss, self.update_nll, self.update_tokens = (zero_scalar(device) for _ in range(3))
        self.log_loss, self.log_nll, self.log_tokens = (zero_scalar(device) for _ in range(3))
        # consecutive / worst run / total of skipped updates
        self.nonfinite_run, self.nonfinite_worst_run = zero_scalar(device), zero_scalar(device)
        self.nonfinite_total = zero_scalar(device)
        self.graphs: GraphedUpdate | None = None
        if graphed:
            self.graphs = GraphedUpdate(self._accumulate_static, self._optimizer_step, device)

    # ------------------------------------------------------------------------------- an update
    def update(self, batches: list[Batch], step: int) -> None:
        """One optimizer update over `batches` (update_freq batches), update `step` (from 1)."""
        if self.graphs is not None:
            for batch in batches:
                self.graphs.accumulate(batch)
            self.graphs.step()
            return
        tc = self.tc
        p_gold = gold_probability(tc.scheduled_sampling, step, tc.ss_k, tc.ss_min)
        need_attention = tc.diversity_penalty > 0
        local_tokens = 0
        for i, cpu_batch in enumerate(batches):
            batch = cpu_batch.to(self.device, non_blocking=True)
            accumulating = self.info.enabled and i < len(batches) - 1 and hasattr(self.train_model, "no_sync")
            with self.train_model.no_sync() if accumulating else contextlib.nullcontext():  # type: ignore[operator]
                with autocast(self.device, self.autocast_dtype):
                    tgt_in = batch.tgt_in
                    if p_gold < 1.0:
                        tgt_in = mix_predictions(self.model, batch.src, tgt_in, p_gold)
                    features, attn = self.train_model(batch.src, tgt_in, need_attention=need_attention,
                                                      project=False)
                    # the output layer and the loss in row blocks: the [tokens, vocab] logits never exist
                    loss, nll = projected_label_smoothed_nll(
                        features, self.model.output_proj.weight, batch.tgt_out, tc.label_smoothing,
                        block_rows=self.loss_block_rows, drop_padding=self.drop_padding,
                        bias=self.model.logit_bias())
                if need_attention and attn is not None:
                    penalty = diversity_penalty(attn, batch.tgt_out != PAD_ID, batch.src != PAD_ID)
                    loss = loss + tc.diversity_penalty * penalty
                del features, attn
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            self.update_loss += loss.detach()
            self.update_nll += nll
            local_tokens += cpu_batch.num_tgt_tokens
        self.update_tokens.fill_(local_tokens)
        self._optimizer_step()

    def _accumulate_static(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> None:
        """Forward, loss and backward of one batch with device tensors only (what a CUDA graph holds):
        the sums go into update_loss / update_nll / update_tokens, the gradients into ``.grad``."""
        with autocast(self.device, self.autocast_dtype, cache=False):
            features, _ = self.train_model(src, tgt_in, project=False)
            loss, nll = projected_label_smoothed_nll(
                features, self.model.output_proj.weight, tgt_out, self.tc.label_smoothing,
                block_rows=self.loss_block_rows, drop_padding=False, bias=self.model.logit_bias())
        loss.backward()
        self.update_loss += loss.detach()
        self.update_nll += nll
        self.update_tokens += (tgt_out != PAD_ID).sum()

    def _optimizer_step(self) -> None:
        """Divide the summed gradients by the update's target tokens, clip, step (skip if non-finite);
        add the update's sums to the log's and zero them for the next update."""
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        grads = [p.grad for p in self.params if p.grad is not None]
        if self.info.enabled:  # DDP averaged the ranks' sums: scale by world_size / all tokens
            total = all_reduce_sum(self.update_tokens.clone(), self.info)
            torch._foreach_mul_(grads, self.info.world_size / total)
        else:
            torch._foreach_mul_(grads, self.update_tokens.reciprocal())
        max_norm = self.tc.clip_norm if self.tc.clip_norm > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(self.params, max_norm)
        bad_loss = ~torch.isfinite(self.update_loss)
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
        # graphs add into the same .grad tensors every update: zero them rather than drop them
        self.optimizer.zero_grad(set_to_none=self.graphs is None)
        ok = (~nonfinite).float()
        self.log_loss.add_(torch.where(nonfinite, 0.0, self.update_loss))
        self.log_nll.add_(torch.where(nonfinite, 0.0, self.update_nll))
        self.log_tokens.add_(ok * self.update_tokens)
        self.nonfinite_run.add_(1.0).mul_(nonfinite.float())
        torch.maximum(self.nonfinite_worst_run, self.nonfinite_run, out=self.nonfinite_worst_run)
        self.nonfinite_total.add_(nonfinite.float())
        for total in (self.update_loss, self.update_nll, self.update_tokens):
            total.zero_()

    # ---------------------------------------------------------------------------------- the sums
    def log_sums(self) -> Tensor:
        """[loss, NLL, target tokens] summed over the finite updates since the last ``reset_log``."""
        return torch.stack([self.log_loss, self.log_nll, self.log_tokens])

    def describe(self) -> str:
        """What the first log line adds about this objective ("" for cross-entropy)."""
        return ""

    def close(self) -> None:
        """Release what the updater holds beside the model (the MRT cost workers)."""

    def reset_log(self) -> None:
        for total in (self.log_loss, self.log_nll, self.log_tokens):
            total.zero_()

    def log_fields(self, extra: list[float]) -> dict:
        """Fields of a log line from the all-reduced sums that ``log_sums`` has beyond its first three
        (none here; see `mtkit.train.mrt`)."""
        return {}

    def check_nonfinite(self, step: int, report: bool) -> None:
        """Warn about skipped updates (``report``: this rank speaks) and stop a diverged run."""
        total, worst = int(self.nonfinite_total), int(self.nonfinite_worst_run)
        if total == 0:
            return
        if report:
            warn(f"update {step}: skipped {total} update(s) with a non-finite loss or gradient")
        self.nonfinite_total.zero_()
        self.nonfinite_worst_run.copy_(self.nonfinite_run)
        if worst >= self.tc.max_nonfinite:
            raise MtkitError(
                f"training diverged: {worst} consecutive updates had a non-finite loss (up to update "
                f"{step}); lower training.lr, raise training.warmup_steps or use precision fp32/bf16")
