"""Training losses: label-smoothed cross-entropy, the multi-head diversity penalty, and the per-token
log-probabilities that minimum risk training sums into sequence probabilities.

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
[N, V] tensors, which made the loss several times slower on CPU (the output layer's [N, V] logits
are the largest tensors of a training step).

In training the loss goes further: ``projected_label_smoothed_nll`` takes the decoder's output
features and the output projection's weight, and never holds the whole [N, V] logits. It walks the
non-PAD target positions in blocks of ``LOSS_BLOCK_ROWS``; for each block it computes the logits,
the loss and dL/dlogits, and at once multiplies dL/dlogits back through the projection (dL/dfeatures
and dL/dweight), so the backward only scales two small saved gradients. The arithmetic is the
unblocked loss's (the same matrix products, nothing recomputed); what changes is memory: a batch's
whole logits, their float32 copy and softmax are large enough that glibc maps them afresh every
step; the blocks are a fraction of that, reused from one block to the next, and run faster (see
``LOSS_BLOCK_ROWS``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from mtkit.vocab import PAD_ID

LOSS_BLOCK_ROWS = 512
"""Target positions per block of ``projected_label_smoothed_nll``: the fastest of the sizes measured
(smaller and larger blocks, and the whole logits, were slower; docs/results.md). A block's float32
logits at a vocabulary of some thousands stay under glibc's ceiling for blocks served from the heap
(32 MiB), so the blocks reuse memory instead of mapping fresh pages."""


def _smoothed_loss(z: Tensor, target: Tensor, epsilon: float, pad_id: int,
                   keep: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
    """Summed label-smoothed loss, summed NLL and the softmax of float32 logits ``z`` [N, V].

    p is computed once (the fast softmax kernel; log_softmax is several times slower on CPU) and
    log-sum-exp is recovered exactly from its largest entry, lse = max(z) − log(max(p)) (max(p) ≥ 1/V,
    so no underflow). ``keep`` [N] (float, 0 at PAD targets) or None when every row counts."""
    vocab = z.size(-1)
    probs = torch.softmax(z, dim=-1)
    lse = z.amax(dim=-1) - probs.amax(dim=-1).log()
    nll = lse - z.gather(1, target.unsqueeze(1)).squeeze(1)
    if keep is not None:
        nll = nll * keep
    nll_sum = nll.sum()
    if epsilon <= 0:
        return nll_sum.clone(), nll_sum, probs
    eps_other = epsilon / (vocab - 2)
    smooth = (vocab - 1) * lse - (z.sum(dim=-1) - z[:, pad_id])  # Σ_{v≠PAD} −log p(v)
    if keep is not None:
        smooth = smooth * keep
    return (1.0 - epsilon - eps_other) * nll_sum + eps_other * smooth.sum(), nll_sum, probs


def _gradient_in_place(probs: Tensor, target: Tensor, epsilon: float, pad_id: int) -> Tensor:
    """dL/dz = p − q (q sums to 1), built in ``probs``, which is used up."""
    eps_other = epsilon / (probs.size(-1) - 2) if epsilon > 0 else 0.0
    grad = probs
    if eps_other:
        grad.sub_(eps_other)
        grad[:, pad_id] += eps_other
    gold = torch.full((grad.size(0), 1), -(1.0 - epsilon - eps_other), dtype=grad.dtype,
                      device=grad.device)
    return grad.scatter_add_(1, target.unsqueeze(1), gold)


class _LabelSmoothedNLL(torch.autograd.Function):
    """The loss of given logits: forward and backward share one softmax buffer, which the backward
    turns into the gradient in place."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, epsilon: float,
                pad_id: int) -> tuple[Tensor, Tensor]:
        keep = (target != pad_id).float()
        loss, nll_sum, probs = _smoothed_loss(logits.float(), target, epsilon, pad_id, keep)
        ctx.save_for_backward(probs, target, keep)
        ctx.epsilon, ctx.pad_id, ctx.dtype = epsilon, pad_id, logits.dtype
        ctx.mark_non_differentiable(nll_sum)
        return loss, nll_sum

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor | None, None, None, None]:
        probs, target, keep = ctx.saved_tensors
        grad = _gradient_in_place(probs, target, ctx.epsilon, ctx.pad_id)
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


def _blocked_loss(h: Tensor, w: Tensor, target: Tensor, epsilon: float, pad_id: int, block_rows: int,
                  grad_features: Tensor | None, grad_weight: Tensor | None,
                  keep: Tensor | None = None, bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Summed loss and NLL of ``h @ wᵀ`` [N, V], ``block_rows`` rows at a time; writes dL/dh into
    ``grad_features`` [N, D] and adds dL/dw into ``grad_weight`` [V, D] where they are given.
    ``keep`` [N] (float, 0 at PAD targets) when PAD rows are still among the N."""
    loss = torch.zeros((), dtype=torch.float32, device=h.device)
    nll_sum = torch.zeros((), dtype=torch.float32, device=h.device)
    for start in range(0, h.size(0), block_rows):
        rows = slice(start, start + block_rows)
        block, block_target = h[rows], target[rows]
        block_keep = keep[rows] if keep is not None else None
        block_loss, block_nll, probs = _smoothed_loss(_logits(block, w, bias), block_target, epsilon, pad_id,
                                                      keep=block_keep)
        loss += block_loss
        nll_sum += block_nll
        if grad_features is None and grad_weight is None:
            continue
        grad = _gradient_in_place(probs, block_target, epsilon, pad_id)
        if block_keep is not None:
            grad.mul_(block_keep.unsqueeze(1))
        grad = grad.to(h.dtype)
        if grad_features is not None:
            grad_features[rows] = grad @ w
        if grad_weight is not None:
            grad_weight += grad.t() @ block
    return loss, nll_sum


def _logits(h: Tensor, w: Tensor, bias: Tensor | None) -> Tensor:
    """float32 logits of a block: ``h @ wᵀ`` in the products' dtype, plus the model's fixed output bias
    (``Seq2Seq.logit_bias``: MarianMT's final_logits_bias) in float32."""
    z = (h @ w.t()).float()
    return z if bias is None else z + bias.float()


class _ProjectedLabelSmoothedNLL(torch.autograd.Function):
    """Loss of ``features @ weightᵀ`` block by block, with the gradients computed in the forward.

    The block products run in ``dtype`` (bfloat16/float16 under mixed precision, as the output layer
    would under autocast); the loss, the softmax and the summed weight gradient are float32. The
    gradients are those of a loss scaled by 1 and are multiplied by the incoming gradient in the
    backward (the fp16 grad scaler's scale included), as the chain rule allows for a scalar loss."""

    @staticmethod
    def forward(ctx: Any, features: Tensor, weight: Tensor, target: Tensor, epsilon: float, pad_id: int,
                dtype: torch.dtype, block_rows: int, keep: Tensor | None,
                bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
        h, w = features.detach().to(dtype), weight.detach().to(dtype)
        features_learn, weight_learns = ctx.needs_input_grad[:2]  # a frozen output layer learns nothing
        grad_features = torch.empty(h.shape, dtype=torch.float32, device=h.device) if features_learn else None
        grad_weight = torch.zeros(w.shape, dtype=torch.float32, device=w.device) if weight_learns else None
        loss, nll_sum = _blocked_loss(h, w, target, epsilon, pad_id, block_rows, grad_features, grad_weight,
                                      keep, bias)
        ctx.save_for_backward(grad_features, grad_weight)
        ctx.dtypes = features.dtype, weight.dtype
        ctx.mark_non_differentiable(nll_sum)
        return loss, nll_sum

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, _grad_nll: Tensor
                 ) -> tuple[Tensor | None, Tensor | None, None, None, None, None, None, None, None]:
        grad_features, grad_weight = ctx.saved_tensors
        features_dtype, weight_dtype = ctx.dtypes
        if grad_features is not None:
            grad_features = (grad_features * grad_loss).to(features_dtype)
        if grad_weight is not None:
            grad_weight = (grad_weight * grad_loss).to(weight_dtype)
        return grad_features, grad_weight, None, None, None, None, None, None, None


def projected_label_smoothed_nll(features: Tensor, weight: Tensor, target: Tensor, epsilon: float,
                                 dtype: torch.dtype | None = None, pad_id: int = PAD_ID,
                                 block_rows: int = LOSS_BLOCK_ROWS, drop_padding: bool = True,
                                 bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """``label_smoothed_nll(features @ weightᵀ, target, epsilon)`` without the [N, V] logits.

    features: [..., D] (the decoder's output before the output projection), weight: [V, D] (the
    projection's, tied or not), target: [...]; ``dtype`` is the products' dtype (None: autocast's where
    it is on, as for the output layer itself, else the weight's). PAD positions are dropped before the
    blocks, so padding costs no output-layer work; ``drop_padding=False`` keeps them (weighted 0)
    instead, because finding them costs a read back to the host, which a GPU must not wait for (and a
    CUDA graph cannot hold). Under ``torch.no_grad`` (validation) the blocks compute the loss only.
    ``bias`` [V]: the model's fixed output bias (``Seq2Seq.logit_bias``), or None."""
    vocab, dim = weight.shape
    if dtype is None:  # the dtype F.linear would compute in here: autocast's, if it is on
        kind = features.device.type
        dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else weight.dtype
    if epsilon > 0 and vocab <= 2:
        raise ValueError("label smoothing needs a vocabulary of more than 2 entries")
    target = target.reshape(-1)
    features = features.reshape(-1, dim)
    keep = None
    if drop_padding:
        rows = (target != pad_id).nonzero().squeeze(1)
        features, target = features.index_select(0, rows), target.index_select(0, rows)
    else:
        keep = (target != pad_id).float()
    epsilon = float(epsilon)
    if not torch.is_grad_enabled():  # validation: the loss alone
        h, w = features.to(dtype), weight.to(dtype)
        return _blocked_loss(h, w, target, epsilon, pad_id, block_rows, None, None, keep, bias)
    return _ProjectedLabelSmoothedNLL.apply(features, weight, target, epsilon, pad_id, dtype, block_rows,
                                            keep, bias)



class _ProjectedTokenLogProbs(torch.autograd.Function):
    """log p(target_n) of ``features @ weightᵀ`` per row n, block by block; the backward computes each
    block's logits again (nothing of size [N, V] is kept between the passes)."""

    @staticmethod
    def forward(ctx: Any, features: Tensor, weight: Tensor, target: Tensor, dtype: torch.dtype,
                block_rows: int, bias: Tensor | None = None) -> Tensor:
        h, w = features.detach().to(dtype), weight.detach().to(dtype)
        out = torch.empty(h.size(0), dtype=torch.float32, device=h.device)
        lse = torch.empty_like(out)
        for start in range(0, h.size(0), block_rows):
            rows = slice(start, start + block_rows)
            z = _logits(h[rows], w, bias)
            probs = torch.softmax(z, dim=-1)  # the fast kernel; lse recovered as in _smoothed_loss
            lse[rows] = z.amax(dim=-1) - probs.amax(dim=-1).log()
            out[rows] = z.gather(1, target[rows].unsqueeze(1)).squeeze(1) - lse[rows]
        ctx.save_for_backward(h, w, target, lse)
        ctx.dtypes, ctx.block_rows, ctx.bias = (features.dtype, weight.dtype), block_rows, bias
        return out

    @staticmethod
    def backward(ctx: Any, grad_out: Tensor) -> tuple[Tensor | None, Tensor | None, None, None, None, None]:
        h, w, target, lse = ctx.saved_tensors
        features_learn, weight_learns = ctx.needs_input_grad[:2]
        grad_h = torch.empty(h.shape, dtype=torch.float32, device=h.device) if features_learn else None
        grad_w = torch.zeros(w.shape, dtype=torch.float32, device=w.device) if weight_learns else None
        for start in range(0, h.size(0), ctx.block_rows):
            rows = slice(start, start + ctx.block_rows)
            g = grad_out[rows].float()
            # d log p(y) / dz = onehot(y) − softmax(z), times the incoming gradient of the row
            grad = torch.exp(_logits(h[rows], w, ctx.bias) - lse[rows].unsqueeze(1)).mul_(-g.unsqueeze(1))
            grad.scatter_add_(1, target[rows].unsqueeze(1), g.unsqueeze(1))
            grad = grad.to(h.dtype)
            if grad_h is not None:
                grad_h[rows] = grad @ w
            if grad_w is not None:
                grad_w += grad.t() @ h[rows]
        features_dtype, weight_dtype = ctx.dtypes
        return (grad_h.to(features_dtype) if grad_h is not None else None,
                grad_w.to(weight_dtype) if grad_w is not None else None, None, None, None, None)


def projected_token_log_probs(features: Tensor, weight: Tensor, target: Tensor,
                              block_rows: int = LOSS_BLOCK_ROWS, drop_padding: bool = True,
                              bias: Tensor | None = None) -> Tensor:
    """log p(target) at every position of ``target`` [...] (float32, 0 at PAD), differentiable, from
    the decoder's ``features`` [..., D] and the output projection's ``weight`` [V, D], without the
    [N, V] logits (the sequence log-probabilities of minimum risk training, `mtkit.train.mrt`).
    ``drop_padding`` and ``bias`` as in ``projected_label_smoothed_nll``."""
    shape, dim = target.shape, weight.size(1)
    kind = features.device.type
    dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else weight.dtype
    target, features = target.reshape(-1), features.reshape(-1, dim)
    keep = target != PAD_ID
    if not drop_padding:
        out = _ProjectedTokenLogProbs.apply(features, weight, target, dtype, block_rows, bias)
        return (out * keep).view(shape)
    rows = keep.nonzero().squeeze(1)
    out = _ProjectedTokenLogProbs.apply(features.index_select(0, rows), weight, target.index_select(0, rows),
                                        dtype, block_rows, bias)
    return torch.zeros(target.shape, dtype=out.dtype, device=out.device).index_copy(0, rows, out).view(shape)

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
