"""Minimum risk training (Shen et al. 2016): ``training.objective: mrt``.

Cross-entropy trains a model on the reference only, one word at a time, given the right history: it
never sees its own mistakes and is never scored as a whole sentence. An MRT update does, for each
batch of source sentences x with references y*:

1. **Candidates.** With the model in eval mode and no gradient, mtkit's own search generates
   ``mrt_candidates`` translations per source (``mrt_search``: ancestral samples at temperature 1, the
   n-best of a beam of that size, or half each); duplicates are dropped. The reference is *not* added
   as a candidate: the cross-entropy term below trains on it, with a weight of its own, and the risk
   stays about what the model itself produces. Sampling draws from a generator seeded from (seed,
   rank, update), so a resumed run draws the same candidates. The search reads its results back to
   the host (token lists): on a GPU that is the one wait per batch that MRT adds.
2. **Costs.** Each candidate y, decoded to text, is scored against the reference:
   cost(y) = 1 − sentence BLEU/100 or 1 − sentence chrF/100 (``mrt_metric``; sacrebleu, on the host;
   on a GPU machine in ``mrt_cost_workers`` processes, `mtkit.train.costs`).
3. **Risk.** All candidates are teacher-forced with gradients in train mode (dropout on) to get their
   sequence log-probabilities log P(y|x) (the sum over tokens, EOS included); each source is encoded
   once for its reference and candidates (``source_rows`` of ``Seq2Seq.forward``). Over each sentence's
   candidates S(x), Q(y|x) = P(y|x)^α / Σ_{y'∈S(x)} P(y'|x)^α (``mrt_alpha``), and the sentence's risk
   is R(x) = Σ_{y∈S(x)} Q(y|x) · cost(y). Its gradient, α Q(y|x) (cost(y) − R(x)) with respect to each
   log P(y|x), moves probability towards the candidates that cost less than the sentence's average.
4. **Loss.** loss = mean over the update's sentences of R(x) + ``mrt_ce_weight`` × (the label-smoothed
   cross-entropy of the references, per target token, exactly as with ``objective: ce``). The risk is
   normalised per sentence (exactly so on one process; under DDP each rank's sentences are weighted by
   its tokens per sentence), the cross-entropy per token; the update then goes through the same
   division, clipping and Adam step as a cross-entropy update (`mtkit.train.update`).

Memory follows ``training.max_tokens``: the teacher-forced pass runs over chunks of whole sentences
(the reference and the candidates of each) whose padded size, rows × longest row, stays within it
(a sentence whose rows alone exceed it is a chunk of its own). The costs are copied to the device; the
candidate weights, risks and losses are computed there, so nothing else is read back per update.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from typing import Any

import numpy as np
import torch
from torch import Tensor

from mtkit.config.experiment import Config, DecodingConfig, TrainingConfig
from mtkit.data.batching import Batch
from mtkit.data.bpe import Bpe
from mtkit.decode.search import search
from mtkit.device import autocast
from mtkit.errors import ConfigError
from mtkit.models.base import Seq2Seq
from mtkit.train.costs import SentenceCost, auto_workers
from mtkit.train.loss import projected_label_smoothed_nll, projected_token_log_probs
from mtkit.train.update import Updater, zero_scalar
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID


# ------------------------------------------------------------------------------------- the risk
def expected_risk(seq_log_probs: Tensor, sentence: Tensor, cost: Tensor, alpha: float, n: int) -> Tensor:
    """R(x) = Σ_y Q(y|x) cost(y) for ``n`` sentences, Q(y|x) ∝ exp(α log P(y|x)) over the candidates of
    each sentence. ``seq_log_probs``, ``sentence`` (0..n-1) and ``cost`` are per candidate [C];
    differentiable in ``seq_log_probs``, all on the device (no read back)."""
    scores = alpha * seq_log_probs.float()
    top = torch.full((n,), -math.inf, dtype=scores.dtype, device=scores.device)
    top = top.scatter_reduce(0, sentence, scores.detach(), "amax")  # a stable softmax per sentence
    weight = torch.exp(scores - top[sentence])
    total = torch.zeros(n, dtype=scores.dtype, device=scores.device).index_add(0, sentence, weight)
    q = weight / total[sentence]
    return torch.zeros_like(total).index_add(0, sentence, q * cost.to(q.dtype))


# ------------------------------------------------------------------------------------- candidates
def candidate_decoding(cfg: DecodingConfig) -> DecodingConfig:
    """The search settings of candidate generation: the model's length limits and length
    normalisation (which ranks a beam's n-best), plain sampling (temperature 1, no top-k/top-p) and no
    n-gram blocking."""
    return dataclasses.replace(cfg, temperature=1.0, top_k=0, top_p=1.0, no_repeat_ngram=0)


def generate(model: Seq2Seq, src: Tensor, cfg: DecodingConfig, count: int, how: str,
             generator: torch.Generator | None, start: Tensor | None = None) -> list[list[list[int]]]:
    """Per sentence of ``src`` [B, S], its distinct candidates (token ids without BOS/EOS): the beam's
    n-best first, then the samples, in the order found. ``start``: each sentence's first decoder input
    (BOS, or a decoder-side language tag), as in ``search``."""
    beam = {"beam": count, "sample": 0, "both": (count + 1) // 2}[how]
    found: list[list[list[int]]] = [[] for _ in range(src.size(0))]
    if beam:
        for mine, hyps in zip(found, search(model, src, cfg, beam_size=beam, nbest=beam, start=start),
                              strict=True):
            mine.extend(h.tokens for h in hyps)
    if count - beam:
        drawn = search(model, src, cfg, nbest=count - beam, sample=True, generator=generator, start=start)
        for mine, hyps in zip(found, drawn, strict=True):
            mine.extend(h.tokens for h in hyps)
    return [list(map(list, dict.fromkeys(map(tuple, mine)))) for mine in found]


def _references(batch: Batch) -> list[list[int]]:
    """The reference token ids of a (host) batch's real rows, without EOS."""
    rows = batch.tgt_out[: len(batch.ids)].tolist()
    return [[t for t in row if t != PAD_ID][:-1] for row in rows]


def _chunks(src_lengths: list[int], rows: list[list[list[int]]], max_tokens: int) -> list[list[int]]:
    """Consecutive sentences whose rows (reference and candidates) fit ``max_tokens`` padded."""
    chunks: list[list[int]] = []
    count = longest = 0
    for i, sentence_rows in enumerate(rows):
        length = max(src_lengths[i], max(len(r) for r in sentence_rows) + 1)
        grown = (count + len(sentence_rows)) * max(longest, length)
        if chunks and grown <= max_tokens:
            chunks[-1].append(i)
            count, longest = count + len(sentence_rows), max(longest, length)
        else:
            chunks.append([i])
            count, longest = len(sentence_rows), length
    return chunks


def _padded(rows: list[list[int]], before: int | None, after: int | None) -> Tensor:
    longest = max(len(r) for r in rows) + 1
    out = np.full((len(rows), longest), PAD_ID, dtype=np.int64)
    for i, r in enumerate(rows):
        full = ([before] if before is not None else []) + r + ([after] if after is not None else [])
        out[i, : len(full)] = full
    return torch.from_numpy(out)


# ------------------------------------------------------------------------------------- the update
@dataclasses.dataclass
class Found:
    """Per sentence of a batch: its reference and candidates (token ids) and the candidates' costs."""

    references: list[list[int]]
    candidates: list[list[list[int]]]
    costs: list[list[float]]


class MrtUpdater(Updater):
    """An `Updater` whose batches are scored by the expected cost of the model's own candidates."""

    def __init__(self, *args: Any, tgt_bpe: Bpe, decoding: DecodingConfig, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.tgt_bpe = tgt_bpe
        self.decoding = candidate_decoding(decoding)
        workers = self.tc.mrt_cost_workers or auto_workers(self.device.type, self.info.local_world_size)
        self.cost = SentenceCost(self.tc.mrt_metric, workers)
        self.update_risk, self.log_risk = zero_scalar(self.device), zero_scalar(self.device)
        self.log_sentences = self.log_candidates = 0

    def _generator(self, step: int) -> torch.Generator:
        seed = (self.tc.seed * 999_983 + self.info.rank * 104_729 + step * 7_907 + 1) % (2 ** 63)
        return torch.Generator(self.device).manual_seed(seed)

    def update(self, batches: list[Batch], step: int) -> None:
        tokens = sum(b.num_tgt_tokens for b in batches)
        sentences = sum(len(b.ids) for b in batches)
        # the risk summed per sentence is divided, with the CE's gradients, by the update's tokens
        scale = tokens / max(1, sentences)
        generator = self._generator(step)
        work = [self._candidates(cpu_batch, generator) for cpu_batch in batches]
        passes = [(cpu_batch, chunk, found) for cpu_batch, (found, chunks) in zip(batches, work, strict=True)
                  for chunk in chunks]
        for i, (cpu_batch, chunk, found) in enumerate(passes):
            accumulating = self.info.enabled and i < len(passes) - 1 and hasattr(self.train_model, "no_sync")
            with self.train_model.no_sync() if accumulating else contextlib.nullcontext():  # type: ignore[operator]
                loss, nll, risk = self._chunk_loss(cpu_batch, chunk, found, scale)
                (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
            self.update_loss += loss.detach()
            self.update_nll += nll
            self.update_risk += risk.detach()
        self.update_tokens.fill_(tokens)
        self._optimizer_step()
        ok = (self.nonfinite_run == 0).float()  # 0 after a skipped update (see _optimizer_step)
        self.log_risk.add_(ok * self.update_risk)
        self.update_risk.zero_()
        self.log_sentences += sentences
        self.log_candidates += sum(len(c) for found, _ in work for c in found.candidates)

    def _candidates(self, cpu_batch: Batch, generator: torch.Generator) -> tuple[Found, list[list[int]]]:
        """The references, candidates and costs of a batch's sentences, and the chunks of its pass."""
        n = len(cpu_batch.ids)
        src = cpu_batch.src[:n].to(self.device, non_blocking=True)
        was_training = self.model.training
        self.model.eval()
        try:
            with autocast(self.device, self.autocast_dtype):
                found = generate(self.model, src, self.decoding, self.tc.mrt_candidates, self.tc.mrt_search,
                                 generator, cpu_batch.tgt_in[:n, 0])
        finally:
            self.model.train(was_training)
        refs = _references(cpu_batch)
        ref_texts = self.tgt_bpe.decode_ids(refs)
        costs = self.cost.batch([self.tgt_bpe.decode_ids(c) for c in found], ref_texts)
        src_lengths = (cpu_batch.src[:n] != PAD_ID).sum(1).tolist()
        rows = [[r, *c] for r, c in zip(refs, found, strict=True)]
        return Found(refs, found, costs), _chunks(src_lengths, rows, self.tc.max_tokens)

    def _chunk_loss(self, cpu_batch: Batch, chunk: list[int], found: Found, scale: float
                    ) -> tuple[Tensor, Tensor, Tensor]:
        """(loss, reference NLL, summed risk) of the sentences ``chunk`` of a batch: one teacher-forced
        pass over their references (first) and candidates."""
        refs, cands, costs = found.references, found.candidates, found.costs
        k = len(chunk)
        rows = [refs[i] for i in chunk] + [c for i in chunk for c in cands[i]]
        # each source once: row j of the pass translates source row source_rows[j] (the references
        # first, then each sentence's candidates); a candidate's source row is its sentence in the chunk
        source_rows = list(range(k)) + [j for j, i in enumerate(chunk) for _ in cands[i]]
        src = cpu_batch.src[chunk]
        src = src[:, : max(1, int((src != PAD_ID).sum(1).max()))]
        tgt_in = _padded(rows, BOS_ID, None)
        tgt_in[:, 0] = cpu_batch.tgt_in[chunk, 0][source_rows]  # BOS, or the decoder-side language tag
        host = [src, tgt_in, _padded(rows, None, EOS_ID), torch.tensor(source_rows),
                torch.tensor([c for i in chunk for c in costs[i]])]
        if self.device.type == "cuda":
            host = [t.pin_memory() for t in host]
        src, tgt_in, tgt_out, rows_of, cost = (t.to(self.device, non_blocking=True) for t in host)
        tc = self.tc
        weight, bias = self.model.output_proj.weight, self.model.logit_bias()
        with autocast(self.device, self.autocast_dtype):
            features, _ = self.train_model(src, tgt_in, project=False, source_rows=rows_of)
            ce, nll = projected_label_smoothed_nll(features[:k], weight, tgt_out[:k], tc.label_smoothing,
                                                   block_rows=self.loss_block_rows,
                                                   drop_padding=self.drop_padding, bias=bias)
            token_log_probs = projected_token_log_probs(features[k:], weight, tgt_out[k:],
                                                        block_rows=self.loss_block_rows,
                                                        drop_padding=self.drop_padding, bias=bias)
        risk = expected_risk(token_log_probs.sum(1), rows_of[k:], cost, tc.mrt_alpha, k).sum()
        return risk * scale + tc.mrt_ce_weight * ce, nll, risk

    def describe(self) -> str:
        workers = self.cost.workers
        return f" | MRT costs in {workers} processes" if workers else ""

    def close(self) -> None:
        self.cost.close()

    # ------------------------------------------------------------------------------ the log's sums
    def log_sums(self) -> Tensor:
        return torch.cat([super().log_sums(), torch.stack([self.log_risk]),
                          torch.tensor([self.log_sentences, self.log_candidates], dtype=self.log_risk.dtype,
                                       device=self.device)])

    def reset_log(self) -> None:
        super().reset_log()
        self.log_risk.zero_()
        self.log_sentences = self.log_candidates = 0

    def log_fields(self, extra: list[float]) -> dict[str, Any]:
        risk, sentences, candidates = extra
        return {"risk": risk / sentences if sentences else None,
                "candidates": round(candidates / sentences, 2) if sentences else None}


def updater_for(cfg: Config, tgt_bpe: Bpe | None, *args: Any) -> Updater:
    """The updater of ``training.objective``: `Updater` (cross-entropy) or `MrtUpdater`; ``args`` as
    `Updater` takes them after the training config."""
    tc: TrainingConfig = cfg.training
    model, train_model, optimizer, scaler, *rest = args
    if tc.objective == "ce":
        return Updater(model, train_model, optimizer, scaler, tc, *rest)
    if tgt_bpe is None:
        raise ConfigError("training.objective=mrt scores candidates as text and needs the target BPE model "
                          f"in data.dir ({cfg.data.dir})")
    return MrtUpdater(model, train_model, optimizer, scaler, tc, *rest, tgt_bpe=tgt_bpe,
                      decoding=cfg.decoding)


__all__ = ["MrtUpdater", "SentenceCost", "expected_risk", "generate", "updater_for"]
