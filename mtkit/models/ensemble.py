"""Several models decoding as one: an ``Ensemble`` is itself a ``Seq2Seq``, so greedy, beam and
sampling search run over it unchanged."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from mtkit.errors import ConfigError
from mtkit.models.base import EncoderOutput, Seq2Seq


@dataclass(eq=False)
class EnsembleEncoderOutput(EncoderOutput):
    """Each member's own encoder output; ``memory`` and ``src_mask`` are the first member's (the
    source mask is the same for all). ``select_rows`` reorders the members through its recursion."""

    members: list[EncoderOutput]


class Ensemble(Seq2Seq):
    """Several models decoding together: each keeps its own encoder output and state; the step's
    log-probabilities are the average of theirs, renormalised (a normalised geometric mean).
    Attention is the average over models when their head counts agree, else the first model's."""

    def __init__(self, models: list[Seq2Seq]):
        super().__init__()
        if not models:
            raise ConfigError("an ensemble needs at least one model")
        self.members = nn.ModuleList(models)
        self.num_attention_heads = models[0].num_attention_heads

    def encode(self, src: Tensor) -> EnsembleEncoderOutput:
        encs = [m.encode(src) for m in self.members]
        return EnsembleEncoderOutput(encs[0].memory, encs[0].src_mask, members=encs)

    def init_state(self, enc: EnsembleEncoderOutput) -> Any:
        return [m.init_state(e) for m, e in zip(self.members, enc.members, strict=True)]

    def step(self, prev_tokens: Tensor, state: Any, enc: EnsembleEncoderOutput, need_attention: bool = False,
             attn_layer: int = -1, normalize: bool = True) -> tuple[Tensor, Any, Tensor | None]:
        """The members' mean probability, as log-probabilities whatever ``normalize`` says."""
        outs = [m.step(prev_tokens, s, e, need_attention, attn_layer)
                for m, s, e in zip(self.members, state, enc.members, strict=True)]
        log_probs = torch.stack([o[0] for o in outs]).mean(0).log_softmax(-1)
        attn = None
        if need_attention:
            attns = [o[2] for o in outs]
            same = all(a is not None and a.shape == attns[0].shape for a in attns)
            attn = torch.stack(attns).mean(0) if same else attns[0]
        return log_probs, [o[1] for o in outs], attn

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        return [m.reorder_state(s, index) for m, s in zip(self.members, state, strict=True)]
