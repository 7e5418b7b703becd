"""`mtkit import-hf` and `mtkit export --format hf`: MarianMT models (OPUS-MT) as Hugging Face
Transformers' ``save_pretrained`` writes them, into mtkit model directories and back.

Import reads ``config.json``, ``generation_config.json``, the weights (``model.safetensors``, or
``pytorch_model.bin`` loaded with ``weights_only``), ``source.spm``, ``target.spm``, ``vocab.json`` (and
``target_vocab.json`` where ``tokenizer_config.json`` says ``separate_vocabs``), and writes a model
directory every stage takes: ``config.yaml``, ``meta.json``, the sentencepiece model(s) renumbered in
mtkit's order (`mtkit.interop.spm_proto`) and ``checkpoint_best.pt``. Export writes the files
``MarianMTModel.from_pretrained`` and ``MarianTokenizer.from_pretrained`` read. The conversion tables
are `mtkit.interop.marian`'s. M2M100 and NLLB-200 directories (``model_type: m2m_100``) are read by
`mtkit.interop.hf_m2m100`, with `mtkit.interop.m2m100`'s tables. Both are exact or refuse in one line,
and both build their output beside it and rename it into place (`mtkit.staging`), so nothing is
written when they refuse.
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from mtkit import __version__
from mtkit.checkpoint import BEST, load_checkpoint, resolve_checkpoint, save_checkpoint
from mtkit.config.experiment import CONFIG_FILE, from_dict, save_config, to_dict
from mtkit.data.bpe import Bpe
from mtkit.data.corpora import tag
from mtkit.data.meta import DataMeta, read_meta, write_meta
from mtkit.errors import CheckpointError, ConfigError, DataError, MtkitError
from mtkit.interop.hf_card import model_card
from mtkit.interop.hf_files import own_pieces, read_json, read_weights
from mtkit.interop.hf_tokenizer import fast_tokenizer
from mtkit.interop.m2m100 import is_m2m100
from mtkit.interop.marian import (
    decoding_settings,
    embeddings,
    hf_settings,
    model_settings,
    to_hf,
    to_mtkit,
    vocab_order,
)
from mtkit.interop.marian import languages as marian_languages
from mtkit.interop.pegasus import final_norms, pegasus_config, permute_residual, to_pegasus
from mtkit.interop.pegasus import model_settings as pegasus_settings
from mtkit.interop.spm_proto import read_pieces, reorder
from mtkit.models import build_model
from mtkit.models.positions import marian_sinusoids
from mtkit.staging import replace_directory, stage_beside

TOKENIZER_FILES = ("source.spm", "target.spm", "vocab.json")


def _check_output(output: Path) -> None:
    """Nothing a user has is overwritten: ``output`` must be new or an empty directory (checked first,
    before any work, and again before the rename)."""
    if output.exists() and (not output.is_dir() or any(output.iterdir())):
        raise ConfigError(f"{output} exists and is not an empty directory; choose a new output")


def _staged(output: Path, build: Callable[[Path], None]) -> Path:
    """Run ``build`` into a new directory beside ``output``, then rename it into place."""
    _check_output(output)
    with stage_beside(output) as stage:
        build(stage)
        _check_output(output)
        replace_directory(stage, output)
    return output


# ------------------------------------------------------------------------------------------- import
def import_hf(source: str | Path, output: str | Path, src_lang: str | None = None) -> Path:
    """A MarianMT, Pegasus, M2M100 or NLLB directory → an mtkit model directory at ``output``; returns
    ``output``. ``src_lang``: an M2M100/NLLB model's source language (default: the tokenizer's)."""
    source, output = Path(source), Path(output)
    _check_output(output)
    if not (source / "config.json").is_file():
        raise ConfigError(f"{source}: not a MarianMT, Pegasus, M2M100 or NLLB directory (no config.json)")
    hf = read_json(source / "config.json")
    if is_m2m100(hf):
        from mtkit.interop.hf_m2m100 import read_m2m100

        return _write_model(source, output, *read_m2m100(source, hf, src_lang))
    pegasus = hf.get("model_type") == "pegasus"
    model = (pegasus_settings if pegasus else model_settings)(hf, str(source / "config.json"))
    model["source_eos"] = bool(hf.get("mtkit_source_eos", True))  # MarianTokenizer appends </s>
    tok = read_json(source / "tokenizer_config.json") if (source / "tokenizer_config.json").is_file() else {}
    separate = bool(tok.get("separate_vocabs", False))
    for name in TOKENIZER_FILES + (("target_vocab.json",) if separate else ()):
        if not (source / name).is_file():
            raise DataError(f"{source / name}: missing (a MarianMT tokenizer file)")
    gen_file = source / "generation_config.json"
    gen = read_json(gen_file) if gen_file.is_file() else hf  # older checkpoints kept these in config.json
    eos = hf.get("eos_token_id", 0)
    eos = eos[0] if isinstance(eos, list) and len(eos) == 1 else eos
    pad, start = hf.get("pad_token_id", 58100), hf.get("decoder_start_token_id", hf.get("pad_token_id"))
    if not all(isinstance(i, int) for i in (eos, pad, start)):
        raise ConfigError(f"{source / 'config.json'}: eos_token_id, pad_token_id and decoder_start_token_id "
                          "must be one token id each")
    decoding = decoding_settings(gen, pad, start,
                                 str(gen_file if gen_file.is_file() else source / "config.json"))
    src_vocab = read_json(source / "vocab.json")
    tgt_vocab = read_json(source / "target_vocab.json") if separate else src_vocab
    size = int(hf.get("vocab_size", 58101))
    tgt_size = int(hf.get("decoder_vocab_size") or size) if separate else size
    sizes = hf.get("mtkit_vocab_sizes")
    if pegasus and isinstance(sizes, list) and len(sizes) == 2:  # one vocab_size: the rows past each side's
        size, tgt_size = int(sizes[0]), int(sizes[1] if separate else sizes[0])  # own are padding
    # the sentencepiece pieces a vocabulary lacks: MarianTokenizer reads them as <unk> (`vocab_order`)
    src_bytes, tgt_bytes = (source / "source.spm").read_bytes(), (source / "target.spm").read_bytes()
    src_own, tgt_own = (own_pieces(data, str(source / name)) for data, name in
                        ((src_bytes, "source.spm"), (tgt_bytes, "target.spm")))
    tgt = vocab_order(tgt_vocab, tgt_size, pad, _id(tgt_vocab, "<unk>", source), eos, start,
                      str(source / ("target_vocab.json" if separate else "vocab.json")),
                      tgt_own if separate else src_own + tgt_own)
    src = tgt if not separate else vocab_order(
        src_vocab, size, src_vocab.get("<pad>", pad), _id(src_vocab, "<unk>", source),
        src_vocab.get("</s>", eos), src_vocab.get("<s>", src_vocab.get("<pad>", pad)),
        str(source / "vocab.json"), src_own)
    src_spm = reorder(src_bytes, src.pieces, str(source / "source.spm"))
    tgt_spm = reorder(tgt_bytes, tgt.pieces, str(source / "target.spm"))
    hf_state = read_weights(source)
    _check_positions(hf_state, model["d_model"], source)
    try:
        enc, dec = embeddings(hf_state, model)  # shared or not, as transformers loads them
        if pegasus and "lm_head.weight" in hf_state:  # an untied export of a model whose output layer is
            model["tie_embeddings"] = torch.equal(hf_state["lm_head.weight"], dec)  # its target embedding
        state = to_mtkit(hf_state, model, src, tgt)
        if pegasus:
            state.update(final_norms(hf_state))
    except ConfigError as exc:
        raise CheckpointError(f"{source}: {exc}") from None
    if hf.get("mtkit_sinusoid_layout") == "interleaved":  # exported from mtkit's own table: back
        state = permute_residual(state, model["d_model"], inverse=True)
        model["sinusoid_layout"] = "interleaved"
    if not state["output_bias"].any():  # all zero (no added pad row either): a model without one, as
        model["output_bias"] = False     # an mtkit model exported to hf comes back
        del state["output_bias"]
    joint = not separate and src_spm == tgt_spm
    names = ("bpe.model", "bpe.model") if joint else ("source.model", "target.model")
    meta = DataMeta(src_vocab_size=len(src.pieces), tgt_vocab_size=len(tgt.pieces), src_bpe=names[0],
                    tgt_bpe=names[1], joint=joint, shared_ids=not separate and not joint,
                    src_lang=str(tok.get("source_lang") or "src"),
                    tgt_lang=str(tok.get("target_lang") or "tgt"),
                    mtkit_version=__version__)
    targets = marian_languages(src)  # multilingual OPUS-MT: ">>deu<<" before the source asks for deu
    stored = hf.get("mtkit_languages")
    if stored:  # a multilingual mtkit model exported: its languages and where its tags go, as they were
        meta.languages = _stored_languages(stored, src if stored.get("tag") != "decoder" else tgt,
                                           source / "config.json")
    elif targets:
        meta.languages = {"tag": "source", "src": [meta.src_lang], "tgt": targets,
                          "pairs": [[meta.src_lang, t] for t in targets]}
    del hf_state  # its tensors that were copied (embeddings, q/k/v) go
    files = {names[0]: src_spm} if joint else {names[0]: src_spm, names[1]: tgt_spm}
    return _write_model(source, output, model, decoding, meta, state, files)


def _write_model(source: Path, output: Path, model: dict[str, Any], decoding: dict[str, Any], meta: DataMeta,
                 state: dict[str, torch.Tensor], files: dict[str, bytes]) -> Path:
    """The model directory of an import: the config, the sentencepiece ``files``, meta.json and the
    checkpoint, its tensors checked against the config first (names and shapes, nothing allocated)."""
    cfg = from_dict({"model": model, "decoding": decoding, "training": {"model_dir": str(output)},
                     "data": {"src_lang": meta.src_lang, "tgt_lang": meta.tgt_lang}}, stored=True)
    with torch.device("meta"):  # names and shapes checked against the model, without allocating one
        skeleton = build_model(cfg.model, meta.src_vocab_size, meta.tgt_vocab_size, meta.one_vocabulary())
    try:
        skeleton.load_state_dict(state, assign=True)
    except RuntimeError as exc:
        raise CheckpointError(f"{source}: the weights do not fit config.json "
                              f"({str(exc).strip().splitlines()[0][:160]})") from None

    def build(stage: Path) -> None:
        for name, data in files.items():
            (stage / name).write_bytes(data)
            Bpe(stage / name)  # sentencepiece reads it, with mtkit's special ids
        save_config(cfg, stage / CONFIG_FILE)
        write_meta(stage, meta)
        save_checkpoint({"model": state, "config": to_dict(cfg), "vocab": meta.to_dict(),
                         "step": 0, "epoch": 0, "metrics": {}, "imported_from": str(source.resolve())},
                        stage / BEST)

    return _staged(output, build)


def _stored_languages(stored: Any, order: Any, where: Path) -> dict[str, Any]:
    """``config.json``'s ``mtkit_languages`` (`export_hf` writes meta.json's ``languages``), checked: the
    tag of every target language is a piece of the side it goes on."""
    ok = isinstance(stored, dict) and stored.get("tag") in ("source", "decoder") and \
        isinstance(stored.get("tgt"), list) and all(isinstance(t, str) for t in stored["tgt"])
    missing = [t for t in stored["tgt"] if tag(t) not in order.pieces] if ok else []
    if not ok or missing:
        raise DataError(f"{where}: mtkit_languages " + (f"names {missing[0]!r}, whose tag {tag(missing[0])} "
                        "is not in the vocabulary" if ok else "is not a tag side and a list of languages"))
    return stored


def _id(vocab: dict[str, Any], piece: str, source: Path) -> int:
    if not isinstance(vocab.get(piece), int):
        raise DataError(f"{source / 'vocab.json'}: no {piece} token")
    return int(vocab[piece])


def _check_positions(state: dict[str, torch.Tensor], dim: int, source: Path) -> None:
    """Old ``save_pretrained`` files hold the sinusoid tables: they must be MarianMT's."""
    for key in ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight"):
        if key in state:
            table = state[key].float()
            expected = marian_sinusoids(table.size(0), dim) if table.size(1) == dim else None
            if expected is None or not torch.allclose(table, expected, atol=1e-5):
                raise CheckpointError(f"{source}: {key} is not MarianMT's sinusoid table")


# ------------------------------------------------------------------------------------------- export
def export_hf(model: str | Path, output: str | Path, checkpoint: str = "best", *, license: str = "unknown",
              scores: dict[str, float] | None = None) -> Path:
    """An mtkit Transformer → a Hugging Face directory at ``output`` that ``AutoTokenizer`` and
    ``AutoModelForSeq2SeqLM`` load by themselves: MarianMT for a post-norm model, Pegasus for a pre-norm
    one; MarianTokenizer where the model appends </s> to the source, else a fast ``tokenizer.json``; a
    model card (README.md) with ``license`` and the test ``scores`` (e.g. {"bleu": 27.1, "chrf": 55.0})."""
    output = Path(output)
    _check_output(output)
    file, model_dir = resolve_checkpoint(model, checkpoint)
    saved = load_checkpoint(file)  # the tensors alone: no model is built, so no second copy is held
    cfg = from_dict(saved["config"], stored=True)
    meta = DataMeta.from_dict(saved["vocab"], str(file)) if saved.get("vocab") else read_meta(model_dir)
    check_marian(cfg, meta)
    m, state = cfg.model, saved["model"]
    separate = not meta.one_vocabulary()
    if m.sinusoid_layout == "interleaved":  # the same model with MarianMT's/Pegasus' table (pegasus.py)
        state = permute_residual(state, m.d_model)
    config, gen = hf_settings(m, cfg.decoding, meta.src_vocab_size, meta.tgt_vocab_size)
    try:
        if m.norm == "post":
            shared = meta.one_vocabulary() and m.share_all_embeddings and \
                meta.src_vocab_size == meta.tgt_vocab_size
            config["share_encoder_decoder_embeddings"] = shared
            tensors = to_hf(state, m, shared)
        else:
            vocab = max(meta.src_vocab_size, meta.tgt_vocab_size)
            tied = not separate and m.share_all_embeddings and m.tie_embeddings
            config = pegasus_config(m, vocab, tied)
            tensors = to_pegasus(state, m, vocab, tied)
    except KeyError as exc:
        raise CheckpointError(f"{file}: no tensor {exc} (not a checkpoint of this model config)") from None
    config["mtkit_sinusoid_layout"] = m.sinusoid_layout
    config["mtkit_source_eos"] = m.source_eos
    config["mtkit_vocab_sizes"] = [meta.src_vocab_size, meta.tgt_vocab_size]
    langs = {"source_lang": meta.src_lang, "target_lang": meta.tgt_lang}
    tok = {"tokenizer_class": "MarianTokenizer", **langs,
           "separate_vocabs": separate, "model_max_length": 512, "unk_token": "<unk>", "eos_token": "</s>",
           "pad_token": "<pad>"}
    tags = [tag(t) for t in meta.languages.get("tgt", [])]
    if meta.languages:  # a multilingual model: import-hf gives it back its languages and tag side
        config["mtkit_languages"] = meta.languages
    card = model_card(cfg, meta, saved, config["architectures"][0], license, scores)

    def build(stage: Path) -> None:
        write_safetensors(stage / "model.safetensors", tensors)
        if not m.source_eos:  # MarianTokenizer would append </s>: a fast tokenizer that does not
            fast_tokenizer(model_dir / meta.src_bpe, source_eos=False, tags=tags).save_pretrained(stage)
            written = read_json(stage / "tokenizer_config.json")
            tok.clear()
            tok.update({**written, **langs})
        for name, value in (("config.json", config), ("generation_config.json", gen),
                            ("tokenizer_config.json", tok)):
            text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
            (stage / name).write_text(text, encoding="utf-8")
        (stage / "README.md").write_text(card, encoding="utf-8")
        # MarianTokenizer's files; with the fast tokenizer, what `mtkit import-hf` reads back
        for side, file in (("source", meta.src_bpe), ("target", meta.tgt_bpe)):
            shutil.copyfile(model_dir / file, stage / f"{side}.spm")
        vocabs = [("vocab.json", meta.src_bpe)] + ([("target_vocab.json", meta.tgt_bpe)] if separate else [])
        for name, file in vocabs:
            pieces = read_pieces((model_dir / file).read_bytes(), str(model_dir / file))
            ids = {p.piece: i for i, p in enumerate(pieces)}
            (stage / name).write_text(json.dumps(ids, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    return _staged(output, build)


def read_card_scores(path: str | Path) -> dict[str, float]:
    """The test scores for the model card: ``mtkit score --json``'s output (its first system's scores,
    under sacrebleu's names: BLEU, chrF2 …) or a JSON object of name → number."""
    path = Path(path)
    value = read_json(path)
    if isinstance(value.get("systems"), list) and value["systems"]:
        labels = value.get("labels") if isinstance(value.get("labels"), dict) else {}
        system = value["systems"][0]
        value = {str(labels.get(k, k)): v for k, v in (system.get("scores") or {}).items()}
    if not value or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()):
        raise DataError(f"{path}: expected `mtkit score --json` output or an object of score names and "
                        "numbers (e.g. {\"BLEU\": 27.1})")
    return {str(k): float(v) for k, v in value.items()}


def write_safetensors(path: Path, tensors: dict[str, torch.Tensor]) -> None:
    """A safetensors file (an 8-byte header length, a JSON header, the raw little-endian float32 data),
    written tensor by tensor from memory: ``safetensors.torch.save_file`` first copies every tensor to
    bytes, which doubles an export's peak memory (docs/results.md)."""
    if sys.byteorder != "little":
        raise MtkitError("export --format hf writes safetensors' little-endian data on little-endian "
                         "machines only")
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, t in tensors.items():
        size = t.numel() * 4
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for t in tensors.values():
            f.write(memoryview(t.float().contiguous().numpy()).cast("B"))


def check_marian(cfg: Any, meta: DataMeta) -> None:
    """Refuse, in one line naming the setting, a model no Transformers architecture represents exactly."""
    m = cfg.model
    if m.arch != "transformer":
        raise ConfigError(f"export --format hf: model.arch={m.arch!r}; only Transformers have a Hugging Face "
                          "equivalent (MarianMT, Pegasus); nothing was written")
    if m.positions != "sinusoidal":
        raise ConfigError(f"export --format hf: model.positions={m.positions!r}; MarianMT and Pegasus need "
                          "model.positions: sinusoidal (train with it; no Transformers architecture holds "
                          "this model exactly); nothing was written")
    if m.sinusoid_layout == "fairseq" or m.source_bos or m.decoder_bos:
        raise ConfigError(f"export --format hf: model.sinusoid_layout={m.sinusoid_layout!r}, "
                          f"model.source_bos={m.source_bos}, model.decoder_bos={m.decoder_bos} (an imported "
                          "M2M100/NLLB): "
                          "mtkit exports MarianMT and Pegasus only; nothing was written")
    if not meta.one_vocabulary() and not m.source_eos:
        raise ConfigError("export --format hf: separate vocabularies with model.source_eos=false: "
                          "MarianTokenizer (the one with two vocabularies) appends </s> to the source; "
                          "train with model.source_eos: true or a joint vocabulary; nothing was written")
    if meta.languages and m.source_eos:
        raise ConfigError("export --format hf: a multilingual model (data.corpora) with model.source_eos: "
                          "true: MarianTokenizer (the one that appends </s>) knows no mtkit language tags; "
                          "train with model.source_eos: false; nothing was written")


__all__ = ["check_marian", "export_hf", "import_hf", "read_card_scores"]
