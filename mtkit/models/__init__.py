"""Models: build one from the typed `model` config section.

``build_model(cfg, src_vocab_size, tgt_vocab_size, joint_vocab)`` returns a ``Seq2Seq``
(see base.py for the interface shared by both families).
"""

from __future__ import annotations

from mtkit.config.experiment import ModelConfig
from mtkit.models.base import EncoderOutput, Seq2Seq

__all__ = ["EncoderOutput", "Seq2Seq", "build_model"]


def build_model(cfg: ModelConfig, src_vocab_size: int, tgt_vocab_size: int,
                joint_vocab: bool = False) -> Seq2Seq:
    if cfg.arch == "transformer":
        from mtkit.models.transformer import Transformer

        if cfg.source_bos or cfg.decoder_bos:  # fairseq's multilingual models (M2M100, NLLB)
            from mtkit.models.prefixed import PrefixedTransformer

            return PrefixedTransformer(cfg, src_vocab_size, tgt_vocab_size, joint_vocab)
        return Transformer(cfg, src_vocab_size, tgt_vocab_size, joint_vocab)
    from mtkit.models.rnn import RNNSeq2Seq

    return RNNSeq2Seq(cfg, src_vocab_size, tgt_vocab_size, joint_vocab)
