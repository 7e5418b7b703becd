"""An exponential moving average of the weights, kept while training (``training.ema_decay``).

After every update, for each floating-point parameter and buffer: ema ← ema + (1 − d) · (w − ema), with
d = min(ema_decay, (1 + s) / (10 + s)) at update s, so the average follows the weights closely while they
move fast at the start instead of remembering the random initialisation (the warm-up of TensorFlow's
ExponentialMovingAverage). The average is kept in fp32 on the training device and costs one fused
``lerp`` over the parameters per update. Validation scores it beside the trained weights; the better of
the two is what the step's checkpoint (and so checkpoint_best.pt) holds, and checkpoint_last.pt carries
the average so that a resumed run continues it exactly.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from mtkit.errors import CheckpointError


class WeightAverage:
    """The EMA of `model`'s floating-point state, by name (a tensor shared under two names is averaged
    under each, alike)."""

    def __init__(self, model: nn.Module, decay: float):
        self.decay = decay
        self.tensors = {name: t for name, t in model.state_dict(keep_vars=True).items()
                        if t.is_floating_point()}
        self.average = {name: t.detach().float().clone() for name, t in self.tensors.items()}

    def rate(self, step: int) -> float:
        """The decay used at update `step` (1-based)."""
        return min(self.decay, (1 + step) / (10 + step))

    @torch.no_grad()
    def update(self, step: int) -> None:
        names = list(self.average)
        weight = 1.0 - self.rate(step)
        torch._foreach_lerp_([self.average[n] for n in names],
                             [self.tensors[n].detach().float() for n in names], weight)

    @contextmanager
    def swapped_in(self, model: nn.Module) -> Iterator[None]:
        """The model holds the average inside the block and its own weights again after it."""
        with torch.no_grad():
            saved = {n: t.detach().clone() for n, t in self.tensors.items()}
            for n, t in self.tensors.items():
                t.data.copy_(self.average[n])
        try:
            yield
        finally:
            with torch.no_grad():
                for n, t in self.tensors.items():
                    t.data.copy_(saved[n])

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {n: t.detach().cpu().clone() for n, t in self.average.items()}

    def load_state_dict(self, state: dict[str, torch.Tensor], where: str) -> None:
        if set(state) != set(self.average):
            raise CheckpointError(f"{where}: its weight average does not fit this model")
        for n, t in state.items():
            self.average[n].copy_(t)

    def model_state(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """`model`'s state dict with the average in place of the averaged tensors (for a checkpoint)."""
        state = model.state_dict()
        return {n: (self.average[n].to(t.dtype).clone() if n in self.average else t)
                for n, t in state.items()}

    def all_finite(self) -> bool:
        return all(bool(torch.isfinite(t).all()) for t in self.average.values())
