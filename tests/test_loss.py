"""Label-smoothed cross-entropy and the diversity penalty against their explicit formulas."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mtkit.train.loss import diversity_penalty, label_smoothed_nll
from mtkit.vocab import PAD_ID


def _explicit_loss(logits: torch.Tensor, target: torch.Tensor, eps: float) -> torch.Tensor:
    """−Σ_v q(v) log p(v) with q(y) = 1 − ε, q(PAD) = 0, q(other) = ε / (V − 2), summed over non-PAD."""
    vocab = logits.size(-1)
    log_p = torch.log_softmax(logits.double(), dim=-1)
    total = torch.zeros((), dtype=torch.float64)
    for row, y in zip(log_p, target.tolist(), strict=True):
        if y == PAD_ID:
            continue
        q = torch.full((vocab,), eps / (vocab - 2), dtype=torch.float64)
        q[PAD_ID] = 0.0
        q[y] = 1.0 - eps
        assert abs(float(q.sum()) - 1.0) < 1e-12
        total -= (q * row).sum()
    return total


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothing_matches_the_explicit_formula(eps):
    torch.manual_seed(0)
    logits = (3 * torch.randn(11, 9)).requires_grad_()
    target = torch.tensor([4, 5, PAD_ID, 8, 1, 3, 2, PAD_ID, 6, 7, 4])
    loss, nll = label_smoothed_nll(logits, target, eps)
    reference = _explicit_loss(logits, target, eps)
    assert loss.item() == pytest.approx(reference.item(), rel=1e-5)
    keep = target != PAD_ID
    plain_nll = F.cross_entropy(logits[keep], target[keep], reduction="sum")
    assert nll.item() == pytest.approx(plain_nll.item(), rel=1e-5)
    # the hand-written backward equals autograd through the explicit formula
    loss.backward()
    explicit_logits = logits.detach().clone().requires_grad_()
    _explicit_loss(explicit_logits, target, eps).backward()
    assert torch.allclose(logits.grad, explicit_logits.grad.float(), atol=1e-6)
    assert torch.all(logits.grad[~keep] == 0)


def test_padding_positions_do_not_count():
    torch.manual_seed(1)
    logits = torch.randn(2, 5, 12)
    target = torch.randint(4, 12, (2, 5))
    base, _ = label_smoothed_nll(logits, target, 0.1)
    padded_target = torch.cat([target, torch.full((2, 3), PAD_ID)], dim=1)
    padded_logits = torch.cat([logits, 100 * torch.randn(2, 3, 12)], dim=1)
    padded, _ = label_smoothed_nll(padded_logits, padded_target, 0.1)
    assert padded.item() == pytest.approx(base.item(), rel=1e-6)


def test_smoothing_puts_no_mass_on_pad():
    """The optimum of the smoothed loss is p = q: PAD gets probability → 0, other tokens ε/(V−2)."""
    vocab, eps = 6, 0.2
    logits = torch.zeros(1, vocab, requires_grad=True)
    target = torch.tensor([4])
    opt = torch.optim.Adam([logits], lr=0.1)
    for _ in range(800):
        opt.zero_grad()
        label_smoothed_nll(logits, target, eps)[0].backward()
        opt.step()
    p = torch.softmax(logits.detach(), -1)[0]
    assert p[4].item() == pytest.approx(1 - eps, abs=1e-3)
    assert p[PAD_ID].item() < 0.02
    for v in (1, 2, 3, 5):
        assert p[v].item() == pytest.approx(eps / (vocab - 2), abs=2e-3)


def test_bf16_logits_give_float32_loss_and_bf16_gradient():
    torch.manual_seed(2)
    logits = torch.randn(7, 10).bfloat16().requires_grad_()
    target = torch.randint(4, 10, (7,))
    loss, _ = label_smoothed_nll(logits, target, 0.1)
    assert loss.dtype == torch.float32
    loss.backward()
    assert logits.grad.dtype == torch.bfloat16


def _explicit_penalty(attn: torch.Tensor, tgt_mask: torch.Tensor) -> float:
    total = 0.0
    batch, heads, tlen, _ = attn.shape
    for b in range(batch):
        for t in range(tlen):
            if not tgt_mask[b, t]:
                continue
            a = attn[b, :, t, :]
            total += float(((a @ a.T - torch.eye(heads)) ** 2).sum())
    return total


def test_diversity_penalty_matches_its_formula():
    torch.manual_seed(3)
    attn = torch.softmax(torch.randn(2, 3, 4, 5), dim=-1)
    tgt_mask = torch.tensor([[True, True, True, False], [True, False, False, False]])
    expected = _explicit_penalty(attn, tgt_mask)
    assert diversity_penalty(attn, tgt_mask).item() == pytest.approx(expected, rel=1e-5)


def test_diversity_penalty_is_zero_for_heads_on_distinct_positions():
    attn = torch.zeros(1, 3, 1, 4)
    for h in range(3):
        attn[0, h, 0, h] = 1.0
    assert diversity_penalty(attn, torch.ones(1, 1, dtype=torch.bool)).item() == 0.0
    attn[0, 1, 0] = attn[0, 0, 0]  # two heads on the same position are penalised
    assert diversity_penalty(attn, torch.ones(1, 1, dtype=torch.bool)).item() == pytest.approx(2.0)
