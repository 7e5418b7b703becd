"""Scheduled sampling (Bengio et al. 2015), two-pass variant (Mihaylova & Martins 2019).

With probability p(step) the decoder is fed the gold previous token, otherwise the model's own
prediction. p decays with the update number s (k = ``ss_k``, floor ``ss_min``):

- ``linear``           p = max(ss_min, 1 − (1 − ss_min) · s / k)      (k = steps to reach ss_min)
- ``exponential``      p = max(ss_min, 0.5 ** (s / k))                 (k = steps to halve p)
- ``inverse_sigmoid``  p = max(ss_min, k / (k + exp(s / k)))

The two-pass form needs nothing but the model's teacher-forced ``forward``, so it serves both the
Transformer and the RNN: pass one runs teacher-forced without gradients (eval mode, no dropout) and
takes the argmax prediction at every position; each position t ≥ 1 of ``tgt_in`` is then replaced by
the prediction made at t − 1 with probability 1 − p; pass two trains on the mixed input.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from mtkit.vocab import PAD_ID


def gold_probability(kind: str, step: int, k: float, floor: float) -> float:
    """Probability of feeding the gold previous token at update `step`."""
    if kind == "none":
        return 1.0
    k = max(k, 1e-9)
    if kind == "linear":
        p = 1.0 - (1.0 - floor) * step / k
    elif kind == "exponential":
        p = 0.5 ** (step / k)
    elif kind == "inverse_sigmoid":
        p = k / (k + math.exp(min(step / k, 700.0)))
    else:
        raise ValueError(f"unknown scheduled sampling decay {kind!r}")
    return max(floor, min(1.0, p))


@torch.no_grad()
def mix_predictions(model: nn.Module, src: Tensor, tgt_in: Tensor, p_gold: float,
                    generator: torch.Generator | None = None) -> Tensor:
    """First pass: a copy of `tgt_in` where each non-BOS, non-PAD position holds the model's own
    previous prediction with probability 1 − p_gold."""
    if p_gold >= 1.0:
        return tgt_in
    was_training = model.training
    model.eval()
    try:
        logits, _ = model(src, tgt_in)
    finally:
        model.train(was_training)
    predicted = logits.argmax(dim=-1)  # position t predicts the token at t + 1
    use_model = torch.rand(tgt_in.shape, device=tgt_in.device, generator=generator) >= p_gold
    use_model[:, 0] = False
    use_model &= tgt_in != PAD_ID
    mixed = tgt_in.clone()
    mixed[:, 1:] = torch.where(use_model[:, 1:], predicted[:, :-1], tgt_in[:, 1:])
    return mixed
