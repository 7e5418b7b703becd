"""Which tokens a search step may choose beyond the model's own distribution: n-gram repeats banned
(``decoding.no_repeat_ngram``) and the shape of a sampling distribution (temperature, top-k, top-p).
Kept apart from `mtkit.decode.search`, which applies them at every step of greedy, beam and sampling
search alike.
"""

from __future__ import annotations

import torch
from torch import Tensor

from mtkit.config.experiment import DecodingConfig
from mtkit.vocab import PAD_ID

NEG_INF = float("-inf")


def block_repeats(log_probs: Tensor, history: Tensor, n: int) -> None:
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


def filter_logits(log_probs: Tensor, cfg: DecodingConfig) -> Tensor:
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


__all__ = ["NEG_INF", "block_repeats", "filter_logits"]
