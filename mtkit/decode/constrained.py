"""Lexically constrained beam search: every constraint (a run of target subwords, e.g. a glossary
term) appears in the output — dynamic beam allocation (Post & Vilar 2018).

Each hypothesis tracks which constraints it has met and the one it is in the middle of (a run of
subwords must be contiguous: a hypothesis that leaves a constraint half-way loses that progress).
At every step the candidates of a sentence are (1) the 2K best extensions of its K beams, (2) each
beam's best extension, and (3) each beam's extensions by the next subword of a constraint (the
continuation of the one it is in, else the first subword of any it has not met). The K beams are
then shared out among *banks*, one per number of constraint subwords met (0 … M), so that
hypotheses which have met more constraints are not crowded out by likelier ones that met fewer:
each bank gets K / (M + 1) beams, best first, and beams a bank cannot fill go to the best remaining
candidates. With ``hard`` constraints a hypothesis may end only when it has met them all, and once
the subwords it still needs fill the steps left before its length limit, it may only continue them
— so every translation contains every constraint. The length limit is raised by the constraints'
length. Soft constraints (``hard=False``) only add ``bonus`` to a hypothesis's ranking score per
constraint subword it has met, and may be left out.

The model steps all sentences' beams together, as `mtkit.decode.search` does; the choice of beams is made
per sentence in Python over a few candidates each (the scores are gathered on the device first).
A beam narrower than the number of constraints + 1 is widened to it (greedy search included).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from mtkit.config.experiment import DecodingConfig
from mtkit.decode.search import (
    NEG_INF,
    _append_attention,
    _attention_rows,
    _length_limits,
    _mask_step,
    start_tokens,
)
from mtkit.decode.translation import Hypothesis, normalise
from mtkit.models.base import Seq2Seq
from mtkit.vocab import EOS_ID

Constraints = list[list[int]]  # one sentence's constraints: subword sequences


@dataclass(frozen=True)
class _Progress:
    """Which constraints a hypothesis has met, (index, subwords matched) of the one it is in, and
    whether it has just completed one (its next subword must then start a new word)."""

    done: frozenset[int] = frozenset()
    current: tuple[int, int] | None = None
    boundary: bool = False

    def met(self, constraints: Constraints) -> int:
        return sum(len(constraints[i]) for i in self.done) + (self.current[1] if self.current else 0)

    def next_tokens(self, constraints: Constraints) -> list[int]:
        if self.current is not None:
            i, pos = self.current
            return [constraints[i][pos]]
        return list(dict.fromkeys(c[0] for i, c in enumerate(constraints) if i not in self.done))

    def after(self, token: int, constraints: Constraints) -> _Progress:
        if self.current is not None:
            i, pos = self.current
            if constraints[i][pos] == token:
                return self._advanced(i, pos + 1, constraints)
        for i, c in enumerate(constraints):  # leaving a constraint half-way loses it; start another?
            if i not in self.done and c[0] == token:
                return _Progress(self.done, None)._advanced(i, 1, constraints)
        return _Progress(self.done, None)

    def _advanced(self, i: int, pos: int, constraints: Constraints) -> _Progress:
        if pos == len(constraints[i]):
            return _Progress(self.done | {i}, None, boundary=True)
        return _Progress(self.done, (i, pos))


@dataclass
class _Beam:
    tokens: list[int]
    log_prob: float
    progress: _Progress


def _dead() -> _Beam:
    return _Beam([], NEG_INF, _Progress())


def constrained_search(model: Seq2Seq, src: Tensor, cfg: DecodingConfig, constraints: list[Constraints], *,
                       beam_size: int, nbest: int = 1, hard: bool = True, bonus: float = 0.0,
                       need_attention: bool = False, attn_layer: int = -1,
                       word_pieces: Tensor | None = None, start: Tensor | None = None
                       ) -> list[list[Hypothesis]]:
    """Translate ``src`` [B, S] so that sentence b's output contains each of ``constraints[b]``.
    ``word_pieces`` [V] bool marks the subwords that continue the word before them (no leading ▁):
    none may follow a completed constraint, so that a term stays a whole word ("Papierkorb" and not
    "Papierkorbs"). ``start`` [B]: each sentence's first decoder input (BOS where None), as in
    `mtkit.decode.search.search`."""
    batch, device = src.size(0), src.device
    k = max(beam_size, nbest, 1 + max((len(c) for c in constraints), default=0))
    totals = [sum(len(c) for c in cs) for cs in constraints]
    with torch.inference_mode():
        enc = model.encode(src)
        src_mask = enc.src_mask.cpu()
        sent_max = (_length_limits(src, cfg).cpu() + torch.tensor(totals)).tolist()
        expand = torch.arange(batch, device=device).repeat_interleave(k)
        enc = model.reorder_encoder(enc, expand)
        state = model.init_state(enc)
        active = list(range(batch))  # sentences still searching, in row-block order
        beams = [[_Beam([], 0.0, _Progress())] + [_dead() for _ in range(k - 1)] for _ in range(batch)]
        finished: list[list[Hypothesis]] = [[] for _ in range(batch)]
        prev = start_tokens(src, start).repeat_interleave(k)
        history = torch.empty((batch * k, 0), dtype=torch.long, device=device)
        attn_hist: Tensor | None = None
        for t in range(max(sent_max) + 1):
            log_probs, state, attn = model.step(prev, state, enc, need_attention, attn_layer)
            row_max = torch.tensor([sent_max[b] for b in active], device=device).repeat_interleave(k)
            log_probs = _mask_step(log_probs.float(), t, row_max, cfg, history)
            if need_attention:
                attn_hist = _append_attention(attn_hist, attn)
            chosen_rows, chosen_tokens, still = [], [], []
            cands = _candidates(log_probs, active, beams, constraints, sent_max, t, k, hard, word_pieces)
            for j, b in enumerate(active):
                picked = _select(cands[j], beams[b], constraints[b], k, hard, bonus, t >= sent_max[b])
                for beam_i, _, lp, progress in picked.finished:
                    tokens = beams[b][beam_i].tokens
                    score = float(normalise(lp, len(tokens) + 1, cfg)) + bonus * progress.met(constraints[b])
                    att = None
                    if attn_hist is not None:
                        att = _attention_rows(attn_hist[j * k + beam_i], src_mask[b])
                    finished[b].append(Hypothesis(list(tokens), score, lp, att))
                if len(finished[b]) >= k or t >= sent_max[b] or not picked.beams:
                    continue
                still.append((j, b))
                new = [_Beam(beams[b][i].tokens + [tok], lp, prog) for i, tok, lp, prog in picked.beams]
                rows = [j * k + i for i, _, _, _ in picked.beams]
                while len(new) < k:  # too few candidates: fill with dead copies of the first
                    new.append(_dead())
                    rows.append(rows[0])
                beams[b] = new
                chosen_rows += rows
                chosen_tokens += [beam.tokens[-1] if beam.tokens else EOS_ID for beam in new]
            if not still:
                break
            index = torch.tensor(chosen_rows, device=device)
            state = model.reorder_state(state, index)
            enc = model.reorder_encoder(enc, index)
            prev = torch.tensor(chosen_tokens, device=device)
            history = torch.cat([history.index_select(0, index), prev.unsqueeze(1)], 1)
            if attn_hist is not None:
                attn_hist = attn_hist.index_select(0, index)
            active = [b for _, b in still]
    return [_best(hyps, nbest, beams[b], cfg) for b, hyps in enumerate(finished)]


def _candidates(log_probs: Tensor, active: list[int], beams: list[list[_Beam]],
                constraints: list[Constraints], sent_max: list[int], t: int, k: int,
                hard: bool, word_pieces: Tensor | None) -> list[list[tuple[float, int, int]]]:
    """Per active sentence, its candidate extensions (cumulative log-prob, beam, token)."""
    vocab = log_probs.size(-1)
    rows = [beam for b in active for beam in beams[b]]
    cumulative = log_probs + torch.tensor([r.log_prob for r in rows], device=log_probs.device).unsqueeze(1)
    wanted: list[tuple[int, int]] = []  # (row, token) of constraint continuations
    for r, beam in enumerate(rows):
        if beam.log_prob == NEG_INF:
            continue
        cs = constraints[active[r // k]]
        if beam.progress.boundary and word_pieces is not None:
            cumulative[r].masked_fill_(word_pieces, NEG_INF)
        wanted += [(r, tok) for tok in beam.progress.next_tokens(cs)]
        if hard and cs:
            if len(beam.progress.done) < len(cs):
                cumulative[r, EOS_ID] = NEG_INF  # may end only with every constraint met
            need = sum(len(c) for c in cs) - beam.progress.met(cs)
            if need > 0 and sent_max[active[r // k]] - t <= need:
                keep = beam.progress.next_tokens(cs)  # no room left for anything else
                saved = cumulative[r, keep].clone()
                cumulative[r].fill_(NEG_INF)
                cumulative[r, keep] = saved
    forced = torch.tensor(wanted, dtype=torch.long, device=cumulative.device).view(-1, 2)
    forced_scores = cumulative[forced[:, 0], forced[:, 1]].tolist() if wanted else []
    per_sentence = cumulative.view(len(active), k * vocab)
    top_scores, top_idx = per_sentence.topk(min(2 * k, k * vocab), dim=1)
    best_scores, best_tok = cumulative.max(dim=1)
    top_scores, top_idx = top_scores.tolist(), top_idx.tolist()
    best_scores, best_tok = best_scores.tolist(), best_tok.tolist()
    out: list[list[tuple[float, int, int]]] = []
    for j in range(len(active)):
        cands = [(s, i // vocab, i % vocab) for s, i in zip(top_scores[j], top_idx[j], strict=True)]
        cands += [(best_scores[j * k + i], i, best_tok[j * k + i]) for i in range(k)]
        out.append(cands)
    for (r, tok), s in zip(wanted, forced_scores, strict=True):
        out[r // k].append((s, r % k, tok))
    return out


@dataclass
class _Picked:
    beams: list[tuple[int, int, float, _Progress]]  # (beam, token, log-prob, progress)
    finished: list[tuple[int, int, float, _Progress]]


def _select(cands: list[tuple[float, int, int]], beams: list[_Beam], cs: Constraints, k: int, hard: bool,
            bonus: float, at_limit: bool) -> _Picked:
    """Finish the EOS candidates that may end; share K beams among the banks (see the docstring)."""
    seen: set[tuple[int, int]] = set()
    scored = []
    for score, beam_i, tok in sorted(cands, key=lambda c: -c[0]):
        if score == NEG_INF or (beam_i, tok) in seen:
            continue
        seen.add((beam_i, tok))
        progress = beams[beam_i].progress if tok == EOS_ID else beams[beam_i].progress.after(tok, cs)
        scored.append((beam_i, tok, score, progress))
    finished = [c for c in scored[:k] if c[1] == EOS_ID]  # ends that rank among the K best candidates
    going = [] if at_limit else [c for c in scored if c[1] != EOS_ID]
    if not hard or not cs:
        going.sort(key=lambda c: -(c[2] + bonus * c[3].met(cs)))
        return _Picked(going[:k], finished)
    total = sum(len(c) for c in cs)
    banks: dict[int, list] = {}
    for c in going:
        banks.setdefault(c[3].met(cs), []).append(c)
    size, extra = divmod(k, total + 1)
    picked, rest = [], []
    for level in range(total, -1, -1):  # the fullest bank first: it takes the remainder too
        quota = size + (1 if total - level < extra else 0)
        members = banks.get(level, [])
        picked += members[:quota]
        rest += members[quota:]
    rest.sort(key=lambda c: -c[2])
    picked += rest[: k - len(picked)]
    picked.sort(key=lambda c: -c[2])
    return _Picked(picked, finished)


def _best(hyps: list[Hypothesis], nbest: int, live: list[_Beam], cfg: DecodingConfig) -> list[Hypothesis]:
    if not hyps:  # nothing could end (all extensions forbidden): the best live beam, rather than nothing
        beam = max(live, key=lambda b: b.log_prob)
        hyps = [Hypothesis(beam.tokens, float(normalise(beam.log_prob, len(beam.tokens) + 1, cfg)),
                           beam.log_prob, None)]
    return sorted(hyps, key=lambda h: -h.score)[:nbest]
