"""M2M100 and NLLB-200 (``M2M100ForConditionalGeneration``) in terms of mtkit's Transformer: the
architecture settings, the vocabulary order and the language tokens. `mtkit.interop.hf` reads the files
and writes the model directory; the weights go through `mtkit.interop.marian` (the layers are named as
MarianMT's) and `mtkit.interop.pegasus` (the final LayerNorms).

Read from `transformers`' ``modeling_m2m_100.py``: pre-norm layers with biases everywhere, a final
LayerNorm on the encoder and on the decoder, token embeddings × √d under ``scale_embedding`` and one
shared matrix (``model.shared``, tied to ``lm_head`` under ``tie_word_embeddings``), no
``final_logits_bias``, fairseq's sinusoids (``model.sinusoid_layout: fairseq``: other frequencies than
MarianMT's, positions numbered from ``pad_token_id + 1`` = 2, which the layout builds in, so the pad id
must be fairseq's 1).

Language tokens: M2M100Tokenizer reads ``vocab.json`` and ``sentencepiece.bpe.model`` and numbers its
language tokens (``__en__``) after the vocabulary, in transformers' ``FAIRSEQ_LANGUAGE_CODES`` order;
NLLB's ``tokenizer.json`` holds its vocabulary (the sentencepiece ids shifted by fairseq's offset) and
its language codes (``eng_Latn``) as added special tokens. A source is ``__en__`` + tokens + ``</s>``,
and `generate` starts from ``</s>`` (decoder_start_token_id) and forces the target language's token
(forced_bos_token_id). mtkit: the language tokens take its tag names (``<2de>``) and the target language
is a decoder-side tag (``--tgt-lang``); ``model.decoder_bos`` reads BOS (``</s>``'s row in the target
embedding) before the tag; ``model.source_bos`` puts BOS before the source, whose row in the source
embedding is the source language's token (one language per imported directory, the tokenizer's
``src_lang``); ``model.source_eos`` appends ``</s>``. The two embeddings then differ in that one row,
so they are two matrices. Every other row (``<s>``, ``<mask>``, fairseq's made-up words, rows past the
tokenizer's) keeps a piece of its own that sentencepiece never produces and decodes as nothing.
"""

from __future__ import annotations

import re
from typing import Any

from mtkit.data.corpora import LANGUAGE, tag
from mtkit.errors import ConfigError
from mtkit.interop.marian import SPECIAL_NAMES, VocabOrder, layer_settings

#: an NLLB language code (``eng_Latn``) among a tokenizer's added tokens
NLLB_CODE = re.compile(r"[a-z]{3}_[A-Z][a-z]{3}\Z")
#: fairseq's pad id: the sinusoids number positions from it + 1
FAIRSEQ_PAD = 1


def is_m2m100(hf: dict[str, Any]) -> bool:
    """Whether ``config.json`` is an M2M100 (or NLLB-200) model's."""
    return hf.get("model_type") == "m2m_100" or "M2M100ForConditionalGeneration" in (hf.get("architectures")
                                                                                    or [])


def model_settings(hf: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``model`` section of an M2M100 ``config.json``; a setting mtkit cannot hold is refused."""
    layers = layer_settings(hf, where, activation="relu", attention_dropout=0.1, scale_embedding=True)
    if hf.get("pad_token_id", FAIRSEQ_PAD) != FAIRSEQ_PAD:
        raise ConfigError(f"{where}: pad_token_id={hf.get('pad_token_id')}: M2M100's positions start at "
                          "pad_token_id + 1, and mtkit's fairseq sinusoids at 2 (fairseq's pad id 1)")
    if int(hf.get("d_model", 1024)) < 4:
        raise ConfigError(f"{where}: d_model={hf.get('d_model')} is too small for fairseq's sinusoids")
    return {**layers, "norm": "pre", "sinusoid_layout": "fairseq", "share_all_embeddings": False,
            "source_bos": True, "decoder_bos": True}


def m2m100_languages(codes: list[str], first_id: int) -> dict[int, str]:
    """M2M100Tokenizer's language tokens: ``__xx__`` for each code, numbered from ``first_id`` (the
    size of ``vocab.json``)."""
    return {first_id + i: f"__{c}__" for i, c in enumerate(codes)}


def language_of(piece: str) -> str | None:
    """The language of an M2M100 (``__de__``) or NLLB (``deu_Latn``) language token, else None."""
    if piece.startswith("__") and piece.endswith("__") and LANGUAGE.match(piece[2:-2]):
        return piece[2:-2]
    return piece if NLLB_CODE.match(piece) else None


def vocab_orders(names: dict[int, str], size: int, special: dict[str, int], src_lang: str, where: str,
                 unknown: list[str] = ()) -> tuple[VocabOrder, VocabOrder, list[str]]:
    """mtkit's source and target order of an M2M100 vocabulary (``names``: model row → token, ``size``
    rows), then ``unknown``: sentencepiece pieces it lacks, each a copy of <unk>. Returns the two orders
    (equal but for BOS's row: the source language's token, and the decoder's start token) and the
    target languages.
    ``special``: the rows of pad, unk, eos and start (decoder_start_token_id)."""
    pad, unk, eos, start = (special[k] for k in ("pad", "unk", "eos", "start"))
    if len({pad, unk, eos}) < 3 or not all(0 <= i < size for i in (pad, unk, eos, start)):
        raise ConfigError(f"{where}: pad, unk and eos must be distinct rows of the {size}-row vocabulary")
    source_token = next((i for i, p in names.items() if language_of(p) == src_lang), None)
    if source_token is None:
        raise ConfigError(f"{where}: src_lang {src_lang!r} has no language token in the vocabulary")
    renamed: dict[int, str] = {}
    languages: list[str] = []
    for i, p in names.items():
        if (lang := language_of(p)) is not None:
            renamed[i] = tag(lang)
            languages.append(lang)
    rest = [i for i in range(size) if i not in (pad, unk, eos)]
    pieces = list(SPECIAL_NAMES)
    for i in rest:  # fairseq's <s> (not mtkit's BOS) and rows no tokenizer names get names of their own
        name = renamed.get(i, names.get(i))
        pieces.append(f"<fairseq_{name.strip('<>')}>" if name in SPECIAL_NAMES else name or f"<row_{i}>")
    named = set(names.values())
    taken = [p for p in renamed.values() if p in named]
    known = set(pieces)
    if taken or len(known) != len(pieces):
        raise ConfigError(f"{where}: {(taken or ['a token'])[0]!r} appears twice once renamed for mtkit")
    unknown = [p for p in dict.fromkeys(unknown) if p not in known]
    first = len(pieces)
    copies = list(range(first, first + len(unknown)))
    src = VocabOrder(pieces + unknown, [pad, unk, source_token, eos] + rest + [unk] * len(unknown), copies)
    # the target's BOS is the decoder's start row, never produced (search blocks it): NO_LOGIT as a copy
    tgt = VocabOrder(pieces + unknown, [pad, unk, start, eos] + rest + [unk] * len(unknown), [2] + copies)
    return src, tgt, sorted(set(languages))


__all__ = ["is_m2m100", "language_of", "m2m100_languages", "model_settings", "vocab_orders"]
