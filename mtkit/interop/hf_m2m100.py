"""`mtkit import-hf` of an M2M100 or NLLB-200 directory as ``save_pretrained`` writes it: the files
read, checked and handed to `mtkit.interop.m2m100`'s tables; the stage, `mtkit.interop.hf`, writes the
model directory (staged, renamed into place, nothing written on a refusal).

Files: ``config.json``, ``generation_config.json`` (optional), the weights, ``sentencepiece.bpe.model``
and the vocabulary: M2M100's ``vocab.json`` (its language tokens numbered after it, in transformers'
``FAIRSEQ_LANGUAGE_CODES`` order for ``tokenizer_config.json``'s ``language_codes``), or NLLB's
``tokenizer.json`` (its BPE vocabulary and added tokens).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from mtkit import __version__
from mtkit.data.meta import DataMeta
from mtkit.errors import CheckpointError, ConfigError, DataError
from mtkit.interop.hf_files import own_pieces, read_json, read_weights
from mtkit.interop.m2m100 import language_of, m2m100_languages, model_settings, vocab_orders
from mtkit.interop.marian import decoding_settings, to_mtkit
from mtkit.interop.pegasus import final_norms
from mtkit.interop.spm_proto import CONTROL, reorder

SPM = "sentencepiece.bpe.model"


def _m2m100_names(source: Path, tok: dict[str, Any]) -> dict[int, str]:
    """Row → token of M2M100Tokenizer: ``vocab.json``, then the language tokens."""
    vocab = read_json(source / "vocab.json")
    ids = list(vocab.values())
    if not all(isinstance(i, int) for i in ids) or sorted(ids) != list(range(len(vocab))):
        raise DataError(f"{source / 'vocab.json'}: the ids are not 0…{len(vocab) - 1} once each")
    codes_name = str(tok.get("language_codes", "m2m100"))
    try:
        from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES
    except ImportError:
        raise ConfigError("importing M2M100 needs transformers' table of its language codes: "
                          "pip install 'mtkit[hf]'") from None
    if codes_name not in FAIRSEQ_LANGUAGE_CODES:
        raise ConfigError(f"{source / 'tokenizer_config.json'}: language_codes={codes_name!r} is not one of "
                          f"{sorted(FAIRSEQ_LANGUAGE_CODES)}")
    names = {i: p for p, i in vocab.items()}
    names.update(m2m100_languages(FAIRSEQ_LANGUAGE_CODES[codes_name], len(vocab)))
    return names


def _nllb_names(source: Path) -> dict[int, str]:
    """Row → token of NLLB's ``tokenizer.json``: its BPE vocabulary and its added tokens."""
    where = source / "tokenizer.json"
    tokenizer = read_json(where)
    model = tokenizer.get("model") if isinstance(tokenizer.get("model"), dict) else {}
    vocab, added = model.get("vocab"), tokenizer.get("added_tokens") or []
    if model.get("type") != "BPE" or not isinstance(vocab, dict) or not isinstance(added, list):
        raise DataError(f"{where}: not NLLB's tokenizer (a BPE model's vocab and added_tokens)")
    names = {int(i): str(p) for p, i in vocab.items()}
    for entry in added:
        if isinstance(entry, dict) and isinstance(entry.get("id"), int):
            names[entry["id"]] = str(entry.get("content"))
    return names


Imported = tuple[dict[str, Any], dict[str, Any], DataMeta, dict[str, torch.Tensor], dict[str, bytes]]


def read_m2m100(source: Path, hf: dict[str, Any], src_lang: str | None) -> Imported:
    """An M2M100/NLLB directory as mtkit's model section, decoding section, vocabulary meta, state dict
    and sentencepiece file (see the module); `mtkit.interop.hf` checks and writes them."""
    where = str(source / "config.json")
    model = model_settings(hf, where)
    tok = read_json(source / "tokenizer_config.json") if (source / "tokenizer_config.json").is_file() else {}
    nllb = not (source / "vocab.json").is_file() and (source / "tokenizer.json").is_file()
    for name in (SPM, "tokenizer.json" if nllb else "vocab.json"):
        if not (source / name).is_file():
            raise DataError(f"{source / name}: missing (an M2M100 or NLLB tokenizer file)")
    if nllb and tok.get("legacy_behaviour"):
        raise ConfigError(f"{source / 'tokenizer_config.json'}: legacy_behaviour=true puts the source "
                          "language after </s> (tokens </s> eng_Latn); mtkit's source BOS goes before the "
                          "tokens, as the default NllbTokenizer puts it")
    names = _nllb_names(source) if nllb else _m2m100_names(source, tok)
    src_lang = src_lang or str(tok.get("src_lang") or ("eng_Latn" if nllb else "en"))
    src_lang = language_of(src_lang) or src_lang.strip("_")
    size = int(hf.get("vocab_size", 128112))
    if max(names) >= size:
        raise ConfigError(f"{where}: vocab_size={size}, but the tokenizer has a token {max(names)}")
    eos = hf.get("eos_token_id", 2)
    eos = eos[0] if isinstance(eos, list) and len(eos) == 1 else eos
    special = {"pad": hf.get("pad_token_id", 1), "eos": eos, "start": hf.get("decoder_start_token_id", eos),
               "unk": next((i for i, p in names.items() if p == "<unk>"), None)}
    if not all(isinstance(i, int) for i in special.values()):
        raise ConfigError(f"{where}: eos_token_id, pad_token_id, decoder_start_token_id and the tokenizer's "
                          "<unk> must be one token id each")
    spm_bytes = (source / SPM).read_bytes()
    known = set(names.values())
    unknown = [p for p in own_pieces(spm_bytes, str(source / SPM)) if p not in known]
    src, tgt, languages = vocab_orders(names, size, special, src_lang, where, unknown)
    spm = reorder(spm_bytes, src.pieces, str(source / SPM), missing_type=CONTROL)
    gen_file = source / "generation_config.json"
    gen = read_json(gen_file) if gen_file.is_file() else hf  # older checkpoints kept these in config.json
    # mtkit blocks pad and its own BOS (a copy of the start row): generate's bad words are pad's alone
    decoding = decoding_settings(gen, special["pad"], special["pad"], str(gen_file))
    if gen.get("forced_bos_token_id") is not None and gen["forced_bos_token_id"] not in names:
        raise ConfigError(f"{gen_file}: forced_bos_token_id={gen['forced_bos_token_id']} is no token")
    # generate counts the start and the forced language token in max_length, and the EOS it forces there
    # (forced_eos_token_id; without one it stops with no EOS, where mtkit adds one at no cost); mtkit's
    # limit counts the tokens after its start, the tag
    forced_eos = gen.get("forced_eos_token_id", hf.get("forced_eos_token_id"))
    decoding["max_len_b"] -= 1 if forced_eos is not None else 0
    decoding["min_len"] = max(decoding["min_len"] - 1, 0)
    decoding["length_offset"] = 1  # generate's lengths count the forced language token, mtkit's tag not
    hf_state = read_weights(source)
    for key in [k for k in hf_state if k.endswith("embed_positions.weights")]:  # old files: fairseq's table
        del hf_state[key]
    try:
        state = to_mtkit(hf_state, model, src, tgt)
        state.update(final_norms(hf_state))
    except ConfigError as exc:
        raise CheckpointError(f"{source}: {exc}") from None
    model["share_all_embeddings"] = False  # BOS's row differs: the source language, the start token
    del hf_state
    pairs = [[src_lang, t] for t in languages if t != src_lang]
    meta = DataMeta(src_vocab_size=len(src.pieces), tgt_vocab_size=len(tgt.pieces), src_bpe="bpe.model",
                    tgt_bpe="bpe.model", joint=True, src_lang=src_lang,
                    tgt_lang=str(tok.get("tgt_lang") or "mul"), mtkit_version=__version__,
                    languages={"tag": "decoder", "src": [src_lang], "tgt": languages, "pairs": pairs})
    return model, decoding, meta, state, {"bpe.model": spm}


__all__ = ["read_m2m100"]
