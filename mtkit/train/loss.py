"""Training losses: label-smoothed cross-entropy and the multi-head diversity penalty.

Label smoothing (Szegedy et al. 2016). For a target position with gold token y over a vocabulary of
V entries, the model's distribution p is compared with the smoothed target q:

    q(y) = 1 − ε,   q(v) = ε / (V − 2) for every v ∉ {y, PAD},   q(PAD) = 0

    loss_t = −Σ_v q(v) · log p(v)
           = (1 − ε − ε/(V−2)) · nll_t + ε/(V−2) · Σ_{v ≠ PAD} −log p(v),   nll_t = −log p(y)

PAD is left out of the smoothing distribution because it is never a correct output: spreading mass
onto it would teach the model to predict padding. Positions whose gold token is PAD are ignored.
The trainer divides the summed loss by the number of non-padding target tokens of the whole update
(all accumulated batches and all ranks), so the gradient is that of the per-token mean.

The sums are computed from the logits with one logsumexp, without materialising a [N, V]
log-probability tensor: Σ_{v≠PAD} log p(v) = Σ_{v≠PAD} logit_v − (V − 1) · logsumexp(logits).
"""

from __future__ import annotations

import torch
from torch import Tensor

from mtkit.bpe import PAD_ID


def label_smoothed_nll(logits: Tensor, target: Tensor, epsilon: float,
                       pad_id: int = PAD_ID) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss and summed NLL (both float32 scalars) over non-PAD targets.

    logits: [..., V] (any float dtype; computed in float32), target: [...] token ids.
    """
    vocab = logits.size(-1)
    logits = logits.reshape(-1, vocab).float()
    target = target.reshape(-1)
    # a float mask rather than boolean indexing: no device→host sync, no copy of the logits
    keep = (target != pad_id).to(logits.dtype)
    lse = torch.logsumexp(logits, dim=-1)
    nll = (lse - logits.gather(1, target.unsqueeze(1)).squeeze(1)) * keep
    nll_sum = nll.sum()
    if epsilon <= 0:
        return nll_sum, nll_sum.detach()
    if vocab <= 2:
        raise ValueError("label smoothing needs a vocabulary of more than 2 entries")
    eps_other = epsilon / (vocab - 2)
    smooth = (vocab - 1) * lse - (logits.sum(dim=-1) - logits[:, pad_id])  # Σ_{v≠PAD} −log p(v)
    loss = (1.0 - epsilon - eps_other) * nll_sum + eps_other * (smooth * keep).sum()
    return loss, nll_sum.detach()


def diversity_penalty(attn: Tensor, tgt_mask: Tensor, src_mask: Tensor | None = None) -> Tensor:
    """Summed ‖A Aᵀ − I‖²_F over non-padding target positions (Lin et al. 2017).

    attn: [B, H, T, S] attention of the H heads; for each (b, t), A is the [H, S] matrix of the heads'
    attention rows. The penalty is small when each head puts its mass on a different source position
    (rows near one-hot and mutually orthogonal). tgt_mask: [B, T] True at real target positions.
    """
    if src_mask is not None:
        attn = attn.masked_fill(~src_mask[:, None, None, :], 0.0)
    a = attn.float().permute(0, 2, 1, 3)  # [B, T, H, S]
    gram = a @ a.transpose(-1, -2)  # [B, T, H, H]
    eye = torch.eye(gram.size(-1), device=gram.device, dtype=gram.dtype)
    per_position = (gram - eye).pow(2).sum(dim=(-1, -2))  # [B, T]
    return (per_position * tgt_mask.to(per_position.dtype)).sum()
