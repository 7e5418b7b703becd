"""An mtkit Transformer as a CTranslate2 model: the ``ctranslate2.specs`` specification built from the
checkpoint's tensors, and the directory written from it (`write_ct2`: CTranslate2's files, the
sentencepiece model(s), the manifest of `mtkit.interop.manifest`).

Written against mtkit's own module layout through the ``ctranslate2.specs`` API, it is exact or it
refuses: every model option must be one it knows how to express (post-/pre-norm; sinusoidal (either
layout), learned or relative positions; ReLU, GELU or swish; tied or shared embeddings; the √d embedding
scale or none; a fixed output bias), and every tensor of the checkpoint must find its place in the
specification. Anything else (the RNNs, an option added to mtkit after this converter) stops the export
with one line naming it, before anything is written, rather than producing a model that translates
differently.

mtkit's sinusoids interleave sin and cos (PE[2i] = sin, PE[2i+1] = cos) where CTranslate2's built-in
ones put all sines first, so the table itself is exported, as CTranslate2's explicit position
encodings.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from mtkit.config.experiment import ModelConfig
from mtkit.data.bpe import Bpe
from mtkit.decode.loader import LoadedModel
from mtkit.errors import MtkitError
from mtkit.interop.manifest import new_manifest, write_manifest
from mtkit.vocab import BOS_ID, EOS_ID, UNK_ID

MIN_POSITIONS = 1024  # rows of the exported sinusoid table, at least

# model options with a CTranslate2 equivalent: the values it can express (None: any value)
_EXPRESSIBLE: dict[str, tuple[Any, ...] | None] = {
    "arch": ("transformer",), "norm": ("post", "pre"), "activation": ("relu", "gelu", "swish"),
    "positions": ("sinusoidal", "learned", "relative"), "sinusoid_layout": None, "embed_scale": None,
    "output_bias": None, "source_eos": None,
    "encoder_layers": None, "decoder_layers": None, "d_model": None, "heads": None, "d_ff": None,
    "tie_embeddings": None, "share_all_embeddings": None, "max_positions": None,
    "max_relative_distance": None,
    # training-only and RNN-only options do not change a Transformer's translations (``size: auto``
    # chose the width before training; config.yaml records the chosen d_model, d_ff and heads)
    "size": None, "dropout": None, "attention_dropout": None, "activation_dropout": None, "emb_dim": None,
    "rnn_type": None, "hidden_size": None, "bidirectional": None, "attention": None,
    "attention_style": None, "input_feeding": None, "bridge": None,
}



def check_expressible(cfg: ModelConfig) -> None:
    """Refuse, with one line naming the option, a model CTranslate2 cannot express exactly."""
    if cfg.arch != "transformer":
        raise MtkitError(f"export: model.arch={cfg.arch}: CTranslate2 runs Transformer models only (it has "
                         "no recurrent encoder-decoder); nothing was written")
    for f in dataclasses.fields(ModelConfig):
        value = getattr(cfg, f.name)
        if f.name not in _EXPRESSIBLE:
            if value != f.default:  # an option newer than this converter
                raise MtkitError(f"export: model.{f.name}={value!r} has no CTranslate2 equivalent in this "
                                 "exporter; nothing was written")
        elif _EXPRESSIBLE[f.name] is not None and value not in _EXPRESSIBLE[f.name]:
            raise MtkitError(f"export: model.{f.name}={value!r} has no CTranslate2 equivalent; "
                             "nothing was written")


def position_rows(loaded: LoadedModel) -> int | None:
    """Rows of the exported absolute-position table (None for relative positions): learned tables as
    trained; sinusoids for everything the stored decoding settings can ask for, at least 1024."""
    m, d = loaded.config.model, loaded.config.decoding
    if m.positions == "relative":
        return None
    if m.positions == "learned":
        return m.max_positions
    longest_output = math.floor(d.max_input_tokens * max(d.max_len_a, 1.0) + d.max_len_b) + 2
    return max(MIN_POSITIONS, d.max_input_tokens, longest_output)


def write_ct2(loaded: LoadedModel, directory: Path, quantization: str, ct2: Any) -> None:
    """Write the CTranslate2 model, the sentencepiece model(s) and the manifest into ``directory``."""
    meta = loaded.meta
    src_pieces = Bpe(loaded.model_dir / meta.src_bpe).pieces()
    tgt_pieces = src_pieces if meta.tgt_bpe == meta.src_bpe else Bpe(loaded.model_dir / meta.tgt_bpe).pieces()
    rows = position_rows(loaded)
    spec = transformer_spec(loaded, src_pieces, tgt_pieces, rows, ct2)
    spec.config.add_attribute("layer_norm_epsilon", 1e-5)  # torch's LayerNorm default
    spec.config.unk_token, spec.config.bos_token = tgt_pieces[UNK_ID], tgt_pieces[BOS_ID]
    spec.config.eos_token, spec.config.decoder_start_token = tgt_pieces[EOS_ID], tgt_pieces[BOS_ID]
    spec.config.add_source_eos = loaded.config.model.source_eos  # CTranslate2 appends </s> itself
    try:
        spec.validate()
        spec.optimize(quantization=quantization)
        spec.save(str(directory))
    except (ValueError, RuntimeError) as exc:
        raise MtkitError(f"export: CTranslate2 refused the converted model ({str(exc)[:200]})") from None
    for name in meta.bpe_files():
        shutil.copyfile(loaded.model_dir / name, directory / name)
    write_manifest(directory, new_manifest(loaded.config, meta, loaded.checkpoint, quantization, rows,
                                           tgt_pieces))


def transformer_spec(loaded: LoadedModel, src_pieces: list[str], tgt_pieces: list[str], rows: int | None,
                     ct2: Any) -> Any:
    """The ``ctranslate2.specs.TransformerSpec`` of an mtkit Transformer, every tensor accounted for."""
    from ctranslate2.specs import common_spec
    from ctranslate2.specs.transformer_spec import TransformerSpec

    net, m = loaded.model, loaded.config.model
    state = {name: t.detach().float().cpu() for name, t in net.state_dict().items()}
    used: set[str] = set()

    def take(name: str) -> np.ndarray:
        used.add(name)
        return np.ascontiguousarray(state[name].numpy())

    def linear(spec: Any, name: str, bias: bool = True) -> None:
        spec.weight = take(f"{name}.weight")
        if bias:
            spec.bias = take(f"{name}.bias")

    def norm(spec: Any, name: str) -> None:
        spec.gamma, spec.beta = take(f"{name}.weight"), take(f"{name}.bias")

    def attention(spec: Any, name: str, self_attention: bool) -> None:
        if self_attention:
            linear(spec.linear[0], f"{name}.qkv")  # fused [W_q; W_k; W_v], CTranslate2's layout too
        else:
            linear(spec.linear[0], f"{name}.q_proj")
            linear(spec.linear[1], f"{name}.kv")  # fused [W_k; W_v]
        linear(spec.linear[-1], f"{name}.out_proj")
        if self_attention and m.positions == "relative":  # Shaw et al.: tables shared by the heads
            spec.relative_position_keys = take(f"{name}.relative.key_table.weight")
            spec.relative_position_values = take(f"{name}.relative.value_table.weight")

    def ffn(spec: Any, name: str) -> None:
        linear(spec.linear_0, f"{name}.ffn.fc1")
        linear(spec.linear_1, f"{name}.ffn.fc2")
        norm(spec.layer_norm, f"{name}.ffn_res.norm")

    activation = getattr(common_spec.Activation, {"gelu": "GELU", "swish": "SWISH"}.get(m.activation, "RELU"))
    spec = TransformerSpec.from_config((m.encoder_layers, m.decoder_layers), m.heads,
                                       with_relative_position=m.positions == "relative",
                                       pre_norm=m.norm == "pre", activation=activation,
                                       alignment_layer=-1, alignment_heads=m.heads)  # mean of all heads
    enc, dec = spec.encoder, spec.decoder
    enc.embeddings[0].weight = take("src_embed.weight")
    dec.embeddings.weight = take("tgt_embed.weight")
    linear(dec.projection, "output_proj", bias=False)
    if m.output_bias:  # MarianMT's final_logits_bias, as CTranslate2's own Marian converter places it
        dec.projection.bias = take("output_bias")
    enc.scale_embeddings = dec.scale_embeddings = m.embed_scale
    if m.positions == "sinusoidal":
        assert rows is not None
        table = np.ascontiguousarray(net.positions(rows).float().cpu().numpy())  # in the model's layout
        enc.position_encodings.encodings = table
        dec.position_encodings.encodings = table
    elif m.positions == "learned":
        enc.position_encodings.encodings = take("src_positions.embedding.weight")
        dec.position_encodings.encodings = take("positions.embedding.weight")
    for i, layer in enumerate(enc.layer):
        name = f"encoder_layers.{i}"
        attention(layer.self_attention, f"{name}.self_attn", True)
        norm(layer.self_attention.layer_norm, f"{name}.self_res.norm")
        ffn(layer.ffn, name)
    for i, layer in enumerate(dec.layer):
        name = f"decoder_layers.{i}"
        attention(layer.self_attention, f"{name}.self_attn", True)
        norm(layer.self_attention.layer_norm, f"{name}.self_res.norm")
        attention(layer.attention, f"{name}.cross_attn", False)
        norm(layer.attention.layer_norm, f"{name}.cross_res.norm")
        ffn(layer.ffn, name)
    if m.norm == "pre":
        norm(enc.layer_norm, "encoder_norm")
        norm(dec.layer_norm, "decoder_norm")
    left = sorted(set(state) - used)
    if left:
        raise MtkitError(f"export: {loaded.checkpoint}: tensors {', '.join(left[:5])} have no place in a "
                         "CTranslate2 Transformer; nothing was written")
    for side, pieces, size in (("source", src_pieces, len(state["src_embed.weight"])),
                               ("target", tgt_pieces, len(state["tgt_embed.weight"]))):
        if len(pieces) != size:
            raise MtkitError(f"export: the {side} sentencepiece model has {len(pieces)} pieces but the model "
                             f"{size} embeddings; nothing was written")
    spec.register_source_vocabulary(src_pieces)
    spec.register_target_vocabulary(tgt_pieces)
    return spec


__all__ = ["MIN_POSITIONS", "check_expressible", "position_rows", "transformer_spec", "write_ct2"]
