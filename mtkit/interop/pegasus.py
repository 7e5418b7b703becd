"""Pegasus (``PegasusForConditionalGeneration``) and mtkit's pre-norm Transformer, one in terms of the
other; and the permutation that gives a model with mtkit's interleaved sinusoids MarianMT's and Pegasus'
table (all sines, then all cosines).

Read from `transformers`' ``modeling_pegasus.py``: each layer is pre-norm (``self_attn_layer_norm``,
``encoder_attn_layer_norm``, ``final_layer_norm`` before their sublayers, the residual added after), the
encoder and the decoder end in a LayerNorm (``model.encoder.layer_norm``, ``model.decoder.layer_norm``:
mtkit's ``encoder_norm``, ``decoder_norm``), embeddings × √d under ``scale_embedding`` with no embedding
LayerNorm, ``PegasusSinusoidalPositionalEmbedding`` is MarianMT's table from position 0, biases in every
linear layer and LayerNorm, ``final_logits_bias`` added to ``lm_head``'s logits, one ``vocab_size`` for
both sides. In transformers 5, ``tie_word_embeddings: false`` unties every ``_tied_weights_keys`` entry, so
the encoder's and decoder's embeddings and ``lm_head`` load as separate tensors (transformers 4 ties the
two embeddings to ``model.shared`` whatever the config says: such exports need transformers 5).

The permutation: halves[:, i] = interleaved[:, 2i] and halves[:, ⌈d/2⌉ + i] = interleaved[:, 2i + 1] (the
same frequencies). LayerNorm, attention and the FFN commute with a permutation of the residual stream's
dimensions, so permuting every weight's residual-side axis gives exactly the same model with the other
table. mtkit permutes on export where the model is interleaved, and back on import (``config.json``'s
``mtkit_sinusoid_layout`` says so), bit for bit.
"""

from __future__ import annotations

import re
from typing import Any

import torch
from torch import Tensor

from mtkit.errors import ConfigError
from mtkit.interop.marian import NO_LOGIT, layer_to_hf
from mtkit.models.positions import marian_sinusoids

#: mtkit tensors whose rows (dim 0) are residual-stream dimensions
_ROWS = re.compile(r"(self_attn|cross_attn)\.out_proj\.(weight|bias)$|ffn\.fc2\.(weight|bias)$"
                   r"|norm\.(weight|bias)$")
#: mtkit tensors whose columns (dim 1) read the residual stream
_COLUMNS = re.compile(r"(src_embed|tgt_embed|output_proj)\.weight$|self_attn\.qkv\.weight$"
                      r"|cross_attn\.(q_proj|kv)\.weight$|ffn\.fc1\.weight$")


def halves_order(d: int) -> Tensor:
    """The residual dimension each halves-layout dimension takes from the interleaved layout."""
    return torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])


def permute_residual(state: dict[str, Tensor], d: int, inverse: bool = False) -> dict[str, Tensor]:
    """An mtkit Transformer state dict with the residual stream's dimensions permuted: interleaved →
    halves (or back, ``inverse``). Tensors that share storage (tied, shared) stay one tensor."""
    order = halves_order(d)
    if inverse:
        order = torch.argsort(order)
    out: dict[str, Tensor] = {}
    done: dict[int, Tensor] = {}
    for key, value in state.items():
        if id(value) in done:
            out[key] = done[id(value)]
            continue
        if _ROWS.search(key):
            new = value.index_select(0, order)
        elif _COLUMNS.search(key):
            new = value.index_select(1, order)
        else:
            new = value
        out[key] = done.setdefault(id(value), new)
    return out


# ------------------------------------------------------------------------------------------ configs
def pegasus_config(model: Any, vocab: int, tied: bool) -> dict[str, Any]:
    """``config.json`` of a pre-norm mtkit model in mtkit's vocabulary order (pad 0, unk 1, <s> 2 = the
    decoder's start, </s> 3); ``tied``: one matrix for both embeddings and the output layer."""
    return {
        "architectures": ["PegasusForConditionalGeneration"], "model_type": "pegasus",
        "d_model": model.d_model, "encoder_layers": model.encoder_layers,
        "decoder_layers": model.decoder_layers, "encoder_attention_heads": model.heads,
        "decoder_attention_heads": model.heads, "encoder_ffn_dim": model.d_ff, "decoder_ffn_dim": model.d_ff,
        "activation_function": model.activation, "dropout": model.dropout,
        "attention_dropout": model.attention_dropout, "activation_dropout": model.activation_dropout,
        "scale_embedding": model.embed_scale, "tie_word_embeddings": tied, "vocab_size": vocab,
        "max_position_embeddings": 1024, "pad_token_id": 0, "eos_token_id": 3, "forced_eos_token_id": 3,
        "decoder_start_token_id": 2, "bos_token_id": None, "is_encoder_decoder": True,
        "normalize_before": True, "normalize_embedding": False, "static_position_embeddings": True,
    }


def model_settings(hf: dict[str, Any], where: str) -> dict[str, Any]:
    """The ``model`` section of a Pegasus ``config.json`` (MarianMT's settings, pre-norm)."""
    from mtkit.interop.marian import model_settings as marian

    if hf.get("normalize_before") is False or hf.get("normalize_embedding") \
            or hf.get("add_final_layer_norm") is False:
        raise ConfigError(f"{where}: normalize_before/normalize_embedding/add_final_layer_norm are not "
                          "Pegasus' pre-norm settings")
    settings = marian({**hf, "model_type": "marian", "share_encoder_decoder_embeddings": True}, where)
    settings["norm"] = "pre"
    return settings


# ------------------------------------------------------------------------------------------ weights
def _pad_rows(weight: Tensor, rows: int, fill: float = 0.0) -> Tensor:
    if weight.size(0) == rows:
        return weight
    extra = torch.full((rows - weight.size(0),) + tuple(weight.shape[1:]), fill, dtype=weight.dtype)
    return torch.cat([weight, extra])


def to_pegasus(state: dict[str, Tensor], model: Any, vocab: int, tied: bool) -> dict[str, Tensor]:
    """A PegasusForConditionalGeneration state dict from an mtkit pre-norm one with the halves layout
    (`permute_residual` first for an interleaved model); every embedding padded to ``vocab`` rows (separate
    vocabularies of two sizes): the output rows a side lacks get ``NO_LOGIT``, so they are never chosen."""
    d = model.d_model
    out: dict[str, Tensor] = {}
    tgt_rows = state["output_proj.weight"].size(0)
    src, tgt = _pad_rows(state["src_embed.weight"], vocab), _pad_rows(state["tgt_embed.weight"], vocab)
    out["model.shared.weight"] = src if tied else tgt
    if not tied:  # transformers 5 loads all four apart
        out["model.encoder.embed_tokens.weight"] = src
        out["model.decoder.embed_tokens.weight"] = tgt
        out["lm_head.weight"] = _pad_rows(state["output_proj.weight"], vocab)
    bias = state.get("output_bias", torch.zeros(tgt_rows)).float()
    out["final_logits_bias"] = _pad_rows(bias, vocab, NO_LOGIT).reshape(1, vocab)
    positions = marian_sinusoids(1024, d)
    for side, count, cross in (("encoder", model.encoder_layers, False),
                               ("decoder", model.decoder_layers, True)):
        out[f"model.{side}.embed_positions.weight"] = positions
        for p in ("weight", "bias"):
            out[f"model.{side}.layer_norm.{p}"] = state[f"{side}_norm.{p}"]
        for i in range(count):
            layer_to_hf(state, d, f"model.{side}.layers.{i}", f"{side}_layers.{i}", cross, out)
    return {k: v.detach().float().contiguous() for k, v in out.items()}


def final_norms(hf: dict[str, Tensor]) -> dict[str, Tensor]:
    """mtkit's ``encoder_norm``/``decoder_norm`` from a Pegasus state dict."""
    out = {}
    for side in ("encoder", "decoder"):
        for p in ("weight", "bias"):
            key = f"model.{side}.layer_norm.{p}"
            if key not in hf:
                raise ConfigError(f"the checkpoint lacks {key}")
            out[f"{side}_norm.{p}"] = hf[key].detach().float().contiguous()
    return out


__all__ = ["final_norms", "halves_order", "model_settings", "pegasus_config", "permute_residual",
           "to_pegasus"]
