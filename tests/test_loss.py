"""Label-smoothed cross-entropy and the diversity penalty against their explicit formulas."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from mtkit.train.loss import diversity_penalty, label_smoothed_nll, projected_label_smoothed_nll
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


def _projection_case(seed: int = 4, vocab: int = 23, dim: int = 16):
    torch.manual_seed(seed)
    features = torch.randn(3, 37, dim).requires_grad_()
    weight = (0.5 * torch.randn(vocab, dim)).requires_grad_()
    target = torch.randint(1, vocab, (3, 37))
    target[:, 30:] = PAD_ID
    target[1, 5] = PAD_ID
    return features, weight, target


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("block_rows", [1, 16, 1024])
@pytest.mark.parametrize("drop_padding", [True, False])
def test_projected_loss_equals_the_loss_of_the_logits(eps, block_rows, drop_padding):
    """Loss, NLL and both gradients as if the whole logits were computed (blocks that divide the rows
    or not, one block for all), and the gradient scales with the incoming one (grad scaler); PAD rows
    dropped before the blocks (CPU) or kept with weight 0 (GPU: no read back to find them)."""
    features, weight, target = _projection_case()
    loss, nll = label_smoothed_nll(features @ weight.t(), target, eps)
    (3 * loss).backward()
    expected = features.grad.clone(), weight.grad.clone()
    features.grad = weight.grad = None
    blocked_loss, blocked_nll = projected_label_smoothed_nll(features, weight, target, eps,
                                                             block_rows=block_rows, drop_padding=drop_padding)
    (3 * blocked_loss).backward()
    assert blocked_loss.item() == pytest.approx(loss.item(), rel=1e-5)
    assert blocked_nll.item() == pytest.approx(nll.item(), rel=1e-5)
    assert torch.allclose(features.grad, expected[0], atol=1e-5)
    assert torch.allclose(weight.grad, expected[1], atol=1e-5)
    assert torch.all(features.grad[target == PAD_ID] == 0)
    with torch.no_grad():  # validation's path
        alone, _ = projected_label_smoothed_nll(features, weight, target, eps, block_rows=block_rows,
                                                drop_padding=drop_padding)
    assert alone.item() == pytest.approx(loss.item(), rel=1e-5)


def test_projected_loss_adds_to_a_tied_weights_other_gradient():
    """A tied output layer is also the target embedding: both uses' gradients reach the weight."""
    features, weight, target = _projection_case(seed=5)
    extra = weight[target.clamp(min=1)].sum()
    loss, _ = label_smoothed_nll(features @ weight.t(), target, 0.1)
    (loss + extra).backward()
    expected = weight.grad.clone()
    weight.grad = None
    blocked, _ = projected_label_smoothed_nll(features, weight, target, 0.1, block_rows=8)
    (blocked + weight[target.clamp(min=1)].sum()).backward()
    assert torch.allclose(weight.grad, expected, atol=1e-5)


def test_projected_loss_in_bf16_is_close_to_autocast_logits():
    features, weight, target = _projection_case(seed=6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = F.linear(features, weight)
    loss, _ = label_smoothed_nll(logits, target, 0.1)
    loss.backward()
    expected = features.grad.clone(), weight.grad.clone()
    features.grad = weight.grad = None
    blocked, _ = projected_label_smoothed_nll(features, weight, target, 0.1, dtype=torch.bfloat16,
                                              block_rows=16)
    blocked.backward()
    assert blocked.dtype == torch.float32 and weight.grad.dtype == features.grad.dtype == torch.float32
    assert blocked.item() == pytest.approx(loss.item(), rel=1e-3)
    assert torch.allclose(features.grad, expected[0], atol=0.02, rtol=0.02)
    assert torch.allclose(weight.grad, expected[1], atol=0.05, rtol=0.02)


def test_frozen_output_layer_gets_no_gradient():
    features, weight, target = _projection_case(seed=7)
    weight.requires_grad_(False)
    loss, _ = projected_label_smoothed_nll(features, weight, target, 0.1, block_rows=16)
    loss.backward()
    assert weight.grad is None and features.grad is not None


def test_projected_loss_without_grad_computes_the_loss_alone(monkeypatch):
    features, weight, target = _projection_case(seed=9)
    expected = projected_label_smoothed_nll(features, weight, target, 0.1, block_rows=16)
    import mtkit.train.loss as loss_module

    def no_gradient(*args):
        raise AssertionError("a gradient was computed under no_grad")

    monkeypatch.setattr(loss_module, "_gradient_in_place", no_gradient)
    with torch.no_grad():
        loss, nll = projected_label_smoothed_nll(features, weight, target, 0.1, block_rows=16)
    assert loss.item() == pytest.approx(expected[0].item())
    assert nll.item() == pytest.approx(expected[1].item())


def test_projected_loss_computes_in_autocasts_dtype():
    features, weight, target = _projection_case(seed=10)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under_autocast, _ = projected_label_smoothed_nll(features, weight, target, 0.0)
    explicit, _ = projected_label_smoothed_nll(features, weight, target, 0.0, dtype=torch.bfloat16)
    plain, _ = projected_label_smoothed_nll(features, weight, target, 0.0)
    assert under_autocast.item() == explicit.item() != plain.item()


class _LargestTensor(TorchDispatchMode):
    """Records the most elements of any tensor an operation produces."""

    def __init__(self) -> None:
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_projected_loss_never_holds_the_whole_logits():
    features, weight, target = _projection_case(seed=8, vocab=300, dim=8)  # logits ≫ features
    rows, vocab, block_rows = int((target != PAD_ID).sum()), weight.size(0), 16
    with _LargestTensor() as seen:
        loss, _ = projected_label_smoothed_nll(features, weight, target, 0.1, block_rows=block_rows)
        loss.backward()
    assert seen.largest <= block_rows * vocab < rows * vocab
    with _LargestTensor() as seen:  # the check sees the unblocked loss's logits
        label_smoothed_nll(features @ weight.t(), target, 0.1)[0].backward()
    assert seen.largest >= rows * vocab


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
