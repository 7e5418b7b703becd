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

Each family returns its own ``EncoderOutput`` subclass, a dataclass whose fields name what the decoder
reads (precomputed keys, cross-attention keys and values, …) rather than positions in a tuple. Because
every tensor in it has the batch in dim 0, one generic ``select_rows`` reorders all of them: a family
adds fields, not reordering code.

``forward(src, tgt_in)`` is the teacher-forced pass: ``tgt_in`` is BOS followed by the target tokens
(no EOS), and the logits at position t predict token t+1 of the reference (EOS at the end). Running
``step`` over ``tgt_in`` one token at a time gives the same log-probabilities as ``forward``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import Tensor, nn

from mtkit.vocab import PAD_ID

T = TypeVar("T")


@dataclass(eq=False)
class EncoderOutput:
    """What the decoder attends to. ``src_mask`` is True at real (non-padding) source positions.

    Families subclass it with named fields for what they precompute once per sentence; every tensor
    field must have the batch in dim 0 (``select_rows`` relies on it)."""

    memory: Tensor  # [B, S, D]
    src_mask: Tensor  # [B, S] bool


_PLAIN = (int, float, bool, str, type(None))


def select_rows(obj: T, index: Tensor) -> T:
    """``obj`` with only the batch rows ``index`` (dim 0) of every tensor in it, in that order.

    Recurses into dataclasses (rebuilt with ``dataclasses.replace``), lists and tuples; keeps None and
    plain scalars. A tensor reachable twice is selected once and stays shared. Any other type raises
    TypeError, so a new kind of field cannot silently escape beam reordering."""
    return _select(obj, index, {})


def _select(obj: Any, index: Tensor, done: dict[int, Tensor]) -> Any:
    if isinstance(obj, Tensor):
        if id(obj) not in done:
            done[id(obj)] = obj.index_select(0, index)
        return done[id(obj)]
    if isinstance(obj, _PLAIN):
        return obj
    if isinstance(obj, list):
        return [_select(o, index, done) for o in obj]
    if isinstance(obj, tuple):
        return tuple(_select(o, index, done) for o in obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        changes = {f.name: _select(getattr(obj, f.name), index, done)
                   for f in dataclasses.fields(obj) if f.init}
        return dataclasses.replace(obj, **changes)
    raise TypeError(f"select_rows cannot select batch rows of a {type(obj).__name__}")


def embedding(vocab: int, dim: int) -> nn.Embedding:
    """Token embedding of both families: N(0, 1/dim) weights (the Transformer scales them by √dim
    in its forward pass, giving unit scale) and a zero PAD row that receives no gradient."""
    emb = nn.Embedding(vocab, dim, padding_idx=PAD_ID)
    nn.init.normal_(emb.weight, std=dim ** -0.5)
    with torch.no_grad():
        emb.weight[PAD_ID].zero_()
    return emb


class Seq2Seq(nn.Module):
    """Base class of mtkit's encoder-decoder models."""

    #: attention heads per layer in the attention returned by step/forward (1 for RNNs)
    num_attention_heads: int = 1
    #: ``step`` also takes an encoder output of n rows for n·K decoder rows (each sentence's K beams
    #: consecutive), so beam search keeps one copy of a sentence's encoder output instead of K
    beams_share_encoder: bool = False

    def encode(self, src: Tensor) -> EncoderOutput:
        raise NotImplementedError

    def init_state(self, enc: EncoderOutput) -> Any:
        """Decoder state before the first step (empty KV cache, or the bridged RNN state)."""
        raise NotImplementedError

    def step(self, prev_tokens: Tensor, state: Any, enc: EncoderOutput, need_attention: bool = False,
             attn_layer: int = -1, normalize: bool = True) -> tuple[Tensor, Any, Tensor | None]:
        """One decoder step: previous token [B] → (log-probs [B, V] in float32, new state,
        encoder-decoder attention of layer ``attn_layer`` per head [B, H, S] if ``need_attention``
        else None). Without attention the fast fused path is used. ``enc`` has B rows, or B / K
        where the model ``beams_share_encoder``.

        ``normalize=False`` may return the float32 logits instead (a model that cannot, an ensemble,
        still returns log-probabilities): a greedy step that only takes the argmax, or a search that
        normalises only the few scores it keeps, skips a log-softmax over the whole vocabulary."""
        raise NotImplementedError

    def forward(self, src: Tensor, tgt_in: Tensor, need_attention: bool = False,
                attn_layer: int = -1, project: bool = True, source_rows: Tensor | None = None
                ) -> tuple[Tensor, Tensor | None]:
        """Teacher-forced pass: logits [B, T, V] (unnormalised) and, if asked, the encoder-decoder
        attention of ``attn_layer`` per head [B, H, T, S]. ``project=False`` returns the features
        [B, T, D] that ``output_proj`` (every model's last layer, bias-free but for ``logit_bias``) turns
        into logits:
        training computes the loss from them block by block (``train/loss.py``).

        ``source_rows`` [B] (optional) names, for each row of ``tgt_in``, the row of ``src`` it
        translates: minimum risk training teacher-forces a reference and several candidates of one
        source and encodes that source once instead of once per row (the rows then share the
        encoder's dropout draws). Without it, row i of ``tgt_in`` translates row i of ``src``."""
        raise NotImplementedError

    def logit_bias(self) -> Tensor | None:
        """The fixed bias [V] added to the output projection's logits (``model.output_bias``), or None:
        training computes the logits from ``output_proj.weight`` itself and adds it there too."""
        return None

    def reorder_state(self, state: Any, index: Tensor) -> Any:
        """Select batch rows of the decoder state (beam search reordering). The default suits states
        whose tensors all have the batch in dim 0; a state with the batch elsewhere (an RNN's hidden
        state [L, B, H]) needs its own."""
        return select_rows(state, index)

    def reorder_encoder(self, enc: EncoderOutput, index: Tensor) -> EncoderOutput:
        """Select batch rows of the encoder output: the same for every family (see ``select_rows``)."""
        return select_rows(enc, index)

    def num_parameters(self) -> int:
        """Distinct trainable parameters (tied weights counted once)."""
        seen: set[int] = set()
        total = 0
        for p in self.parameters():
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
        return total


def log_softmax_float(logits: Tensor, normalize: bool = True) -> Tensor:
    """Log-probabilities in float32 whatever the autocast dtype (search compares tiny differences);
    with ``normalize=False`` the float32 logits themselves (see ``Seq2Seq.step``)."""
    return torch.log_softmax(logits.float(), dim=-1) if normalize else logits.float()
