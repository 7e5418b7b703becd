"""MarianMT (Hugging Face Transformers) and mtkit's Transformer, one in terms of the other: the
architecture settings, the search settings, the vocabulary order and the weights, both ways.

Read from `transformers`' own ``modeling_marian.py``: post-norm with biases in every linear layer and
LayerNorm, no final encoder/decoder norm; separate q/k/v projections (mtkit fuses them: [W_q; W_k; W_v]
and, in cross-attention, [W_k; W_v]); sinusoids with all sines first (``model.sinusoid_layout: halves``)
that ``save_pretrained`` does not store; embeddings × √d only under ``scale_embedding``; an untrained
``final_logits_bias`` (``model.output_bias``); the decoder starts from the pad token, and `generate`
forbids the pad token through ``bad_words_ids``.

Vocabulary: mtkit's ids 0-3 are pad, unk, bos, eos. A MarianMT vocabulary has pad, unk and eos
anywhere, and its decoder starts from pad. mtkit's bos (the decoder's first input, which search never
emits) becomes MarianMT's pad row, so both start from the same embedding and both give it a logit
that `generate` then forbids. mtkit's pad is then one row MarianMT lacks: a zero embedding whose logit
gets ``NO_LOGIT`` from the output bias, so it takes no probability and the softmax over the others is
MarianMT's. A model exported by mtkit keeps mtkit's order (its start token is bos, not pad) and comes
back without an added row. Pieces of the sentencepiece models that the vocabulary lacks (real OPUS-MT
models have some; MarianTokenizer reads them as <unk>) come after the vocabulary, each a copy of
<unk>'s row that gets ``NO_LOGIT`` too; a multilingual OPUS-MT model's ``>>deu<<`` tokens take mtkit's
tag names (``<2deu>``), so its target languages are asked for as a multilingual mtkit model's are.

Nothing here reads a file: `mtkit.interop.hf` does, and writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from mtkit.data.corpora import LANGUAGE, tag
from mtkit.errors import ConfigError

#: the output bias of the row MarianMT lacks: exp(NO_LOGIT − max) is 0 in float32, bfloat16 and float16
NO_LOGIT = -1.0e4
SPECIAL_NAMES = ("<pad>", "<unk>", "<s>", "</s>")
_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "swish", "silu": "swish"}
#: generation settings mtkit's search has only at generate's default
_GENERATE_DEFAULTS: dict[str, Any] = {"do_sample": False, "repetition_penalty": 1.0,
                                      "diversity_penalty": 0.0, "num_beam_groups": 1,
                                      "encoder_repetition_penalty": 1.0, "renormalize_logits": False}


@dataclass
class VocabOrder:
    """mtkit's vocabulary in terms of a MarianMT one: the piece of each mtkit id, and the MarianMT row
    it takes (-1: the added pad row). ``copies``: mtkit ids of sentencepiece pieces the MarianMT
    vocabulary lacks (MarianTokenizer reads them as <unk>): each takes <unk>'s row, so the network
    computes on them what it computes on <unk>, and its logit gets ``NO_LOGIT`` (never produced, as
    MarianMT cannot produce them)."""

    pieces: list[str]
    rows: list[int]
    copies: list[int] = field(default_factory=list)

    def take(self, weight: Tensor, fill: float = 0.0, logits: bool = False) -> Tensor:
        """Rows of a MarianMT tensor [V(, D)] in mtkit's order; the added row is ``fill``, and so are the
        copies of <unk> where ``logits`` (the output bias)."""
        index = torch.tensor([max(r, 0) for r in self.rows])
        out = weight.index_select(0, index)  # a new tensor already
        added = [i for i, r in enumerate(self.rows) if r < 0] + (self.copies if logits else [])
        if added:
            out[added] = fill
        return out


def language_tag(piece: str) -> str | None:
    """The language of an OPUS-MT target-language token (``>>deu<<`` → ``deu``), else None."""
    if piece.startswith(">>") and piece.endswith("<<") and LANGUAGE.match(piece[2:-2]):
        return piece[2:-2]
    return None


def vocab_order(vocab: dict[str, int], size: int, pad: int, unk: int, eos: int, start: int,
                where: str, unknown: list[str] = ()) -> VocabOrder:
    """mtkit's order of a MarianMT vocabulary (``vocab.json``: piece → id, ``size`` rows in the model),
    then ``unknown``: sentencepiece pieces the vocabulary lacks, each a copy of <unk>. OPUS-MT's
    target-language tokens (``>>deu<<``) take mtkit's tag names (``<2deu>``, `mtkit.data.corpora.tag`)."""
    names = {i: p for p, i in vocab.items() if isinstance(i, int)}
    if len(names) != len(vocab) or sorted(names) != list(range(size)):
        raise ConfigError(f"{where}: the ids are not 0…{size - 1} once each (config.json has a vocabulary of "
                          f"{size}, the file {len(vocab)} entries)")
    specials = [-1 if start == pad else pad, unk, start, eos]
    if len({unk, start, eos, pad}) < (3 if start == pad else 4):
        raise ConfigError(f"{where}: pad, unk, eos and the decoder's start token must be distinct tokens")
    rest = [i for i in range(size) if i not in specials]
    renamed = {p: tag(lang) for p in vocab if (lang := language_tag(p)) is not None}
    pieces = list(SPECIAL_NAMES) + [renamed.get(names[i], names[i]) for i in rest]
    clash = [names[i] for i in rest if names[i] in SPECIAL_NAMES]
    taken = [p for p in renamed.values() if p in vocab]
    if clash or taken:
        raise ConfigError(f"{where}: {(clash or taken)[0]!r} is an ordinary token here, but mtkit reserves "
                          "that name")
    unknown = [p for p in dict.fromkeys(unknown) if p not in vocab and p not in SPECIAL_NAMES]
    first = len(pieces)
    return VocabOrder(pieces + unknown, specials + rest + [unk] * len(unknown),
                      list(range(first, first + len(unknown))))


def languages(order: VocabOrder) -> list[str]:
    """The target languages of a multilingual OPUS-MT vocabulary (its ``>>xx<<`` tokens), sorted."""
    return sorted(p[2:-1] for p in order.pieces if p.startswith("<2") and p.endswith(">")
                  and LANGUAGE.match(p[2:-1]))


# ------------------------------------------------------------------------------------------ configs
def layer_settings(hf: dict[str, Any], where: str, activation: str, attention_dropout: float,
                   scale_embedding: bool) -> dict[str, Any]:
    """The ``model`` settings MarianMT and M2M100 configs spell alike (sizes, activation, dropouts,
    embedding scale and tying), under the class's own defaults for the keys a config may leave out;
    encoder and decoder sizes that differ, or an activation mtkit lacks, are refused."""
    for a, b in (("encoder_attention_heads", "decoder_attention_heads"),
                 ("encoder_ffn_dim", "decoder_ffn_dim")):
        if hf.get(a, 16 if "heads" in a else 4096) != hf.get(b, 16 if "heads" in b else 4096):
            raise ConfigError(f"{where}: {a}={hf.get(a)} differs from {b}={hf.get(b)}; mtkit's encoder and "
                              "decoder share one value")
    act = hf.get("activation_function", activation)
    if act not in _ACTIVATIONS:
        raise ConfigError(f"{where}: activation_function={act!r} is not one mtkit has (relu, gelu, swish)")
    return {
        "arch": "transformer", "positions": "sinusoidal",
        "d_model": int(hf.get("d_model", 1024)), "heads": int(hf.get("encoder_attention_heads", 16)),
        "d_ff": int(hf.get("encoder_ffn_dim", 4096)), "encoder_layers": int(hf.get("encoder_layers", 12)),
        "decoder_layers": int(hf.get("decoder_layers", 12)), "activation": _ACTIVATIONS[act],
        "dropout": float(hf.get("dropout", 0.1)),
        "attention_dropout": float(hf.get("attention_dropout", attention_dropout)),
        "activation_dropout": float(hf.get("activation_dropout", 0.0)),
        "embed_scale": bool(hf.get("scale_embedding", scale_embedding)),
        "tie_embeddings": bool(hf.get("tie_word_embeddings", True)), "source_eos": True, "output_bias": True,
    }


def model_settings(hf: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``model`` config section of a MarianMT ``config.json``; an unsupported setting is refused."""
    if hf.get("model_type") != "marian":
        raise ConfigError(f"{where}: model_type is {hf.get('model_type')!r}, not 'marian', 'pegasus' or "
                          "'m2m_100' (a MarianMT, M2M100 or NLLB checkpoint as save_pretrained writes it, or "
                          "mtkit's Pegasus export)")
    layers = layer_settings(hf, where, activation="gelu", attention_dropout=0.0, scale_embedding=False)
    shared = bool(hf.get("share_encoder_decoder_embeddings", True))
    if shared and hf.get("decoder_vocab_size") not in (None, hf.get("vocab_size")):
        raise ConfigError(f"{where}: decoder_vocab_size differs from vocab_size with shared embeddings")
    return {**layers, "norm": "post", "sinusoid_layout": "halves", "share_all_embeddings": shared}


def decoding_settings(gen: dict[str, Any], pad: int, start: int, where: str) -> dict[str, Any]:
    """The ``decoding`` section equivalent to ``generation_config.json`` (mtkit's search blocks pad and
    bos, forces EOS at the length limit, counts lengths with EOS: `mtkit.decode.search`)."""
    lp = float(gen.get("length_penalty", 1.0))
    if lp not in (0.0, 1.0):
        raise ConfigError(f"{where}: length_penalty={lp} has no mtkit equivalent (0 = decoding.length_norm "
                          "none, 1 = average)")
    bad = gen.get("bad_words_ids") or []  # none (transformers 5's save_pretrained of a MarianConfig):
    blocked = sorted({(pad,), (start,)})  # generate may then emit pad, which mtkit's search never does
    if bad and sorted(tuple(b) for b in bad) != blocked:
        raise ConfigError(f"{where}: bad_words_ids={bad}: mtkit's search forbids exactly the pad and start "
                          f"tokens ({[list(b) for b in blocked]})")
    for key, default in _GENERATE_DEFAULTS.items():  # settings whose other values mtkit's search lacks
        value = gen.get(key)
        if value is not None and (value is not False if default is False else value != default):
            raise ConfigError(f"{where}: {key}={gen[key]} has no mtkit search equivalent (only {default})")
    early = gen.get("early_stopping", False)
    if early not in (True, False, None):  # "never": generate's bound then looks ahead to max_length
        raise ConfigError(f"{where}: early_stopping={early!r} has no mtkit search equivalent (true or false)")
    max_length = int(gen.get("max_length", 20))
    if gen.get("max_new_tokens") is not None:  # generate then ignores max_length
        max_length = int(gen["max_new_tokens"]) + 1
    if max_length < 2:
        raise ConfigError(f"{where}: max_length={max_length} leaves no room for a token")
    return {"beam_size": int(gen.get("num_beams", 1)), "length_norm": "none" if lp == 0.0 else "average",
            "max_len_a": 0.0, "max_len_b": max_length - 2,
            "min_len": max(int(gen.get("min_length", 0)) - 1, 0),
            "no_repeat_ngram": int(gen.get("no_repeat_ngram_size", 0) or 0), "eos_at_limit": "free",
            "beam_stop": "finished" if early is True else "so_far"}


def hf_settings(model: Any, decoding: Any, src_size: int, tgt_size: int
                ) -> tuple[dict[str, Any], dict[str, Any]]:
    """``config.json`` and ``generation_config.json`` of an mtkit model in mtkit's vocabulary order (pad 0,
    unk 1, bos 2 = the decoder's start, eos 3). Only post-norm sinusoid models map to MarianMT."""
    config = {
        "architectures": ["MarianMTModel"], "model_type": "marian", "d_model": model.d_model,
        "encoder_layers": model.encoder_layers, "decoder_layers": model.decoder_layers,
        "encoder_attention_heads": model.heads, "decoder_attention_heads": model.heads,
        "encoder_ffn_dim": model.d_ff, "decoder_ffn_dim": model.d_ff, "activation_function": model.activation,
        "dropout": model.dropout, "attention_dropout": model.attention_dropout,
        "activation_dropout": model.activation_dropout, "scale_embedding": model.embed_scale,
        "share_encoder_decoder_embeddings": src_size == tgt_size and model.share_all_embeddings,
        "tie_word_embeddings": model.tie_embeddings, "vocab_size": src_size, "decoder_vocab_size": tgt_size,
        "max_position_embeddings": 1024, "pad_token_id": 0, "eos_token_id": 3, "forced_eos_token_id": 3,
        "decoder_start_token_id": 2, "bos_token_id": None, "is_encoder_decoder": True,
    }
    # generate's max_length is fixed where mtkit's limit grows with the source: MarianMT's 512 then
    max_length = int(decoding.max_len_b) + 2 if decoding.max_len_a == 0 else 512
    gen = {"bad_words_ids": [[0], [2]], "decoder_start_token_id": 2, "eos_token_id": 3,
           "forced_eos_token_id": 3,
           "pad_token_id": 0, "max_length": max_length, "num_beams": decoding.beam_size,
           "length_penalty": 0.0 if decoding.length_norm == "none" else 1.0,  # gnmt has no equivalent
           "min_length": decoding.min_len + 1 if decoding.min_len else 0}
    if decoding.no_repeat_ngram:
        gen["no_repeat_ngram_size"] = decoding.no_repeat_ngram
    return config, gen


# ------------------------------------------------------------------------------------------ weights
def _layer_pairs(prefix: str, mine: str, cross: bool) -> list[tuple[str, str]]:
    """(MarianMT name, mtkit name) of one layer's unfused tensors (LayerNorms, FFN, out projections)."""
    pairs = [("self_attn.out_proj", "self_attn.out_proj"), ("self_attn_layer_norm", "self_res.norm"),
             ("fc1", "ffn.fc1"), ("fc2", "ffn.fc2"), ("final_layer_norm", "ffn_res.norm")]
    if cross:
        pairs += [("encoder_attn.q_proj", "cross_attn.q_proj"),
                  ("encoder_attn.out_proj", "cross_attn.out_proj"),
                  ("encoder_attn_layer_norm", "cross_res.norm")]
    return [(f"{prefix}.{a}.{p}", f"{mine}.{b}.{p}") for a, b in pairs for p in ("weight", "bias")]


def embeddings(hf: dict[str, Tensor], model: dict[str, Any]) -> tuple[Tensor, Tensor]:
    """The encoder's and the decoder's embeddings as `transformers` loads them; ``model``'s
    share_all_embeddings is set to whether they are one matrix. (transformers 5 keeps them apart when
    tie_word_embeddings is false even under share_encoder_decoder_embeddings; 4 shared them: the
    checkpoint's tensors say which.)"""
    shared = hf.get("model.shared.weight")
    enc = hf.get("model.encoder.embed_tokens.weight", shared)
    dec = hf.get("model.decoder.embed_tokens.weight", shared)
    if enc is None or dec is None:
        raise ConfigError("the checkpoint lacks model.shared.weight (or the encoder's and decoder's "
                          "embed_tokens)")
    model["share_all_embeddings"] = enc.shape == dec.shape and torch.equal(enc, dec)
    return enc, dec


def to_mtkit(hf: dict[str, Tensor], model: dict[str, Any], src: VocabOrder, tgt: VocabOrder
             ) -> dict[str, Tensor]:
    """An mtkit state dict from a MarianMTModel's (keys as ``save_pretrained`` writes them); a missing
    tensor is a ConfigError naming it."""
    def get(name: str) -> Tensor:
        for key in (name, name.removeprefix("model.")):
            if key in hf:
                return hf[key]
        raise ConfigError(f"the checkpoint lacks {name}")

    src_embed, tgt_embed = embeddings(hf, model)
    src_rows = src.take(src_embed)
    one = src is tgt and model["share_all_embeddings"]  # one matrix: one tensor, saved once
    out: dict[str, Tensor] = {"src_embed.weight": src_rows,
                              "tgt_embed.weight": src_rows if one else tgt.take(tgt_embed)}
    lm_head = tgt_embed if model["tie_embeddings"] else get("lm_head.weight")
    out["output_proj.weight"] = out["tgt_embed.weight"] if model["tie_embeddings"] else tgt.take(lm_head)
    bias = hf.get("final_logits_bias", torch.zeros(1, max(tgt.rows) + 1))
    out["output_bias"] = tgt.take(bias.reshape(-1).float(), fill=NO_LOGIT, logits=True)
    sides = (("encoder", model["encoder_layers"], False), ("decoder", model["decoder_layers"], True))
    for side, count, cross in sides:
        for i in range(count):
            prefix, mine = f"model.{side}.layers.{i}", f"{side}_layers.{i}"
            for a, b in _layer_pairs(prefix, mine, cross):
                out[b] = get(a)
            for p in ("weight", "bias"):
                out[f"{mine}.self_attn.qkv.{p}"] = torch.cat(
                    [get(f"{prefix}.self_attn.{x}_proj.{p}") for x in "qkv"])
                if cross:
                    out[f"{mine}.cross_attn.kv.{p}"] = torch.cat(
                        [get(f"{prefix}.encoder_attn.{x}_proj.{p}") for x in "kv"])
    done: dict[int, Tensor] = {}  # a tensor under several names (tied, shared) stays one tensor
    for key, value in out.items():
        out[key] = done.setdefault(id(value), value.detach().float().contiguous())
    return out


def layer_to_hf(state: dict[str, Tensor], d: int, prefix: str, mine: str, cross: bool,
                out: dict[str, Tensor]) -> None:
    """One layer's tensors under their Transformers names (``prefix``, e.g. ``model.decoder.layers.2``)
    into ``out``: the unfused ones as they are, the fused q/k/v (and cross-attention k/v) split in
    rows; MarianMT and Pegasus name a layer alike."""
    for a, b in _layer_pairs(prefix, mine, cross):
        out[a] = state[b]
    for p in ("weight", "bias"):
        for x, part in zip("qkv", state[f"{mine}.self_attn.qkv.{p}"].split(d), strict=True):
            out[f"{prefix}.self_attn.{x}_proj.{p}"] = part
        if cross:
            for x, part in zip("kv", state[f"{mine}.cross_attn.kv.{p}"].split(d), strict=True):
                out[f"{prefix}.encoder_attn.{x}_proj.{p}"] = part


def to_hf(state: dict[str, Tensor], model: Any, shared: bool) -> dict[str, Tensor]:
    """A MarianMTModel state dict (``save_pretrained``'s keys, tied tensors once) from an mtkit one in
    mtkit's vocabulary order, which the exported ``vocab.json`` keeps."""
    d = model.d_model
    out: dict[str, Tensor] = {}
    if shared:
        out["model.shared.weight"] = state["src_embed.weight"]
        if not model.tie_embeddings:  # transformers 5 then loads them apart (`embeddings`): all three
            out["model.encoder.embed_tokens.weight"] = out["model.decoder.embed_tokens.weight"] = \
                state["src_embed.weight"]
    else:
        out["model.encoder.embed_tokens.weight"] = state["src_embed.weight"]
        out["model.decoder.embed_tokens.weight"] = state["tgt_embed.weight"]
    if not model.tie_embeddings:
        out["lm_head.weight"] = state["output_proj.weight"]
    vocab = state["output_proj.weight"].size(0)
    out["final_logits_bias"] = state.get("output_bias", torch.zeros(vocab)).reshape(1, vocab)
    for side, count, cross in (("encoder", model.encoder_layers, False),
                               ("decoder", model.decoder_layers, True)):
        for i in range(count):
            layer_to_hf(state, d, f"model.{side}.layers.{i}", f"{side}_layers.{i}", cross, out)
    # views, not copies (the q/k/v rows of a fused matrix are contiguous): `mtkit.interop.hf` writes each one
    return {k: v.detach().float().contiguous() for k, v in out.items()}


__all__ = ["NO_LOGIT", "VocabOrder", "decoding_settings", "hf_settings", "language_tag", "languages",
           "model_settings", "to_hf", "to_mtkit", "vocab_order"]
