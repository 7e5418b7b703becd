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

The loss has a hand-written backward, dL/dlogits = (softmax(logits) − q) · keep, computed in place in
the forward's softmax buffer: autograd through log_softmax/gather/sum would allocate and add several
[N, V] tensors, which made the loss 4× slower on CPU (the output layer's [N, V] logits are the
largest tensors of a training step).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from mtkit.vocab import PAD_ID


class _LabelSmoothedNLL(torch.autograd.Function):
    """Forward and backward share one softmax buffer: p is computed once (the fast softmax kernel;
    log_softmax is several times slower on CPU), log-sum-exp is recovered exactly from its largest
    entry, lse = max(z) − log(max(p)) (max(p) ≥ 1/V, so no underflow), and the backward turns p into
    the gradient in place."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, epsilon: float,
                pad_id: int) -> tuple[Tensor, Tensor]:
        vocab = logits.size(-1)
        z = logits.float()
        probs = torch.softmax(z, dim=-1)
        lse = z.amax(dim=-1) - probs.amax(dim=-1).log()
        keep = (target != pad_id).float()
        nll_sum = ((lse - z.gather(1, target.unsqueeze(1)).squeeze(1)) * keep).sum()
        if epsilon > 0:
            eps_other = epsilon / (vocab - 2)
            smooth = (vocab - 1) * lse - (z.sum(dim=-1) - z[:, pad_id])  # Σ_{v≠PAD} −log p(v)
            loss = (1.0 - epsilon - eps_other) * nll_sum + eps_other * (smooth * keep).sum()
        else:
            loss = nll_sum.clone()
        ctx.save_for_backward(probs, target, keep)
        ctx.epsilon, ctx.pad_id, ctx.dtype = epsilon, pad_id, logits.dtype
        ctx.mark_non_differentiable(nll_sum)
        return loss, nll_sum

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor | None, None, None, None]:
        probs, target, keep = ctx.saved_tensors
        epsilon, pad_id = ctx.epsilon, ctx.pad_id
        eps_other = epsilon / (probs.size(-1) - 2) if epsilon > 0 else 0.0
        grad = probs  # used once: dL/dz = p − q (q sums to 1), built in place
        if eps_other:
            grad.sub_(eps_other)
            grad[:, pad_id] += eps_other
        gold = torch.full((grad.size(0), 1), -(1.0 - epsilon - eps_other), dtype=grad.dtype,
                          device=grad.device)
        grad.scatter_add_(1, target.unsqueeze(1), gold)
        grad.mul_((keep * grad_loss).unsqueeze(1))
        return grad.to(ctx.dtype), None, None, None


def label_smoothed_nll(logits: Tensor, target: Tensor, epsilon: float,
                       pad_id: int = PAD_ID) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed loss (differentiable) and summed NLL (detached), float32 scalars,
    over the non-PAD positions of `target`. logits: [..., V] in any float dtype; target: [...]."""
    vocab = logits.size(-1)
    if epsilon > 0 and vocab <= 2:
        raise ValueError("label smoothing needs a vocabulary of more than 2 entries")
    return _LabelSmoothedNLL.apply(logits.reshape(-1, vocab), target.reshape(-1), float(epsilon), pad_id)


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
