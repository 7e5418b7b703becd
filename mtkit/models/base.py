"""The one interface between models and everything that drives them.

Training, greedy search, beam search, sampling and scheduled sampling are written once against
``Seq2Seq``; the RNN and the Transformer each implement it. Shapes: B batch, S source length,
T target length, V target vocabulary, H attention heads (1 for the RNN).

Decoding contract::

    enc = model.encode(src)                       # src: LongTensor [B, S], PAD_ID where padded
    state = model.init_state(enc)
    prev = full((B,), BOS_ID)
    for t in range(max_len):
        log_probs, state, attn = model.step(prev, state, enc, need_attention=True)
        # log_probs [B, V] float32; attn [B, H, S] (None when need_attention is False)
        prev = pick(log_probs)
    # beam search: enc = model.reorder_encoder(enc, index); state = model.reorder_state(state, index)

``forward(src, tgt_in)`` is the teacher-forced pass: ``tgt_in`` is BOS followed by the target tokens
(no EOS), and the logits at position t predict token t+1 of the reference (EOS at the end). Running
``step`` over ``tgt_in`` one token at a time gives the same log-probabilities as ``forward``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn


@dataclass
class EncoderOutput:
    """What the decoder attends to. ``src_mask`` is True at real (non-padding) source positions."""

    memory: Tensor  # [B, S, D]
    src_mask: Tensor  # [B, S] bool
    extra: Any = None  # model-specific (e.g. the RNN's final encoder state, precomputed keys)


class Seq2Seq(nn.Module):
    """Base class of mtkit's encoder-decoder models."""

    #: attention heads per layer in the attention returned by step/forward (1 for RNNs)
    num_attention_heads: int = 1

    def encode(self, src: Tensor) -> EncoderOutput:
        raise NotImplementedError

    def init_state(self, enc: EncoderOutput) -> Any:
        """Decoder state before the first step (empty KV cache, or the bridged RNN state)."""
        raise NotImplementedError

    def step(self, prev_tokens: Tensor, state: Any, enc: EncoderOutput, need_attention: bool = False,
             attn_layer: int = -1) -> tuple[Tensor, Any, Tensor | None]:
        """One decoder step: previous token [B] → (log-probs [B, V] in float32, new state,
        encoder-decoder attention of layer ``attn_layer`` per head [B, H, S] if ``need_attention``
        else None). Without attention the fast fused path is used."""
        raise NotImplementedError

    def forward(self, src: Tensor, tgt_in: Tensor, need_attention: bool = False,
                attn_layer: int = -1) -> tuple[Tensor, Tensor | None]:
        """Teacher-forced pass: logits [B, T, V] (unnormalised) and, if asked, the encoder-decoder
        attention of ``attn_layer`` per head [B, H, T, S]."""
        raise NotImplementedError

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        """Select batch rows of the decoder state (beam search reordering)."""
        raise NotImplementedError

    def reorder_encoder(self, enc: EncoderOutput, index: Tensor) -> EncoderOutput:
        extra = enc.extra
        if isinstance(extra, Tensor):
            extra = extra.index_select(0, index)
        elif isinstance(extra, tuple):
            extra = tuple(e.index_select(0, index) if isinstance(e, Tensor) else e for e in extra)
        return EncoderOutput(enc.memory.index_select(0, index), enc.src_mask.index_select(0, index), extra)

    def num_parameters(self) -> int:
        """Distinct trainable parameters (tied weights counted once)."""
        seen: set[int] = set()
        total = 0
        for p in self.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
        return total


def log_softmax_float(logits: Tensor) -> Tensor:
    """Log-probabilities in float32 whatever the autocast dtype (search compares tiny differences)."""
    return torch.log_softmax(logits.float(), dim=-1)
