"""The `mtkit export` stage: a trained Transformer → a CTranslate2 model directory (``--format ct2``)
or the same model packaged for Argos Translate and LibreTranslate (``--format argos``).

The converter is written against mtkit's own module layout through the ``ctranslate2.specs`` API. It
is exact or it refuses: every model option must be one it knows how to express (post-/pre-norm;
sinusoidal (either layout), learned or relative positions; ReLU, GELU or swish; tied or shared embeddings;
the √d embedding scale or none; a fixed output bias), and every tensor
of the checkpoint must find its place in the specification. Anything else (the RNNs, an option added
to mtkit after this converter) stops the export with one line naming it, before anything is written,
rather than producing a model that translates differently.

mtkit's sinusoids interleave sin and cos (PE[2i] = sin, PE[2i+1] = cos) where CTranslate2's built-in
ones put all sines first, so the table itself is exported, as CTranslate2's explicit position
encodings. An exported directory holds the CTranslate2 files, the sentencepiece model(s) and
``mtkit_export.json`` (`mtkit.decode.exported`), so `mtkit translate -m DIR` runs it with mtkit's own pre- and
post-processing. Outputs are built beside their target and renamed into place.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mtkit import __version__
from mtkit.config.experiment import ModelConfig, to_dict
from mtkit.data.bpe import Bpe
from mtkit.data.meta import read_meta
from mtkit.decode.exported import FORMAT, FORMAT_VERSION, MANIFEST, VMAP, is_exported, require_ctranslate2
from mtkit.decode.loader import LoadedModel, load_model
from mtkit.decode.shortlist import build_shortlist, write_vmap
from mtkit.errors import ConfigError, MtkitError
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

FORMATS = ("ct2", "argos")
QUANTIZATIONS = ("float32", "int8", "int8_float32", "bfloat16", "float16")
MIN_POSITIONS = 1024  # rows of the exported sinusoid table, at least

# model options with a CTranslate2 equivalent: the values it can express (None: any value)
_EXPRESSIBLE: dict[str, tuple[Any, ...] | None] = {
    "arch": ("transformer",), "norm": ("post", "pre"), "activation": ("relu", "gelu", "swish"),
    "positions": ("sinusoidal", "learned", "relative"), "sinusoid_layout": None, "embed_scale": None,
    "output_bias": None, "source_eos": None,
    "encoder_layers": None, "decoder_layers": None, "d_model": None, "heads": None, "d_ff": None,
    "tie_embeddings": None, "share_all_embeddings": None, "max_positions": None,
    "max_relative_distance": None,
    # training-only and RNN-only options do not change a Transformer's translations
    "dropout": None, "attention_dropout": None, "activation_dropout": None, "emb_dim": None,
    "rnn_type": None, "hidden_size": None, "bidirectional": None, "attention": None,
    "attention_style": None, "input_feeding": None, "bridge": None,
}


@dataclass
class ShortlistOptions:
    """``mtkit export --shortlist K``: a vocabulary map for the ct2 engine (`mtkit.decode.shortlist`)."""

    per_source: int = 0  # target subwords per source subword; 0 = no shortlist
    frequent: int = 500  # most frequent target subwords, always allowed
    data: str | Path | None = None  # prepared data directory (default: the model's data.dir)
    max_sentences: int = 0  # count the first N training pairs only (0 = all)


def run_export(model: str | Path, output: str | Path, fmt: str = "ct2", quantization: str = "float32",
               checkpoint: str = "best", shortlist: ShortlistOptions | None = None, pair: str = "") -> Path:
    """Export ``model`` (a model directory or checkpoint) to ``output``; returns the path written.
    ``pair`` ("en-de"): the direction of a multilingual model an Argos package translates."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: use ct2 or argos")
    if quantization not in QUANTIZATIONS:
        raise ConfigError(f"--quantization {quantization!r}: use {', '.join(QUANTIZATIONS)}")
    output = Path(output)
    _check_output(output, fmt)
    loaded = load_model(model, checkpoint)
    check_expressible(loaded.config.model)
    if fmt == "argos" and loaded.meta.src_bpe != loaded.meta.tgt_bpe:
        raise ConfigError(f"--format argos: an Argos package holds one sentencepiece model, but {model} "
                          f"has two ({loaded.meta.src_bpe}, {loaded.meta.tgt_bpe}); use --format ct2")
    direction = _argos_pair(loaded, pair) if fmt == "argos" else None
    if loaded.meta.languages.get("tag") == "decoder":
        raise ConfigError(f"export: {model} starts its decoder from a language tag (data.language_tag "
                          "decoder); mtkit exports multilingual models with the tag on the source (the "
                          "default) only (docs/multilingual.md)")
    ct2 = require_ctranslate2()
    output.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
    try:
        target = stage / "model"
        target.mkdir()
        write_ct2(loaded, target, quantization, ct2)
        if shortlist is not None and shortlist.per_source > 0:
            if fmt != "ct2":
                raise ConfigError("--shortlist: Argos Translate runs CTranslate2 without vocabulary maps; "
                                  "export the shortlist with --format ct2")
            _write_shortlist(loaded, target, shortlist)
        if fmt == "ct2":
            _swap_in(target, output)
        else:
            if loaded.meta.languages:
                _one_direction(target, *direction)
            archive = _package_argos(loaded, target, stage, *direction)
            os.replace(archive, output)
            print(argos_sbd_note(output, direction[0]), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return output


def _write_shortlist(loaded: LoadedModel, directory: Path, opts: ShortlistOptions) -> None:
    """vmap.txt from the training data the model was trained on (its data.dir unless given), and the
    settings in the manifest; the ct2 engine uses a model's vmap.txt when there is one."""
    data = Path(opts.data) if opts.data is not None else Path(loaded.config.data.dir)
    if not (data / "meta.json").is_file():
        raise ConfigError(f"--shortlist: no prepared data in {data} (the model's data.dir) to count the "
                          "shortlist on; name it with --shortlist-data")
    counted, meta = read_meta(data), loaded.meta
    if (counted.src_vocab_size, counted.tgt_vocab_size) != (meta.src_vocab_size, meta.tgt_vocab_size):
        raise ConfigError(f"--shortlist-data {data}: its vocabularies ({counted.src_vocab_size}, "
                          f"{counted.tgt_vocab_size}) are not the model's ({loaded.meta.src_vocab_size}, "
                          f"{loaded.meta.tgt_vocab_size})")
    lists = build_shortlist(data, opts.per_source, opts.frequent, opts.max_sentences)
    src_pieces = _pieces(loaded.model_dir / meta.src_bpe)
    tgt_pieces = src_pieces if meta.tgt_bpe == meta.src_bpe else _pieces(loaded.model_dir / meta.tgt_bpe)
    rules = write_vmap(lists, src_pieces, tgt_pieces, directory / VMAP)
    manifest_path = directory / MANIFEST
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["shortlist"] = {"file": VMAP, "per_source": opts.per_source, "frequent": len(lists.always),
                             "source_entries": rules, "sentences_counted": lists.sentences,
                             "data": str(data.resolve())}
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def argos_sbd_note(package: Path, src_lang: str) -> str:
    """One line for after an Argos export: the package has no sentence-boundary model (no model that
    may be redistributed comes from a package registry), so Argos Translate fetches one at first use,
    which fails offline; the line says where Argos 1.11 looks for it first (docs/export.md)."""
    return (f"note: {package.name} holds no sentence-boundary model: Argos Translate 1.11 downloads "
            f"MiniSBD's {src_lang}.onnx at first use, which fails offline; copy it beforehand into "
            "$XDG_DATA_HOME/argos-translate/minisbd/ (default ~/.local/share/argos-translate/minisbd/), "
            "see docs/export.md")


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
    src_pieces = _pieces(loaded.model_dir / meta.src_bpe)
    tgt_pieces = src_pieces if meta.tgt_bpe == meta.src_bpe else _pieces(loaded.model_dir / meta.tgt_bpe)
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
    config = to_dict(loaded.config)
    manifest = {
        "format": FORMAT, "version": FORMAT_VERSION, "mtkit_version": __version__,
        "checkpoint": str(loaded.checkpoint.resolve()), "quantization": quantization, "max_positions": rows,
        "tokenize": {
            "method": "sentencepiece", "source_model": meta.src_bpe, "target_model": meta.tgt_bpe,
            "source_bos": False, "source_eos": loaded.config.model.source_eos,
            "decoder_start": tgt_pieces[BOS_ID],
            "how": "encode each source line with source_model into pieces (no BOS/EOS added); translate "
                   "the pieces; decode the output pieces (without </s>) with target_model",
        },
        "special_tokens": {"pad": tgt_pieces[PAD_ID], "unk": tgt_pieces[UNK_ID], "bos": tgt_pieces[BOS_ID],
                           "eos": tgt_pieces[EOS_ID]},
        "meta": meta.to_dict(),
        # what changes a translation travels with the model: the architecture, the decoding defaults and
        # the input limit (data.max_len: longer sentences are cut into parts, as the torch engine does);
        # the rest of the data section names the user's training files and stays behind
        "config": {"model": config["model"], "decoding": config["decoding"],
                   "data": {"max_len": config["data"]["max_len"]}},
    }
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n",
                                      encoding="utf-8")


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


def _pieces(path: Path) -> list[str]:
    bpe = Bpe(path)
    return bpe.id_to_piece(list(range(len(bpe))))


# ------------------------------------------------------------------------------------- outputs
def _check_output(output: Path, fmt: str) -> None:
    """Never overwrite what is not ours: a ct2 target must be absent, empty, or an earlier export."""
    if fmt == "ct2":
        if output.is_file():
            raise ConfigError(f"--output {output} is a file; a CTranslate2 model is a directory")
        if output.is_dir() and any(output.iterdir()) and not is_exported(output):
            raise ConfigError(f"--output {output} is a directory holding something other than an exported "
                              "model; choose a new or empty directory")
    elif output.is_dir():
        raise ConfigError(f"--output {output} is a directory; --format argos writes one file "
                          "(NAME.argosmodel)")


def _swap_in(built: Path, output: Path) -> None:
    """Rename the finished directory into place (an earlier export there is replaced only then)."""
    if not output.exists():
        os.replace(built, output)
        return
    old = output.with_name(f".{output.name}.{os.getpid()}.old")
    os.replace(output, old)
    os.replace(built, output)
    shutil.rmtree(old, ignore_errors=True)


def _argos_pair(loaded: LoadedModel, pair: str) -> tuple[str, str]:
    """The (source, target) languages of the Argos package: the model's pair, or for a multilingual
    model the one ``--pair`` names (required there)."""
    meta = loaded.meta
    pairs = [tuple(p) for p in meta.languages.get("pairs", [])]
    if not pairs:
        if pair and pair != f"{meta.src_lang}-{meta.tgt_lang}":
            raise ConfigError(f"--pair {pair}: the model translates {meta.src_lang}-{meta.tgt_lang} only")
        return meta.src_lang, meta.tgt_lang
    known = ", ".join("-".join(p) for p in pairs)
    if not pair:
        raise ConfigError(f"--format argos: the model is multilingual ({known}) and an Argos package "
                          "translates one pair; choose it with --pair (one package per pair)")
    src, _, tgt = pair.partition("-")
    if (src, tgt) not in pairs:
        raise ConfigError(f"--pair {pair}: the model translates {known} only")
    return src, tgt


def _one_direction(model: Path, src: str, tgt: str) -> None:
    """Make an exported multilingual model one of its directions: CTranslate2 itself prepends the
    target language's tag to every source (config.json: the tag as bos_token, add_source_bos), so a
    runtime that adds no tag — Argos Translate — gets the language asked for. The manifest says so and
    describes a model of one pair (mtkit's ct2 engine then adds no tag of its own)."""
    from mtkit.data.corpora import tag

    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    config.update(bos_token=tag(tgt), add_source_bos=True)
    (model / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    manifest = json.loads((model / MANIFEST).read_text(encoding="utf-8"))
    manifest["tokenize"]["source_bos"] = tag(tgt)
    manifest["direction_of"] = manifest["meta"]["languages"]
    manifest["meta"].update(languages={}, src_lang=src, tgt_lang=tgt)
    (model / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _package_argos(loaded: LoadedModel, model: Path, stage: Path, src: str, tgt: str) -> Path:
    """Zip an Argos Translate package: one top directory with metadata.json, model/ (CTranslate2),
    sentencepiece.model and README.md, as `argostranslate.package.install_from_path` expects."""
    meta = loaded.meta
    name = f"translate-{src}_{tgt}-1_0"
    root = stage / name
    root.mkdir()
    os.replace(model, root / "model")
    shutil.copyfile(root / "model" / meta.src_bpe, root / "sentencepiece.model")
    metadata = {
        "package_version": "1.0", "argos_version": "1.9.0", "type": "translate",
        "name": f"{src}→{tgt} (mtkit)", "code": f"translate-{src}_{tgt}",
        "from_code": src, "from_name": src, "to_code": tgt, "to_name": tgt, "links": [],
    }
    (root / "metadata.json").write_text(json.dumps(metadata, indent=2, ensure_ascii=False) + "\n",
                                        encoding="utf-8")
    (root / "README.md").write_text(
        f"# {src} → {tgt}\n\nA Transformer trained with mtkit {__version__} and exported "
        f"from {loaded.checkpoint.name} with `mtkit export --format argos`.\n", encoding="utf-8")
    archive = stage / f"{name}.argosmodel"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(root.rglob("*")):
            zf.write(path, path.relative_to(stage).as_posix())
    return archive


__all__ = ["FORMATS", "QUANTIZATIONS", "ShortlistOptions", "argos_sbd_note", "check_expressible",
           "position_rows", "run_export", "transformer_spec", "write_ct2"]
