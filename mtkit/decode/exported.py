"""An exported model directory: what `mtkit export --format ct2` writes beside CTranslate2's own files
(the manifest, ``mtkit_export.json``), how it is recognised and read, and how mtkit's device and
precision options map to CTranslate2's. Nothing here imports ctranslate2 except
`require_ctranslate2`, so a directory can be recognised and its manifest read without it; the engine
that searches such a directory is `mtkit.decode.ct2`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from mtkit.config.experiment import Config, apply_overrides, from_dict
from mtkit.data.meta import DataMeta
from mtkit.device import check_decode_precision
from mtkit.errors import CheckpointError, ConfigError, DataError, MtkitError
from mtkit.textio import warn

MANIFEST = "mtkit_export.json"
VMAP = "vmap.txt"  # the vocabulary map (shortlist) `mtkit export --shortlist` writes (mtkit.decode.shortlist)
FORMAT = "mtkit-ct2"
FORMAT_VERSION = 2  # 2: the manifest's config holds data.max_len (version 1 exports lacked it)


def require_ctranslate2() -> ModuleType:
    """The ctranslate2 module, or one line saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise MtkitError("the ct2 engine needs the optional package ctranslate2: "
                         "pip install 'mtkit[ct2]' (or pip install 'ctranslate2>=4.5,<5')") from None
    return ctranslate2


def is_exported(path: str | Path) -> bool:
    """True for a directory written by `mtkit export --format ct2` (checked without ctranslate2)."""
    path = Path(path)
    return path.is_dir() and (path / MANIFEST).is_file() and (path / "model.bin").is_file()


@dataclass
class ExportManifest:
    """What ``mtkit_export.json`` records beside the CTranslate2 files."""

    config: Config  # the exported model's config (its decoding section is the default search)
    meta: DataMeta  # vocabulary sizes, languages, sentencepiece file names (beside the manifest)
    max_positions: int | None  # longest sequence the exported position table covers (None: any)
    quantization: str
    checkpoint: str
    step: int | None


def read_manifest(directory: str | Path, overrides: Sequence[str] = ()) -> ExportManifest:
    """Read and check the manifest of an exported directory; ``overrides`` are ``decoding.key=value``
    strings applied over the stored decoding section (as for a model directory)."""
    path = Path(directory) / MANIFEST
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: unreadable export manifest ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CheckpointError(f"{path}: not an mtkit export manifest")
    if raw.get("version") not in (1, FORMAT_VERSION):
        raise CheckpointError(f"{path}: export format version {raw.get('version')} is not "
                              f"{FORMAT_VERSION}; export the model again with this mtkit")
    try:
        if raw["version"] == 1 or "max_len" not in dict(raw["config"]).get("data", {}):
            warn(f"{path}: written by an older mtkit without the model's input limit (data.max_len), so "
                 "long sentences are cut at decoding.max_input_tokens only, unlike the model directory; "
                 "export the model again")
        config = from_dict(apply_overrides(raw["config"], list(overrides)), stored=True)
        meta = DataMeta.from_dict(raw["meta"], str(path))
        positions = raw.get("max_positions")
        return ExportManifest(config, meta, int(positions) if positions is not None else None,
                              str(raw["quantization"]), str(raw["checkpoint"]), raw.get("step"))
    except (KeyError, TypeError, ValueError, DataError) as exc:
        if isinstance(exc, ConfigError):
            raise
        raise CheckpointError(f"{path}: corrupt export manifest ({exc})") from None


def resolve_device(name: str, ct2: ModuleType) -> tuple[str, int]:
    """CTranslate2's (device, index) for mtkit's --device: auto is CUDA when CTranslate2 sees a GPU."""
    gpus = ct2.get_cuda_device_count()
    if name == "auto":
        return ("cuda", 0) if gpus > 0 else ("cpu", 0)
    if name == "cpu":
        return "cpu", 0
    if name == "cuda" or name.startswith("cuda:"):
        index = name.partition(":")[2]
        if index and not index.isdigit():
            raise ConfigError(f"--device {name!r}: expected auto, cpu, cuda or cuda:N")
        if gpus == 0:
            raise ConfigError(f"--device {name}: CTranslate2 sees no CUDA GPU on this machine "
                              "(use cpu or auto)")
        if int(index or 0) >= gpus:
            raise ConfigError(f"--device {name}: GPU {index} requested but CTranslate2 sees only {gpus}")
        return "cuda", int(index or 0)
    raise ConfigError(f"--device {name!r}: the ct2 engine runs on auto, cpu, cuda or cuda:N")


_COMPUTE = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "auto": "default"}


def compute_type(precision: str, int8: bool) -> str:
    """CTranslate2's compute_type for --precision/--int8; auto keeps the type chosen at export."""
    check_decode_precision(precision, int8)
    if int8:
        return "int8_float32"
    return _COMPUTE[precision]
