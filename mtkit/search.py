"""Greedy search, beam search and sampling, written once against the ``Seq2Seq`` interface.

Every algorithm runs over one flat batch of rows (sentences × beams, or sentences × samples) with one
``model.step`` per time step for all of them. Sentences leave the batch as soon as they are finished,
so a batch costs what its sentences need rather than what its longest sentence needs. Per-step work is
vectorised over the rows; Python only touches a hypothesis when it is finished.

Lengths: a hypothesis has at most ``floor(max_len_a · source_len + max_len_b)`` tokens before EOS
(EOS is forced there) and at least ``min_len`` (EOS is blocked before). Scores are normalised over
the output length counted with its EOS (``len(tokens) + 1``):
``gnmt`` log_prob / ((5 + L) / 6)^α, ``average`` log_prob / L, ``none`` log_prob.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from mtkit.config import DecodingConfig
from mtkit.errors import ConfigError
from mtkit.models.base import Seq2Seq
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID

NEG_INF = float("-inf")


@dataclass
class Hypothesis:
    """One translation: ``tokens`` without BOS/EOS; ``score`` normalised (used for ranking),
    ``log_prob`` the plain sum; ``attention`` [H, len(tokens) + 1, source_len] (the last row is the
    step that produced EOS; source positions are the real, unpadded ones) when asked for."""

    tokens: list[int]
    score: float
    log_prob: float
    attention: Tensor | None = None


def normalise(log_prob: float | Tensor, length: int | Tensor, cfg: DecodingConfig) -> Any:
    """The ranking score of a hypothesis of ``length`` tokens (EOS included)."""
    if cfg.length_norm == "gnmt":
        if cfg.length_penalty == 0:
            return log_prob
        return log_prob / ((5.0 + length) / 6.0) ** cfg.length_penalty
    if cfg.length_norm == "average":
        return log_prob / length
    return log_prob


# -------------------------------------------------------------------------------------- entry point
def search(model: Seq2Seq, src: Tensor, cfg: DecodingConfig, *, beam_size: int | None = None,
           nbest: int = 1, need_attention: bool = False, sample: bool = False,
           generator: torch.Generator | None = None, attn_layer: int = -1) -> list[list[Hypothesis]]:
    """Translate a padded batch ``src`` [B, S] (PAD_ID where padded).

    Returns, per input sentence in input order, ``nbest`` hypotheses sorted best first. Beam size
    ``None`` takes ``cfg.beam_size``; 1 is greedy search. ``sample`` draws ``nbest`` independent
    samples per sentence (temperature, top-k, top-p from ``cfg``; reproducible with ``generator``).
    A beam narrower than ``nbest`` is widened to ``nbest``. ``model`` may be an ``Ensemble``.
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
            return _sample_or_greedy(model, src, cfg, nbest, need_attention, attn_layer, True, generator)
        if k == 1 and nbest == 1:
            return _sample_or_greedy(model, src, cfg, 1, need_attention, attn_layer, False, None)
        return _beam(model, src, cfg, max(k, nbest), nbest, need_attention, attn_layer)


# ---------------------------------------------------------------------------------------- utilities
def _length_limits(src: Tensor, cfg: DecodingConfig) -> tuple[Tensor, Tensor]:
    """Per-sentence max output length (tokens before EOS) and real source lengths."""
    src_lens = (src != PAD_ID).sum(1)
    max_len = torch.floor(src_lens.double() * cfg.max_len_a + cfg.max_len_b).long().clamp(min=1)
    return max_len, src_lens


def _mask_step(log_probs: Tensor, t: int, max_len: Tensor, cfg: DecodingConfig,
               history: Tensor) -> Tensor:
    """Apply the per-step constraints in place: never PAD/BOS; no EOS before min_len; only EOS at
    the length limit (``max_len`` is per row); no repeated n-grams."""
    eos = log_probs[:, EOS_ID].clone()
    log_probs[:, PAD_ID] = NEG_INF
    log_probs[:, BOS_ID] = NEG_INF
    if t < cfg.min_len:
        log_probs[:, EOS_ID] = NEG_INF
    forced = max_len <= t
    if cfg.no_repeat_ngram > 0 and t >= cfg.no_repeat_ngram:
        _block_repeats(log_probs, history, cfg.no_repeat_ngram)
        # a row with every token banned may still end (rather than emit PAD)
        forced = forced | (log_probs.max(-1).values == NEG_INF)
    if bool(forced.any()):
        log_probs[forced] = NEG_INF
        log_probs[:, EOS_ID] = torch.where(forced, eos, log_probs[:, EOS_ID])
    return log_probs


def _block_repeats(log_probs: Tensor, history: Tensor, n: int) -> None:
    """Ban every token w for which (last n-1 tokens, w) already occurs in the row's history."""
    windows = history.unfold(1, n, 1)  # [N, t-n+1, n]
    prefix = history[:, history.size(1) - (n - 1):]  # [N, n-1]
    match = (windows[:, :, : n - 1] == prefix.unsqueeze(1)).all(-1)  # [N, t-n+1]
    if not bool(match.any()):
        return
    banned = torch.zeros_like(log_probs, dtype=torch.bool)
    banned.scatter_(1, torch.where(match, windows[:, :, n - 1], PAD_ID), match)
    # PAD was a filler index for non-matches: scatter of False there could have cleared nothing
    log_probs.masked_fill_(banned, NEG_INF)


def _filter_logits(log_probs: Tensor, cfg: DecodingConfig) -> Tensor:
    """Temperature, top-k and top-p (nucleus) shaping of a sampling distribution."""
    logits = log_probs / max(cfg.temperature, 1e-6)
    if cfg.top_k > 0 and cfg.top_k < logits.size(-1):
        kth = logits.topk(cfg.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, NEG_INF)
    if cfg.top_p < 1.0:
        sorted_logits, order = logits.sort(dim=-1, descending=True)
        probs = sorted_logits.softmax(-1)
        mass_before = probs.cumsum(-1) - probs
        drop = mass_before >= cfg.top_p  # keep the smallest prefix whose mass reaches top_p
        drop[:, 0] = False
        logits = logits.scatter(1, order, sorted_logits.masked_fill(drop, NEG_INF))
    return logits


def _attention_rows(attn: Tensor, src_mask_row: Tensor) -> Tensor:
    """[H, T, S] → the real source positions only."""
    return attn[:, :, src_mask_row].float().cpu()


# ----------------------------------------------------------------------------- greedy and sampling
def _sample_or_greedy(model: Seq2Seq, src: Tensor, cfg: DecodingConfig, copies: int,
                      need_attention: bool, attn_layer: int, sample: bool,
                      generator: torch.Generator | None) -> list[list[Hypothesis]]:
    """Greedy search (argmax) or ancestral sampling, ``copies`` independent rows per sentence."""
    batch, device = src.size(0), src.device
    max_len, _ = _length_limits(src, cfg)
    enc = model.encode(src)
    src_mask = enc.src_mask.cpu()
    row_sentence = torch.arange(batch, device=device).repeat_interleave(copies)
    if copies > 1:
        enc = model.reorder_encoder(enc, row_sentence)
    state = model.init_state(enc)
    row_max = max_len.to(device).repeat_interleave(copies)
    rows = row_sentence.clone()  # sentence of each active row
    prev = torch.full((rows.numel(),), BOS_ID, dtype=torch.long, device=device)
    history = torch.empty((rows.numel(), 0), dtype=torch.long, device=device)
    scores = torch.zeros(rows.numel(), dtype=torch.float32, device=device)
    attn_hist: Tensor | None = None
    results: list[list[Hypothesis]] = [[] for _ in range(batch)]
    limit = int(max_len.max())
    for t in range(limit + 1):
        log_probs, state, attn = model.step(prev, state, enc, need_attention, attn_layer)
        log_probs = _mask_step(log_probs.float(), t, row_max, cfg, history)
        if sample:
            logits = _filter_logits(log_probs, cfg)
            tok = torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(1)
        else:
            tok = log_probs.argmax(-1)
        scores = scores + log_probs.gather(1, tok.unsqueeze(1)).squeeze(1)
        if need_attention and attn is not None:  # attention-free models return None
            step_attn = attn.float().unsqueeze(2)  # [N, H, 1, S]
            attn_hist = step_attn if attn_hist is None else torch.cat([attn_hist, step_attn], 2)
        finished = tok == EOS_ID
        if not bool(finished.any()):
            history = torch.cat([history, tok.unsqueeze(1)], 1)
            prev = tok
            continue
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
        keep = (~finished).nonzero().squeeze(1)
        if keep.numel() == 0:
            break
        history = torch.cat([history[keep], tok[keep].unsqueeze(1)], 1)
        prev, scores, rows, row_max = tok[keep], scores[keep], rows[keep], row_max[keep]
        if attn_hist is not None:
            attn_hist = attn_hist[keep]
        state = model.reorder_state(state, keep)
        enc = model.reorder_encoder(enc, keep)
    for hyps in results:
        hyps.sort(key=lambda h: -h.score)
    return results


# ------------------------------------------------------------------------------------------- beam
def _beam(model: Seq2Seq, src: Tensor, cfg: DecodingConfig, k: int, nbest: int,
          need_attention: bool, attn_layer: int) -> list[list[Hypothesis]]:
    """Beam search over a flat [B·K] batch.

    Each step takes the 2K best extensions of a sentence's K beams by cumulative log-probability;
    those among the first K that end in EOS are finished (with their normalised score; the K best
    finished are kept), the K best others continue. A sentence is done, and leaves the batch, when
    it reaches its length limit (where every beam is forced to EOS) or when it has K finished
    hypotheses (fairseq's rule, for length_norm gnmt) and, for none and average, its best live beam
    scored as if it ended now is no better than the worst of them (exact for none).
    """
    batch, device = src.size(0), src.device
    max_len, _ = _length_limits(src, cfg)
    enc = model.encode(src)
    src_mask = enc.src_mask.cpu()
    expand = torch.arange(batch, device=device).repeat_interleave(k)
    state = model.init_state(enc)
    sentences = torch.arange(batch, device=device)  # original index of each active sentence
    sent_max = max_len.to(device)
    scores = torch.zeros(batch, k, dtype=torch.float32, device=device)
    scores[:, 1:] = NEG_INF  # all beams start identical: expand only the first at step 0
    prev = torch.full((batch * k,), BOS_ID, dtype=torch.long, device=device)
    history = torch.empty((batch * k, 0), dtype=torch.long, device=device)
    attn_hist: Tensor | None = None
    finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
    # score of the worst of a sentence's K finished hypotheses (-inf until it has K)
    worst = torch.full((batch,), NEG_INF, dtype=torch.float32, device=device)
    beam_offsets = torch.arange(k, device=device)
    limit = int(max_len.max())
    for t in range(limit + 1):
        n_sent = sentences.numel()
        if t == 0:  # the K beams are identical at the start: step once per sentence, then expand
            log_probs, state, attn = model.step(prev[::k], state, enc, need_attention, attn_layer)
            enc = model.reorder_encoder(enc, expand)
            state = model.reorder_state(state, expand)
            log_probs = log_probs.index_select(0, expand)
            attn = attn.index_select(0, expand) if attn is not None else None
        else:
            log_probs, state, attn = model.step(prev, state, enc, need_attention, attn_layer)
        vocab = log_probs.size(-1)
        row_max = sent_max.repeat_interleave(k)
        log_probs = _mask_step(log_probs.float(), t, row_max, cfg, history)
        if need_attention and attn is not None:
            step_attn = attn.float().unsqueeze(2)
            attn_hist = step_attn if attn_hist is None else torch.cat([attn_hist, step_attn], 2)
        cand = (scores.unsqueeze(2) + log_probs.view(n_sent, k, vocab)).view(n_sent, k * vocab)
        top_scores, top_idx = cand.topk(2 * k, dim=1)  # sorted best first
        top_beam = top_idx // vocab
        top_tok = top_idx % vocab
        is_eos = top_tok == EOS_ID
        row_base = torch.arange(n_sent, device=device).unsqueeze(1) * k

        # finish: EOS extensions ranked among the first K (finite scores only)
        fin = is_eos[:, :k] & torch.isfinite(top_scores[:, :k])
        if bool(fin.any()):
            fin_i, fin_j = fin.nonzero(as_tuple=True)
            fin_rows = row_base.squeeze(1)[fin_i] + top_beam[fin_i, fin_j]
            fin_tokens = history.index_select(0, fin_rows).tolist()
            fin_lp = top_scores[fin_i, fin_j].tolist()
            fin_sent = sentences[fin_i].tolist()
            changed: dict[int, float] = {}
            for n, (i, r) in enumerate(zip(fin_i.tolist(), fin_rows.tolist(), strict=True)):
                sentence, tokens, lp = fin_sent[n], fin_tokens[n], fin_lp[n]
                score = float(normalise(lp, len(tokens) + 1, cfg))
                kept = finished[sentence]
                if len(kept) >= k and score <= min(h.score for h in kept):
                    continue
                att = (_attention_rows(attn_hist[r], src_mask[sentence])
                       if attn_hist is not None else None)
                if len(kept) >= k:  # keep the K best finished, not the K first
                    kept.remove(min(kept, key=lambda h: h.score))
                kept.append(Hypothesis(tokens, score, lp, att))
                if len(kept) >= k:
                    changed[i] = min(h.score for h in kept)
            if changed:
                worst[list(changed)] = torch.tensor(list(changed.values()), device=device)

        # continue: the K best non-EOS extensions
        cont_scores, cont_pos = top_scores.masked_fill(is_eos, NEG_INF).topk(k, dim=1)
        new_beam = top_beam.gather(1, cont_pos)
        new_tok = top_tok.gather(1, cont_pos)
        # done: at the length limit (all beams were forced to EOS), or K finished and the best live
        # beam, were it to end now, would not beat the worst of them
        has_k = worst > NEG_INF
        if cfg.length_norm != "gnmt":
            has_k = has_k & (worst >= normalise(cont_scores[:, 0], t + 2, cfg))
        # under the GNMT penalty a live beam's normalised score keeps rising with length, so that
        # bound ran every sentence to its length limit (measured: 4.5 sent/s at beam 5); there a
        # sentence stops at K finished hypotheses, as in fairseq
        done = (sent_max <= t) | has_k
        keep_sent = ~done
        if not bool(keep_sent.any()):
            break
        if not bool(keep_sent.all()):
            kept = keep_sent.nonzero().squeeze(1)
            cont_scores, new_beam, new_tok = cont_scores[kept], new_beam[kept], new_tok[kept]
            sentences, sent_max, row_base = sentences[kept], sent_max[kept], row_base[kept]
            worst = worst[kept]
            enc = model.reorder_encoder(enc, (row_base + beam_offsets).view(-1))
        index = (row_base + new_beam).view(-1)
        state = model.reorder_state(state, index)
        history = torch.cat([history.index_select(0, index), new_tok.view(-1, 1)], 1)
        if attn_hist is not None:
            attn_hist = attn_hist.index_select(0, index)
        scores = cont_scores
        prev = new_tok.view(-1)

    out = []
    for hyps in finished:
        if not hyps:  # every extension was forbidden: report an empty translation, not nothing
            hyps.append(Hypothesis([], NEG_INF, NEG_INF, None))
        hyps.sort(key=lambda h: -h.score)
        out.append(hyps[:nbest])
    return out

