"""Argos Translate packages (what LibreTranslate runs): an exported CTranslate2 model made one direction
of a multilingual model where it is one, zipped with its sentencepiece model, ``metadata.json`` and a
README as ``argostranslate.package.install_from_path`` expects.
"""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

from mtkit import __version__
from mtkit.data.corpora import tag
from mtkit.decode.loader import LoadedModel
from mtkit.errors import ConfigError
from mtkit.interop.manifest import manifest_json, write_manifest


def argos_sbd_note(package: Path, src_lang: str) -> str:
    """One line for after an Argos export: the package has no sentence-boundary model (no model that
    may be redistributed comes from a package registry), so Argos Translate fetches one at first use,
    which fails offline; the line says where Argos 1.11 looks for it first (docs/export.md)."""
    return (f"note: {package.name} holds no sentence-boundary model: Argos Translate 1.11 downloads "
            f"MiniSBD's {src_lang}.onnx at first use, which fails offline; copy it beforehand into "
            "$XDG_DATA_HOME/argos-translate/minisbd/ (default ~/.local/share/argos-translate/minisbd/), "
            "see docs/export.md")



def argos_pair(loaded: LoadedModel, pair: str) -> tuple[str, str]:
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


def one_direction(model: Path, src: str, tgt: str) -> None:
    """Make an exported multilingual model one of its directions: CTranslate2 itself prepends the
    target language's tag to every source (config.json: the tag as bos_token, add_source_bos), so a
    runtime that adds no tag — Argos Translate — gets the language asked for. The manifest says so and
    describes a model of one pair (mtkit's ct2 engine then adds no tag of its own)."""
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    config.update(bos_token=tag(tgt), add_source_bos=True)
    (model / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    manifest = manifest_json(model)
    manifest["tokenize"]["source_bos"] = tag(tgt)
    manifest["direction_of"] = manifest["meta"]["languages"]
    manifest["meta"].update(languages={}, src_lang=src, tgt_lang=tgt)
    write_manifest(model, manifest)


def package_argos(loaded: LoadedModel, model: Path, stage: Path, src: str, tgt: str) -> Path:
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


__all__ = ["argos_pair", "argos_sbd_note", "one_direction", "package_argos"]
