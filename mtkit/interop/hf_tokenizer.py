"""A fast tokenizer (``tokenizer.json``) of an mtkit sentencepiece model, for models that do not append
``</s>`` to the source (``model.source_eos: false``, every recipe's): MarianTokenizer always appends it.

Built by `transformers`' own converter (``SpmConverter.build_tokenizer_from_spm_proto``: the model's
normaliser, BPE merges ranked by piece score, as ``SentencePieceProcessor.encode`` segments), from the
model file read at the protocol-buffer wire level (`mtkit.interop.spm_proto`: no protobuf package needed).
The ids are the sentencepiece model's, which are mtkit's (pad 0, unk 1, <s> 2, </s> 3). A post-processor
appends ``</s>`` only where the model expects it (``source_eos``).
"""

from __future__ import annotations

import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from mtkit.errors import DataError
from mtkit.interop.spm_proto import proto_fields, read_pieces, read_varint

# NormalizerSpec (ModelProto field 3): precompiled_charsmap 2, add_dummy_prefix 3, remove_extra_whitespaces 4,
# escape_whitespaces 5; TrainerSpec (field 2): model_type 3, byte_fallback 35, unk_id 40, unk_piece 45
_UNIGRAM = 1
_NORM_FLAGS = {3: "add_dummy_prefix", 4: "remove_extra_whitespaces", 5: "escape_whitespaces"}


def _proto(data: bytes, where: str) -> SimpleNamespace:
    """The parts of a sentencepiece ModelProto the converter reads, as attributes."""
    pieces = read_pieces(data, where)
    trainer = SimpleNamespace(model_type=_UNIGRAM, byte_fallback=False, unk_id=0, unk_piece="<unk>")
    norm = SimpleNamespace(precompiled_charsmap=b"", add_dummy_prefix=True, remove_extra_whitespaces=True,
                           escape_whitespaces=True)
    try:
        for field, wire, raw in proto_fields(data):
            if field == 2 and wire == 2:
                for sub, sub_wire, value in proto_fields(raw):
                    if sub_wire == 0 and sub in (3, 35, 40):
                        number = read_varint(value, 0)[0]
                        key = {3: "model_type", 35: "byte_fallback", 40: "unk_id"}[sub]
                        setattr(trainer, key, bool(number) if sub == 35 else number)
                    elif sub == 45 and sub_wire == 2:
                        trainer.unk_piece = value.decode("utf-8")
            elif field == 3 and wire == 2:
                for sub, sub_wire, value in proto_fields(raw):
                    if sub == 2 and sub_wire == 2:
                        norm.precompiled_charsmap = value
                    elif sub in (3, 4, 5) and sub_wire == 0:
                        setattr(norm, _NORM_FLAGS[sub], bool(read_varint(value, 0)[0]))
    except (ValueError, UnicodeDecodeError, struct.error) as exc:
        raise DataError(f"{where}: not a sentencepiece model ({exc})") from None
    return SimpleNamespace(pieces=pieces, trainer_spec=trainer, normalizer_spec=norm)


def fast_tokenizer(spm_file: Path, source_eos: bool, tags: list[str] = ()) -> Any:
    """A ``PreTrainedTokenizerFast`` of ``spm_file`` (mtkit's ids) that appends ``</s>`` iff
    ``source_eos``; ``save_pretrained`` writes ``tokenizer.json`` and ``tokenizer_config.json``.
    ``tags``: a multilingual model's language tags (``<2de>``), special tokens with their own ids, so
    ``"<2de> text"`` is the tag's id and then exactly the ids of ``"text"`` (sentencepiece itself would
    put a ``▁`` before the tag and segment the text after it with the space), and decoding skips them."""
    from tokenizers import AddedToken, processors
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import SpmConverter

    proto = _proto(spm_file.read_bytes(), str(spm_file))
    if proto.trainer_spec.model_type == _UNIGRAM:
        vocab: Any = [(p.piece, p.score) for p in proto.pieces]
    else:
        vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    tk = SpmConverter.build_tokenizer_from_spm_proto(proto, vocab)
    if tk is None:
        raise DataError(f"{spm_file}: a sentencepiece model transformers cannot convert")
    if tags:
        tk.add_special_tokens([AddedToken(t, special=True, normalized=False, rstrip=True) for t in tags])
    if source_eos:
        tk.post_processor = processors.TemplateProcessing(single="$A </s>", pair="$A $B </s>",
                                                          special_tokens=[("</s>", 3)])
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="</s>", bos_token="<s>", model_max_length=1024)


__all__ = ["fast_tokenizer"]
