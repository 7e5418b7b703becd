"""Comparing two searches that may break a near-tie differently, without trusting one CPU's rounding.

Two engines (PyTorch and CTranslate2), two precisions or two batch compositions compute the same
model with different rounding: fp32 kernels differ between AVX2, AVX-512 and generic code, and padding
changes the order of sums. Where a search's choice is a near-tie, either side may win, and in beam
search one different choice at step t can change the whole output (the pruned prefix was the one
that would have won). So "equal line for line" holds on the machine a test was written on and not on
the next. ``check_same_or_near_tie`` asserts what holds on every CPU instead:

* it replays mtkit's own search on the PyTorch model, one sentence (segment) at a time, and records
  the margin of every decision the search makes: greedy, the best token against the second; beam,
  the K-th extension against the (K+1)-th (which EOS extensions finish), the K-th non-EOS extension
  against the next (which prefixes survive), the stopping rule's comparison and the final ranking;
* a line none of whose decisions was within ``TOLERANCE`` (plus CTranslate2's renormalisation,
  below) must come out identical from both searches; a line with such a near-tie may differ;
* few lines may be near-ties at all (``max_ties``), so that the test keeps its teeth: a broken model
  changes the lines with clear margins, and those must be equal.

CTranslate2 renormalises each step's distribution after removing <pad> and <s> (mtkit masks them
without renormalising), which raises a prefix's score by -log(1 - p(<pad>) - p(<s>)) at each step; the
amount differs between prefixes, so even with exact arithmetic the engines rank prefixes slightly
differently in beam search. The replay bounds that difference by the largest such shift of any row
at each step, summed over the steps so far, and adds it to the tolerance when ``ct2_involved``.
A greedy choice compares tokens after one prefix, which the renormalisation shifts alike.

At the length limit mtkit forces EOS and scores it; CTranslate2 stops there and ranks each beam cut at
the limit without that EOS (docs/export.md). Where the beams cut there, so ranked, outnumber what
CTranslate2 returns ahead of mtkit's best hypothesis (K with a length penalty, else 1), CTranslate2
drops that hypothesis: the replay marks such a beam search as one that may differ with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import torch
from torch import Tensor

import mtkit.decode.search as search_module
from mtkit.config.experiment import DecodingConfig
from mtkit.data.bpe import Bpe
from mtkit.decode.loader import load_model
from mtkit.decode.translation import Translation, normalise
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID

#: fp32 rounding between engines, ISAs and batch compositions: log-probabilities agree to ~1e-5 on
#: these tiny models (test_exported_model_computes_the_same_log_probabilities asserts 1e-4); a choice
#: whose margin is below 1e-3 may go either way, one above it may not.
TOLERANCE = 1e-3


class ForcedScorer:
    """The PyTorch model of ``model_dir`` scoring given translations of given sources (fp32, CPU)."""

    def __init__(self, model_dir: str | Path) -> None:
        self.loaded = load_model(Path(model_dir), device=torch.device("cpu"))
        self.model = self.loaded.model.float().eval()
        self.bpe = Bpe(Path(model_dir) / self.loaded.meta.src_bpe)

    def score(self, src: Sequence[int], tgt: Sequence[int]) -> float:
        """Log-probability of ``tgt`` then EOS given ``src``."""
        with torch.no_grad():
            logits, _ = self.model(torch.tensor([list(src)]), torch.tensor([[BOS_ID, *tgt]]))
        lp = torch.log_softmax(logits.float()[0], -1)
        return float(lp.gather(1, torch.tensor([[*tgt, EOS_ID]]).t()).sum())


class _Margins:
    """Decision margins of one search, each with the renormalisation shift it may have seen."""

    def __init__(self, k: int, cfg: DecodingConfig) -> None:
        self.k, self.cfg = k, cfg
        self.shift = 0.0  # bound on how far CTranslate2's ranking of two rows can differ from mtkit's
        self.margins: list[tuple[float, float]] = []  # (margin, shift bound at that decision)
        self.step: tuple[int, Tensor] | None = None  # the last step's t and its rows forced to EOS
        self.cut_scores: list[float] = []  # beams cut at the limit, ranked as CTranslate2 ranks them
        self.cut_outranks = False  # ... and enough of them rank ahead of mtkit's best (search_margins)

    def add(self, margin: float, shift: float | None = None) -> None:
        if math.isfinite(margin):
            self.margins.append((margin, self.shift if shift is None else shift))

    def near_tie(self, ct2_involved: bool) -> bool:
        if ct2_involved and self.cut_outranks:
            return True
        return any(m <= TOLERANCE + (s if ct2_involved else 0.0) for m, s in self.margins)

    # wrappers of mtkit.decode.search's steps, which record and then do what the original does
    def mask_step(self, original, logits, t, max_len, cfg, history, log_norm=None):
        log_probs = logits if log_norm is None else logits - log_norm.unsqueeze(1)
        removed = (log_probs[:, PAD_ID].exp() + log_probs[:, BOS_ID].exp()).clamp(max=1 - 1e-6)
        self.shift += float(-torch.log1p(-removed).max())
        self.step = (t, (max_len <= t).clone())
        out = original(logits, t, max_len, cfg, history, log_norm)
        if self.k == 1:
            top = out.topk(2, dim=-1).values
            self.add(float((top[:, 0] - top[:, 1]).min()), shift=0.0)  # one prefix: shifted alike
        return out

    def best_extensions(self, original, scores, logits, k, log_norm):
        n, vocab = scores.size(0), logits.size(-1)
        beams = logits.size(0) // n  # 1 at the first step (every beam one row), else K
        if self.step is not None and k > 1 and beams == k:  # beams forced to EOS: CTranslate2 cuts them
            t, forced = self.step
            self.cut_scores += [float(normalise(score, t, self.cfg)) for score in scores.reshape(-1)[forced]
                                if score > search_module.NEG_INF]
        log_probs = (logits - log_norm.unsqueeze(1)).view(n, beams, vocab)
        cand = (scores[:, :beams].unsqueeze(2) + log_probs).view(n, beams * vocab)
        top, idx = cand.topk(min(3 * k + 1, cand.size(1)), dim=1)
        for row, ids in zip(top, idx, strict=True):
            self.add(float(row[k - 1] - row[k]))  # which EOS extensions are among the first K
            alive = row[(ids % vocab) != EOS_ID]
            if alive.numel() > k:
                self.add(float(alive[k - 1] - alive[k]))  # which prefixes continue
        return original(scores, logits, k, log_norm)

    def sentences_done(self, original, b, cont, t, cfg):
        if cfg.length_norm != "gnmt":
            has_k = b.worst > search_module.NEG_INF
            if bool(has_k.any()):
                live = normalise(cont.scores[:, 0], t + 2, cfg)
                self.add(float((b.worst - live)[has_k].abs().min()))
        return original(b, cont, t, cfg)


def search_margins(model, src: list[int], cfg: DecodingConfig, k: int) -> _Margins:
    """Run mtkit's search on one source and record the margin of every decision it makes."""
    record = _Margins(k, cfg)
    with ExitStack() as stack:
        for name, wrapper in (("_mask_step", record.mask_step), ("_best_extensions", record.best_extensions),
                              ("_sentences_done", record.sentences_done)):
            original = getattr(search_module, name)
            stack.enter_context(mock.patch.object(
                search_module, name, lambda *a, _w=wrapper, _o=original: _w(_o, *a)))
        found = search_module.search(model, torch.tensor([src]), cfg, beam_size=k, nbest=k)[0]
    if len(found) > 1:  # the final ranking of the finished hypotheses
        record.add(found[0].score - found[1].score)
    if found and record.cut_scores:
        returned_ahead = k if cfg.length_norm != "none" else 1
        ahead = sum(cut >= found[0].score - TOLERANCE - record.shift for cut in record.cut_scores)
        record.cut_outranks = ahead >= returned_ahead
    return record


def check_same_or_near_tie(translator, lines: Sequence[str], reference: Sequence[Translation],
                           other: Sequence[Translation], max_ties: int,
                           ct2_involved: bool = False) -> list[int]:
    """Assert that every line without a near-tie in its search (``translator``: the torch engine whose
    model and settings made ``reference``) is translated alike by ``other``, and that at most
    ``max_ties`` lines have one; returns the lines that differ (the caller checks the others further).
    """
    assert len(reference) == len(other) == len(lines)
    model, cfg = translator.model, translator.decoding
    k = translator.rows_per_sentence
    ties = [i for i, line in enumerate(lines)
            if any(search_margins(model, seg, cfg, k).near_tie(ct2_involved)
                   for seg in translator.source_segments(line))]
    assert len(ties) <= max_ties, f"{len(ties)} of {len(lines)} lines are near-ties (at most {max_ties})"
    differing = [i for i, (a, b) in enumerate(zip(reference, other, strict=True)) if a.text != b.text]
    unexplained = [i for i in differing if i not in ties]
    assert not unexplained, "lines whose every search decision had a clear margin differ: " + "; ".join(
        f"{i}: {reference[i].text!r} vs {other[i].text!r}" for i in unexplained[:5])
    return differing


def check_texts_same_or_near_tie(translator, lines: Sequence[str], expected: Sequence[str],
                                 got: Sequence[str], max_differing: int) -> None:
    """For many lines translated by the same torch engine in other batches (a server against offline
    translation): at most ``max_differing`` lines may differ, and each must have a near-tie in its
    search. Only the differing lines are replayed, so that thousands of lines stay cheap."""
    assert len(expected) == len(got) == len(lines)
    differing = [i for i, (a, b) in enumerate(zip(expected, got, strict=True)) if a != b]
    assert len(differing) <= max_differing, f"{len(differing)} of {len(lines)} lines differ: " + "; ".join(
        f"{i}: {expected[i]!r} vs {got[i]!r}" for i in differing[:5])
    k = translator.rows_per_sentence
    for i in differing:
        tie = any(search_margins(translator.model, seg, translator.decoding, k).near_tie(False)
                  for seg in translator.source_segments(lines[i]))
        assert tie, f"line {i} differs without a near-tie: {expected[i]!r} vs {got[i]!r}"


__all__ = ["TOLERANCE", "ForcedScorer", "check_same_or_near_tie", "check_texts_same_or_near_tie",
           "search_margins"]
