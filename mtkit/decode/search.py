"""Greedy search, beam search and sampling, written once against the ``Seq2Seq`` interface.

Every algorithm runs over one flat batch of rows (sentences × beams, or sentences × samples) with one
``model.step`` per time step for all of them. Sentences leave the batch as soon as they are finished,
so a batch costs what its sentences need rather than what its longest sentence needs. Per-step work is
vectorised over the rows; Python only touches a hypothesis when it is finished.

The model's steps return logits (``Seq2Seq.step(normalize=False)``), not log-probabilities: greedy
search only needs each row's best token (and, where a score is asked for, that token's log-probability,
from one log-normaliser per row), and beam search normalises only the 2K best tokens of each row it
keeps. Neither writes a log-softmax over the whole vocabulary at each step.

Lengths: a hypothesis has at most ``floor(max_len_a · source_len + max_len_b)`` tokens before EOS
(EOS is forced there) and at least ``min_len`` (EOS is blocked before). Scores are normalised over
the output length counted with its EOS (``len(tokens) + 1``):
``gnmt`` log_prob / ((5 + L) / 6)^α, ``average`` log_prob / L, ``none`` log_prob.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.config.experiment import DecodingConfig
from mtkit.decode.token_rules import NEG_INF, block_repeats, filter_logits
from mtkit.decode.translation import Hypothesis, normalise
from mtkit.errors import ConfigError
from mtkit.models.base import EncoderOutput, Seq2Seq
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID

#: greedy search gathers the live rows of its batch (cache, encoder output) once this share of the
#: rows has finished; until then finished rows ride along, which costs less than a gather per step
COMPACT_FRACTION = 0.25


# -------------------------------------------------------------------------------------- entry point
def search(model: Seq2Seq, src: Tensor, cfg: DecodingConfig, *, beam_size: int | None = None,
           nbest: int = 1, need_attention: bool = False, sample: bool = False,
           generator: torch.Generator | None = None, attn_layer: int = -1,
           start: Tensor | None = None, scores: bool = True) -> list[list[Hypothesis]]:
    """Translate a padded batch ``src`` [B, S] (PAD_ID where padded).

    Returns, per input sentence in input order, ``nbest`` hypotheses sorted best first. Beam size
    ``None`` takes ``cfg.beam_size``; 1 is greedy search. ``sample`` draws ``nbest`` independent
    samples per sentence (temperature, top-k, top-p from ``cfg``; reproducible with ``generator``).
    A beam narrower than ``nbest`` is widened to ``nbest``. ``model`` may be an ``Ensemble``.
    ``start`` [B]: each sentence's first decoder input, BOS where None (a multilingual model with
    decoder-side language tags starts from the tag instead: `mtkit.data.corpora`); it is no output token.
    ``scores=False``: greedy search leaves every score NaN (nothing reads them: the plain text output)
    and skips the log-normaliser of each step; beam search and sampling score anyway.
    """
    if nbest < 1:
        raise ConfigError(f"nbest must be at least 1, not {nbest}")
    if src.dim() != 2:
        raise ValueError(f"search expects src of shape [B, S], got {tuple(src.shape)}")
    if src.size(0) == 0:
        return []
    k = max(beam_size if beam_size is not None else cfg.beam_size, 1)
    with torch.inference_mode():
        if sample:
            return _sample_or_greedy(model, src, cfg, nbest, need_attention, attn_layer, True, generator,
                                     start)
        if k == 1 and nbest == 1:
            return _sample_or_greedy(model, src, cfg, 1, need_attention, attn_layer, False, None, start,
                                     scores)
        return _beam(model, src, cfg, max(k, nbest), nbest, need_attention, attn_layer, start)


# ---------------------------------------------------------------------------------------- utilities
def start_tokens(src: Tensor, start: Tensor | None) -> Tensor:
    """Each sentence's first decoder input on ``src``'s device: ``start``, or BOS for all."""
    if start is None:
        return torch.full((src.size(0),), BOS_ID, dtype=torch.long, device=src.device)
    if start.shape != (src.size(0),):
        raise ValueError(f"start must hold one token per sentence, got {tuple(start.shape)}")
    return start.to(device=src.device, dtype=torch.long)


def _length_limits(src: Tensor, cfg: DecodingConfig) -> Tensor:
    """Per-sentence max output length (tokens before EOS)."""
    src_lens = (src != PAD_ID).sum(1)
    return torch.floor(src_lens.double() * cfg.max_len_a + cfg.max_len_b).long().clamp(min=1)


def log_normalizer(logits: Tensor) -> Tensor:
    """Each row's log-sum-exp [N]: a token's log-probability is its logit minus this. One pass over
    the row and one temporary (torch.logsumexp keeps more, and measured slower on a CPU)."""
    top = logits.amax(-1, keepdim=True)
    return (logits - top).exp_().sum(-1).log_().add_(top.squeeze(-1))


def _mask_step(log_probs: Tensor, t: int, max_len: Tensor, cfg: DecodingConfig,
               history: Tensor, log_norm: Tensor | None = None) -> Tensor:
    """Apply the per-step constraints in place: never PAD/BOS; no EOS before min_len; only EOS at
    the length limit (``max_len`` is per row); no repeated n-grams. ``log_probs`` may be logits whose
    rows' log-normaliser is ``log_norm``: an EOS forced for free (``eos_at_limit``) gets the logit of
    probability 1 (or 0 where no score is kept: it is then the only finite one)."""
    eos = log_probs[:, EOS_ID].clone()
    log_probs[:, PAD_ID] = NEG_INF
    log_probs[:, BOS_ID] = NEG_INF
    if t < cfg.min_len:
        log_probs[:, EOS_ID] = NEG_INF
    forced = max_len <= t
    if cfg.no_repeat_ngram > 0 and t >= cfg.no_repeat_ngram:
        block_repeats(log_probs, history, cfg.no_repeat_ngram)
        # a row with every token banned may still end (rather than emit PAD)
        forced = forced | (log_probs.max(-1).values == NEG_INF)
    if bool(forced.any()):
        log_probs[forced] = NEG_INF
        if cfg.eos_at_limit != "scored":  # free: as generate forces it
            eos = log_norm if log_norm is not None else torch.zeros_like(eos)
        log_probs[:, EOS_ID] = torch.where(forced, eos, log_probs[:, EOS_ID])
    return log_probs


def _attention_rows(attn: Tensor, src_mask_row: Tensor) -> Tensor:
    """[H, T, S] → the real source positions only."""
    return attn[:, :, src_mask_row].float().cpu()


def _append_attention(attn_hist: Tensor | None, attn: Tensor | None) -> Tensor | None:
    """Add this step's attention [N, H, S] to the rows' history [N, H, t, S]. Attention-free models
    return None, and then there is no history."""
    if attn is None:
        return attn_hist
    step_attn = attn.float().unsqueeze(2)  # [N, H, 1, S]
    return step_attn if attn_hist is None else torch.cat([attn_hist, step_attn], 2)


# ----------------------------------------------------------------------------- greedy and sampling
def _sample_or_greedy(model: Seq2Seq, src: Tensor, cfg: DecodingConfig, copies: int,
                      need_attention: bool, attn_layer: int, sample: bool,
                      generator: torch.Generator | None, start: Tensor | None = None, scored: bool = True
                      ) -> list[list[Hypothesis]]:
    """Greedy search (argmax) or ancestral sampling, ``copies`` independent rows per sentence;
    ``scored=False``: greedy without scores (NaN)."""
    batch, device = src.size(0), src.device
    max_len = _length_limits(src, cfg)
    enc = model.encode(src)
    src_mask = enc.src_mask.cpu()
    row_sentence = torch.arange(batch, device=device).repeat_interleave(copies)
    if copies > 1:
        enc = model.reorder_encoder(enc, row_sentence)
    state = model.init_state(enc)
    row_max = max_len.to(device).repeat_interleave(copies)
    rows = row_sentence.clone()  # sentence of each active row
    prev = start_tokens(src, start).repeat_interleave(copies)
    history = torch.empty((rows.numel(), 0), dtype=torch.long, device=device)
    scored = scored or sample
    scores = torch.full((rows.numel(),), 0.0 if scored else float("nan"), dtype=torch.float32, device=device)
    attn_hist: Tensor | None = None
    results: list[list[Hypothesis]] = [[] for _ in range(batch)]
    limit = int(max_len.max())
    # rows already finished but still in the batch (greedy only: sampling draws per row, so extra
    # rows would change the random numbers the live ones get)
    dead = None if sample else torch.zeros(rows.numel(), dtype=torch.bool, device=device)
    for t in range(limit + 1):
        logits, state, attn = model.step(prev, state, enc, need_attention, attn_layer, normalize=False)
        logits = logits.float()
        log_norm = log_normalizer(logits) if scored else None
        logits = _mask_step(logits, t, row_max, cfg, history, log_norm)
        if sample:
            tok = torch.multinomial(filter_logits(logits, cfg).softmax(-1), 1, generator=generator).squeeze(1)
        else:
            tok = logits.max(-1).indices  # the first maximum, as argmax, and measured faster on a CPU
        if log_norm is not None:
            scores = scores + (logits.gather(1, tok.unsqueeze(1)).squeeze(1) - log_norm)
        if need_attention:
            attn_hist = _append_attention(attn_hist, attn)
        finished = tok == EOS_ID
        if dead is not None:
            finished &= ~dead
        leaving = None  # the rows to take out of the batch at this step
        if bool(finished.any()):
            _collect_finished(finished, history, scores, rows, attn_hist, src_mask, cfg, results)
            leaving = finished
            if dead is not None:
                # greedy: finished rows stay in the batch until enough have finished to pay for
                # gathering the cache and the encoder output of the rest (one copy of each)
                dead |= finished
                leaving = dead if int(dead.sum()) >= COMPACT_FRACTION * dead.numel() else None
        if leaving is None:
            history = torch.cat([history, tok.unsqueeze(1)], 1)
            prev = tok
            continue
        keep = (~leaving).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        history = torch.cat([history[keep], tok[keep].unsqueeze(1)], 1)
        prev, scores, rows, row_max = tok[keep], scores[keep], rows[keep], row_max[keep]
        if attn_hist is not None:
            attn_hist = attn_hist[keep]
        if dead is not None:
            dead = dead[keep]
        state = model.reorder_state(state, keep)
        enc = model.reorder_encoder(enc, keep)
    for hyps in results:
        hyps.sort(key=lambda h: -h.score)
    return results


def _collect_finished(finished: Tensor, history: Tensor, scores: Tensor, rows: Tensor,
                      attn_hist: Tensor | None, src_mask: Tensor, cfg: DecodingConfig,
                      results: list[list[Hypothesis]]) -> None:
    """Turn the rows that just produced EOS into hypotheses of their sentences."""
    done_idx = finished.nonzero().squeeze(1).tolist()
    hist_cpu = history[finished].tolist()
    score_cpu = scores[finished].tolist()
    sent_cpu = rows[finished].tolist()
    for j, r in enumerate(done_idx):
        sentence = sent_cpu[j]
        tokens = hist_cpu[j]
        att = _attention_rows(attn_hist[r], src_mask[sentence]) if attn_hist is not None else None
        results[sentence].append(Hypothesis(tokens, float(normalise(score_cpu[j], len(tokens) + 1, cfg)),
                                            score_cpu[j], att))


# ------------------------------------------------------------------------------------------- beam
@dataclass
class _Beams:
    """The live part of a beam search: n active sentences, K rows (beams) each, flat [n·K] batch."""

    enc: EncoderOutput
    state: Any
    sentences: Tensor  # [n] index of each active sentence in the input batch
    sent_max: Tensor  # [n] its length limit
    worst: Tensor  # [n] score of the worst of its K finished hypotheses (-inf until it has K)
    scores: Tensor  # [n, K] cumulative log-probability of each beam
    prev: Tensor  # [n·K] last token of each row
    history: Tensor  # [n·K, t] tokens so far
    attn_hist: Tensor | None = None  # [n·K, H, t, S] when attention is asked for


@dataclass
class _Extensions:
    """The 2K best (beam, token) extensions of each sentence [n, 2K], best first."""

    scores: Tensor
    beam: Tensor
    token: Tensor
    is_eos: Tensor


@dataclass
class _Continuations:
    """The K extensions of each sentence that go on [n, K]: their scores, the flat row each extends
    (row of the [n·K] batch), and the new token."""

    scores: Tensor
    rows: Tensor
    tokens: Tensor


def _beam(model: Seq2Seq, src: Tensor, cfg: DecodingConfig, k: int, nbest: int,
          need_attention: bool, attn_layer: int, start: Tensor | None = None) -> list[list[Hypothesis]]:
    """Beam search over a flat [B·K] batch.

    Each step takes the 2K best extensions of a sentence's K beams by cumulative log-probability;
    those among the first K that end in EOS are finished (with their normalised score; the K best
    finished are kept), the K best others continue. A sentence is done, and leaves the batch, when
    it reaches its length limit (where every beam is forced to EOS) or when it has K finished
    hypotheses (fairseq's rule, for length_norm gnmt) and, for none and average, its best live beam
    scored as if it ended now is no better than the worst of them (exact for none).
    """
    b = _start_beams(model, src, cfg, k, start_tokens(src, start))
    src_mask = b.enc.src_mask.cpu()
    finished: list[list[Hypothesis]] = [[] for _ in range(src.size(0))]
    for t in range(int(b.sent_max.max()) + 1):
        if t == 0:  # one row per sentence: its K beams are identical
            logits, attn = _first_step(model, b, k, need_attention, attn_layer)
            row_max, row_history = b.sent_max, b.history[::k]
        else:
            logits, attn = _next_step(model, b, need_attention, attn_layer)
            row_max, row_history = b.sent_max.repeat_interleave(k), b.history
        log_norm = log_normalizer(logits)
        logits = _mask_step(logits, t, row_max, cfg, row_history, log_norm)
        if need_attention:
            b.attn_hist = _append_attention(b.attn_hist, attn)
        ext = _best_extensions(b.scores, logits, k, log_norm)
        _finish_eos(b, ext, k, cfg, src_mask, finished)
        cont = _continuations(ext, k)
        live = ~_sentences_done(b, cont, t, cfg)
        if not bool(live.any()):
            break
        if not bool(live.all()):
            cont = _drop_sentences(model, b, cont, live, k)
        _advance(model, b, cont)
    return _best_first(finished, nbest)


def _start_beams(model: Seq2Seq, src: Tensor, cfg: DecodingConfig, k: int, start: Tensor) -> _Beams:
    """Encode; one row per sentence until the first step has expanded it to K beams."""
    batch, device = src.size(0), src.device
    enc = model.encode(src)
    scores = torch.zeros(batch, k, dtype=torch.float32, device=device)
    scores[:, 1:] = NEG_INF  # all beams start identical: expand only the first at step 0
    return _Beams(
        enc=enc, state=model.init_state(enc), sentences=torch.arange(batch, device=device),
        sent_max=_length_limits(src, cfg).to(device),
        worst=torch.full((batch,), NEG_INF, dtype=torch.float32, device=device), scores=scores,
        prev=start.repeat_interleave(k),
        history=torch.empty((batch * k, 0), dtype=torch.long, device=device),
    )


def _first_step(model: Seq2Seq, b: _Beams, k: int, need_attention: bool, attn_layer: int
                ) -> tuple[Tensor, Tensor | None]:
    """The K beams are identical at the start: step once per sentence (its logits [n, V] stay one row
    per sentence: ``_best_extensions`` expands only the best of them), then expand the state (and the
    attention) to K rows each."""
    expand = torch.arange(b.sentences.numel(), device=b.prev.device).repeat_interleave(k)
    logits, state, attn = model.step(b.prev[::k], b.state, b.enc, need_attention, attn_layer, normalize=False)
    if not model.beams_share_encoder:
        b.enc = model.reorder_encoder(b.enc, expand)
    b.state = model.reorder_state(state, expand)
    return logits.float(), attn.index_select(0, expand) if attn is not None else None


def _next_step(model: Seq2Seq, b: _Beams, need_attention: bool, attn_layer: int
               ) -> tuple[Tensor, Tensor | None]:
    """One decoder step for every row: logits [n·K, V]."""
    logits, b.state, attn = model.step(b.prev, b.state, b.enc, need_attention, attn_layer, normalize=False)
    return logits.float(), attn


def _best_extensions(scores: Tensor, logits: Tensor, k: int, log_norm: Tensor) -> _Extensions:
    """Of the K·V (beam, token) extensions of each sentence, the 2K best by cumulative log-prob:
    enough that K non-EOS ones remain however many of them end in EOS.

    ``logits`` [n·R, V] (R = K, or 1 at the first step, where all beams are one) with each row's
    log-normaliser ``log_norm``. Each of the 2K best extensions of a sentence is among the 2K best
    tokens of its own row, so those alone are normalised and ranked: no [n, K·V] sum is written."""
    n_sent, vocab = scores.size(0), logits.size(-1)
    beams, width = logits.size(0) // n_sent, min(2 * k, vocab)
    row_best, row_tok = logits.topk(width, dim=1)
    cand = scores[:, :beams].unsqueeze(2) + (row_best - log_norm.unsqueeze(1)).view(n_sent, beams, width)
    cand, row_tok = cand.view(n_sent, beams * width), row_tok.view(n_sent, beams * width)
    if cand.size(1) < 2 * k:  # a vocabulary smaller than 2K at the first step: the rest is -inf
        cand = F.pad(cand, (0, 2 * k - cand.size(1)), value=NEG_INF)
        row_tok = F.pad(row_tok, (0, 2 * k - row_tok.size(1)), value=PAD_ID)
    top_scores, pos = cand.topk(2 * k, dim=1)  # sorted best first
    top_tok = row_tok.gather(1, pos)
    return _Extensions(top_scores, pos // width, top_tok, top_tok == EOS_ID)


def _finish_eos(b: _Beams, ext: _Extensions, k: int, cfg: DecodingConfig, src_mask: Tensor,
                finished: list[list[Hypothesis]]) -> None:
    """Finish the EOS extensions ranked among the first K (finite scores only) into each sentence's
    K best finished hypotheses, and update ``b.worst`` of the sentences that hold K."""
    fin = ext.is_eos[:, :k] & torch.isfinite(ext.scores[:, :k])
    if not bool(fin.any()):
        return
    fin_i, fin_j = fin.nonzero(as_tuple=True)
    fin_rows = fin_i * k + ext.beam[fin_i, fin_j]
    fin_tokens = b.history.index_select(0, fin_rows).tolist()
    fin_lp = ext.scores[fin_i, fin_j].tolist()
    fin_sent = b.sentences[fin_i].tolist()
    changed: dict[int, float] = {}
    for n, (i, r) in enumerate(zip(fin_i.tolist(), fin_rows.tolist(), strict=True)):
        sentence, tokens, lp = fin_sent[n], fin_tokens[n], fin_lp[n]
        score = float(normalise(lp, len(tokens) + 1, cfg))
        kept = finished[sentence]
        if len(kept) >= k and score <= min(h.score for h in kept):
            continue  # not among the K best: skip the attention copy too
        att = _attention_rows(b.attn_hist[r], src_mask[sentence]) if b.attn_hist is not None else None
        new_worst = _keep_k_best(kept, Hypothesis(tokens, score, lp, att), k)
        if new_worst is not None:
            changed[i] = new_worst
    if changed:
        b.worst[list(changed)] = torch.tensor(list(changed.values()), device=b.worst.device)


def _keep_k_best(kept: list[Hypothesis], hyp: Hypothesis, k: int) -> float | None:
    """Add ``hyp`` (known to beat the worst kept one when K are kept) to the K best finished, not the
    K first; the worst kept score once there are K, else None."""
    if len(kept) >= k:
        kept.remove(min(kept, key=lambda h: h.score))
    kept.append(hyp)
    return min(h.score for h in kept) if len(kept) >= k else None


def _continuations(ext: _Extensions, k: int) -> _Continuations:
    """The K best non-EOS extensions of each sentence."""
    scores, pos = ext.scores.masked_fill(ext.is_eos, NEG_INF).topk(k, dim=1)
    row_base = torch.arange(scores.size(0), device=scores.device).unsqueeze(1) * k
    return _Continuations(scores, row_base + ext.beam.gather(1, pos), ext.token.gather(1, pos))


def _sentences_done(b: _Beams, cont: _Continuations, t: int, cfg: DecodingConfig) -> Tensor:
    """[n] bool: at the length limit (all beams were forced to EOS), or K finished and (except under
    gnmt and ``beam_stop: finished``) the best live beam, were it to end now, would not beat the worst
    of them."""
    has_k = b.worst > NEG_INF
    if cfg.length_norm != "gnmt" and cfg.beam_stop != "finished":
        # its length if it ended now (t + 1 tokens and EOS), or, as generate, its length so far
        length = t + (2 if cfg.beam_stop == "ended" else 1)
        has_k = has_k & (b.worst >= normalise(cont.scores[:, 0], length, cfg))
    # under the GNMT penalty a live beam's normalised score keeps rising with length, so that
    # bound ran every sentence to its length limit, which made beam search slow; there a
    # sentence stops at K finished hypotheses, as in fairseq
    return (b.sent_max <= t) | has_k


def _drop_sentences(model: Seq2Seq, b: _Beams, cont: _Continuations, live: Tensor, k: int
                    ) -> _Continuations:
    """Keep only the ``live`` sentences: their bookkeeping, their encoder rows, their continuations
    (whose rows still index the batch before the drop; ``_advance`` selects them)."""
    kept = live.nonzero().squeeze(1)
    b.sentences, b.sent_max, b.worst = b.sentences[kept], b.sent_max[kept], b.worst[kept]
    if model.beams_share_encoder:
        b.enc = model.reorder_encoder(b.enc, kept)
    else:
        beam_offsets = torch.arange(k, device=kept.device)
        b.enc = model.reorder_encoder(b.enc, (kept.unsqueeze(1) * k + beam_offsets).view(-1))
    return _Continuations(cont.scores[kept], cont.rows[kept], cont.tokens[kept])


def _advance(model: Seq2Seq, b: _Beams, cont: _Continuations) -> None:
    """Make the continuations the new beams: reorder state and histories, append the tokens."""
    index = cont.rows.view(-1)
    b.state = model.reorder_state(b.state, index)
    b.history = torch.cat([b.history.index_select(0, index), cont.tokens.view(-1, 1)], 1)
    if b.attn_hist is not None:
        b.attn_hist = b.attn_hist.index_select(0, index)
    b.scores = cont.scores
    b.prev = cont.tokens.view(-1)


def _best_first(finished: list[list[Hypothesis]], nbest: int) -> list[list[Hypothesis]]:
    """Each sentence's ``nbest`` best finished hypotheses, best first."""
    out = []
    for hyps in finished:
        if not hyps:  # every extension was forbidden: report an empty translation, not nothing
            hyps.append(Hypothesis([], NEG_INF, NEG_INF, None))
        hyps.sort(key=lambda h: -h.score)
        out.append(hyps[:nbest])
    return out
