"""Comparing two searches that may break a near-tie differently, without trusting one CPU's rounding.

Two engines (PyTorch and CTranslate2), two precisions or two batch compositions compute the same
model with different rounding: fp32 kernels differ between AVX2, AVX-512 and the generic code paths,
and padding changes the order of sums. Where two candidates score within that noise of each other,
either may win, so equal output line for line holds on the machine a test was written on and not on
the next. These checks assert what holds on every CPU instead:

* a line both searches translate alike passes (and its scores must agree, in the caller);
* a line they translate differently must be a near-tie: re-scored by the PyTorch model (forced
  decoding, fp32, one sentence at a time), the other search's hypothesis is within a stated
  tolerance of the reference's. Greedy search: at the first token where they part, the two tokens'
  log-probabilities (same prefix) differ by at most ``GREEDY_TOLERANCE``. Beam search: the other's
  whole hypothesis scores at most ``BEAM_TOLERANCE`` below the reference's, plus the renormalisation
  CTranslate2 applies (below);
* few lines may differ at all (``max_differing``), so a broken model, which changes nearly every
  line, fails even if each of its differences happened to look like a tie.

CTranslate2 renormalises each step's distribution after removing <pad> and <s> (mtkit masks them
without renormalising), which raises every token's log-probability by -log(1 - p(<pad>) - p(<s>)) at
that step; the amount differs between prefixes, so the two engines rank different prefixes by
slightly different scores even with exact arithmetic. That shift is computed here from the PyTorch
model for both hypotheses and added to the beam tolerance when one side is the ct2 engine.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import torch

from mtkit.bpe import Bpe
from mtkit.config import DecodingConfig
from mtkit.loader import load_model
from mtkit.segment import clean_line, split_sentences
from mtkit.translation import Translation, normalise
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID

#: fp32 rounding between engines, ISAs and batch compositions: log-probabilities agree to ~1e-5 on
#: these tiny models (test_exported_model_computes_the_same_log_probabilities asserts 1e-4); a token
#: choice that flips must have been within 1e-3 of its rival.
GREEDY_TOLERANCE = 1e-3
#: the same noise summed over a hypothesis of up to ~40 tokens, in the normalised score
BEAM_TOLERANCE = 5e-3


class ForcedScorer:
    """The PyTorch model of ``model_dir`` scoring given translations of given sources (fp32, CPU)."""

    def __init__(self, model_dir: str | Path) -> None:
        self.loaded = load_model(Path(model_dir), device=torch.device("cpu"))
        self.model = self.loaded.model.float().eval()
        self.bpe = Bpe(Path(model_dir) / self.loaded.meta.src_bpe)

    def step_log_probs(self, src: Sequence[int], tgt: Sequence[int]) -> torch.Tensor:
        """log p(· | source, tgt[:t]) for t = 0..len(tgt): [len(tgt) + 1, V]."""
        with torch.no_grad():
            logits, _ = self.model(torch.tensor([list(src)]), torch.tensor([[BOS_ID, *tgt]]))
        return torch.log_softmax(logits.float()[0], -1)

    def score(self, src: Sequence[int], tgt: Sequence[int]) -> tuple[float, float]:
        """(log-probability of ``tgt`` then EOS, CTranslate2's renormalisation shift on it)."""
        lp = self.step_log_probs(src, tgt)
        picked = lp.gather(1, torch.tensor([[*tgt, EOS_ID]]).t()).sum().item()
        removed = (lp[:, PAD_ID].exp() + lp[:, BOS_ID].exp()).clamp(max=1 - 1e-6)
        return picked, float(-torch.log1p(-removed).sum())


def check_same_or_near_tie(model_dir: str | Path, lines: Sequence[str], reference: Sequence[Translation],
                           other: Sequence[Translation], decoding: DecodingConfig, beam_size: int,
                           max_differing: int, ct2_involved: bool = False) -> list[int]:
    """Assert that ``other`` translates each line as ``reference`` does or differs by a near-tie (see
    the module docstring); returns the indices of the lines that differ (for the caller's checks).

    A differing line must be searched whole (one sentence within the input limit), so that the
    hypothesis can be re-scored against its source; tests keep such lines short."""
    assert len(reference) == len(other) == len(lines)
    differing = [i for i, (a, b) in enumerate(zip(reference, other, strict=True)) if a.text != b.text]
    assert len(differing) <= max_differing, (
        f"{len(differing)} of {len(lines)} lines differ (at most {max_differing} near-ties expected): "
        + "; ".join(f"{i}: {reference[i].text!r} vs {other[i].text!r}" for i in differing[:5]))
    if not differing:
        return []
    scorer = ForcedScorer(model_dir)
    for i in differing:
        text = clean_line(lines[i])
        assert len(split_sentences(text)) == 1, f"line {i} holds several sentences: keep such lines short"
        src = scorer.bpe.encode_ids([text])[0]
        a, b = reference[i].hypotheses[0].token_ids, other[i].hypotheses[0].token_ids
        if beam_size == 1:
            _check_greedy_tie(scorer, i, src, a, b)
        else:
            _check_beam_tie(scorer, i, src, a, b, decoding, ct2_involved)
    return differing


def _check_greedy_tie(scorer: ForcedScorer, line: int, src: list[int], a: list[int], b: list[int]) -> None:
    """Greedy search takes the best token at each step: where the two outputs part, both tokens were
    (nearly) the best after the same prefix. CTranslate2's renormalisation shifts every token of one
    step alike, so it cannot flip a greedy choice; only rounding can."""
    a_eos, b_eos = [*a, EOS_ID], [*b, EOS_ID]
    t = next(t for t in range(min(len(a_eos), len(b_eos))) if a_eos[t] != b_eos[t])
    lp = scorer.step_log_probs(src, a[:t])[t]
    gap = abs(float(lp[a_eos[t]] - lp[b_eos[t]]))
    assert gap <= GREEDY_TOLERANCE, (f"line {line}: greedy outputs part at token {t} with log-probabilities "
                                     f"{gap:.2e} apart (> {GREEDY_TOLERANCE}): not a near-tie")


def _check_beam_tie(scorer: ForcedScorer, line: int, src: list[int], a: list[int], b: list[int],
                    decoding: DecodingConfig, ct2_involved: bool) -> None:
    """The other search's best must score (under the PyTorch model, normalised as the search ranks)
    within the tolerance of the reference's best; a better one is a search error of the reference's,
    not a fault of the other's."""
    (lp_a, shift_a), (lp_b, shift_b) = scorer.score(src, a), scorer.score(src, b)
    score_a = float(normalise(lp_a, len(a) + 1, decoding))
    score_b = float(normalise(lp_b, len(b) + 1, decoding))
    shift = 0.0
    if ct2_involved:
        shift = (float(normalise(shift_a, len(a) + 1, decoding))
                 + float(normalise(shift_b, len(b) + 1, decoding)))
    allowed = BEAM_TOLERANCE + shift
    assert score_b >= score_a - allowed, (
        f"line {line}: the other search's best scores {score_b:.4f} against the reference's {score_a:.4f} "
        f"(allowed {allowed:.4f}): not a near-tie")
    assert math.isfinite(score_b)


__all__ = ["BEAM_TOLERANCE", "GREEDY_TOLERANCE", "ForcedScorer", "check_same_or_near_tie"]
