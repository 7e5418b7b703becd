"""The `mtkit export` stage: a trained Transformer → a CTranslate2 model directory (``--format ct2``)
or the same model packaged for Argos Translate and LibreTranslate (``--format argos``); ``--format hf``
is `mtkit.interop.hf`'s.

The conversion is `mtkit.interop.ct2_spec`'s, exact or refused before anything is written; the package
`mtkit.interop.argos`'s. An exported directory holds the CTranslate2 files, the sentencepiece model(s)
and ``mtkit_export.json`` (`mtkit.interop.manifest`), so `mtkit translate -m DIR` runs it with mtkit's
own pre- and post-processing. Outputs are built beside their target and renamed into place
(`mtkit.staging`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from mtkit.data.bpe import Bpe
from mtkit.data.meta import read_meta
from mtkit.decode.loader import LoadedModel, load_model
from mtkit.decode.shortlist import build_shortlist, write_vmap
from mtkit.errors import ConfigError
from mtkit.interop.argos import argos_pair, argos_sbd_note, one_direction, package_argos
from mtkit.interop.ct2_spec import check_expressible, position_rows, transformer_spec, write_ct2
from mtkit.interop.manifest import VMAP, is_exported, manifest_json, require_ctranslate2, write_manifest
from mtkit.staging import replace_directory, stage_beside

FORMATS = ("ct2", "argos")
QUANTIZATIONS = ("float32", "int8", "int8_float32", "bfloat16", "float16")


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
    direction = argos_pair(loaded, pair) if fmt == "argos" else None
    if loaded.meta.languages.get("tag") == "decoder":
        raise ConfigError(f"export: {model} starts its decoder from a language tag (data.language_tag "
                          "decoder); mtkit exports multilingual models with the tag on the source (the "
                          "default) only (docs/multilingual.md)")
    ct2 = require_ctranslate2()
    with stage_beside(output) as stage:
        target = stage / "model"
        target.mkdir()
        write_ct2(loaded, target, quantization, ct2)
        if shortlist is not None and shortlist.per_source > 0:
            if fmt != "ct2":
                raise ConfigError("--shortlist: Argos Translate runs CTranslate2 without vocabulary maps; "
                                  "export the shortlist with --format ct2")
            _write_shortlist(loaded, target, shortlist)
        if fmt == "ct2":
            replace_directory(target, output)
        else:
            if loaded.meta.languages:
                one_direction(target, *direction)
            archive = package_argos(loaded, target, stage, *direction)
            os.replace(archive, output)
            print(argos_sbd_note(output, direction[0]), file=sys.stderr, flush=True)
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
    src_pieces = Bpe(loaded.model_dir / meta.src_bpe).pieces()
    tgt_pieces = src_pieces if meta.tgt_bpe == meta.src_bpe else Bpe(loaded.model_dir / meta.tgt_bpe).pieces()
    rules = write_vmap(lists, src_pieces, tgt_pieces, directory / VMAP)
    manifest = manifest_json(directory)
    manifest["shortlist"] = {"file": VMAP, "per_source": opts.per_source, "frequent": len(lists.always),
                             "source_entries": rules, "sentences_counted": lists.sentences,
                             "data": str(data.resolve())}
    write_manifest(directory, manifest)


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


#: the names `mtkit.export` offered (the module's path before mtkit.interop), with where they live now
__all__ = ["FORMATS", "QUANTIZATIONS", "ShortlistOptions", "argos_sbd_note", "check_expressible",
           "position_rows", "run_export", "transformer_spec", "write_ct2"]
