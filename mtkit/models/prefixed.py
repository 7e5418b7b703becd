"""A Transformer that reads BOS before the source (``model.source_bos``) and before its first decoder
input (``model.decoder_bos``): fairseq's multilingual models (M2M100, NLLB) put the source language's
token before every source sentence and start the decoder from ``</s>`` followed by the target
language's token. `mtkit import-hf` gives the source BOS the source language's embedding and the target
BOS ``</s>``'s, and makes the target language a decoder-side tag (`mtkit.data.corpora`), so the search
starts from the tag as it does for any decoder-tagged model, and this class reads BOS before it.

Built on `mtkit.models.transformer.Transformer` without changing its computation: the source gets one
more token in front (its attention column is dropped, so alignments see the sentence's own tokens),
the teacher-forced decoder input one more token (its output dropped), and the first search step is two
steps of the cached decoder (BOS, then the start token), so positions and the key/value cache are the
plain model's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from mtkit.models.transformer import Transformer, TransformerEncoderOutput, TransformerState
from mtkit.vocab import BOS_ID


class PrefixedTransformer(Transformer):
    """`Transformer` with BOS read first on the source side, the decoder side, or both."""

    def _encode(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if not self.cfg.source_bos:
            return super()._encode(src)
        memory, src_mask, attn_mask = super()._encode(F.pad(src, (1, 0), value=BOS_ID))
        return memory, src_mask[:, 1:], attn_mask

    def _source_columns(self, weights: Tensor, src_mask: Tensor) -> Tensor:
        if self.cfg.source_bos:  # the BOS column first: the plain model's columns follow it
            weights = weights[..., 1:]
        return super()._source_columns(weights, src_mask)

    def forward(self, src: Tensor, tgt_in: Tensor, need_attention: bool = False,
                attn_layer: int = -1, project: bool = True, source_rows: Tensor | None = None
                ) -> tuple[Tensor, Tensor | None]:
        if not self.cfg.decoder_bos:
            return super().forward(src, tgt_in, need_attention, attn_layer, project, source_rows)
        out, attention = super().forward(src, F.pad(tgt_in, (1, 0), value=BOS_ID), need_attention,
                                         attn_layer, project, source_rows)
        return out[:, 1:], (attention[..., 1:, :] if attention is not None else None)

    def step(self, prev_tokens: Tensor, state: TransformerState, enc: TransformerEncoderOutput,
             need_attention: bool = False, attn_layer: int = -1, normalize: bool = True
             ) -> tuple[Tensor, TransformerState, Tensor | None]:
        if self.cfg.decoder_bos and state.length == 0:
            _, state, _ = super().step(torch.full_like(prev_tokens, BOS_ID), state, enc)
        return super().step(prev_tokens, state, enc, need_attention, attn_layer, normalize)


__all__ = ["PrefixedTransformer"]
