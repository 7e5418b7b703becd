"""The two engines that search for a `Translator`, and which one runs a given directory.

An engine turns batches of source subword ids into hypotheses; everything around that (cleaning,
sentence splitting, BPE, batching, order, output formats) is the Translator's and the same for both:

* ``torch`` (`mtkit.decode.torch_engine.TorchEngine`): a model directory (or checkpoint, or ensemble),
  searched by `mtkit.decode.search` in PyTorch;
* ``ct2`` (`mtkit.decode.ct2.Ct2Model`): a directory written by `mtkit export --format ct2`, searched by
  CTranslate2. It runs without importing PyTorch (only attention matrices, when asked for, are
  tensors), which is what keeps an exported model's translation process small.

Each engine module is imported only when its engine is chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from mtkit.errors import ConfigError, MtkitError

if TYPE_CHECKING:
    from mtkit.config.experiment import Config, DecodingConfig
    from mtkit.data.meta import DataMeta
    from mtkit.decode.translation import Hypothesis
    from mtkit.options import LoadOptions

ENGINES = ("auto", "torch", "ct2")


class Engine(Protocol):
    """What a Translator needs from an engine."""

    config: Config  # the model's config; its decoding section is the default search
    meta: DataMeta  # vocabulary sizes and the sentencepiece models (files in ``model_dir``)
    model_dir: Path
    max_positions: int | None  # longest sequence the model's positions cover (None: any length)
    device: Any  # where it computes (a torch.device, or CTranslate2's device name)
    dtype: Any  # in what precision (a torch.dtype, or CTranslate2's compute type)
    model: Any  # what searches (the torch module or ensemble; the CTranslate2 translator)
    auto_max_tokens: int  # the batch budget of --max-tokens 0 (auto) on this engine; 0: the Translator's

    @property
    def num_attention_heads(self) -> int: ...

    def search(self, batch: list[list[int]], cfg: DecodingConfig, nbest: int = 1,
               need_attention: bool = False, sample: bool = False, start: int | None = None,
               scores: bool = True) -> list[list[Hypothesis]]:
        """Hypotheses (best first, at most ``nbest``) for each source in ``batch`` (subword ids, no
        padding, any order of lengths); ``start``: the decoder's first input, BOS where None (a
        decoder-side language tag: `mtkit.data.corpora`). ``scores`` False: a score that ranks
        nothing may be left inexact (`SearchOptions.scores`)."""
        ...


def resolve_engine(model: str | Path, engine: str = "auto") -> str:
    """"torch" or "ct2" for ``model``: auto picks ct2 for a directory written by `mtkit export
    --format ct2` and torch for anything else; an explicit engine must fit what ``model`` is."""
    from mtkit.interop.manifest import is_exported

    if engine not in ENGINES:
        raise ConfigError(f"--engine {engine!r}: use auto, torch or ct2")
    exported = is_exported(model)
    if engine == "auto":
        return "ct2" if exported else "torch"
    if engine == "torch" and exported:
        raise ConfigError(f"--engine torch: {model} is an exported CTranslate2 model; run it with "
                          "--engine ct2 (or auto), or use the model directory it was exported from")
    if engine == "ct2" and not exported:
        raise ConfigError(f"--engine ct2: {model} is not an exported model (no mtkit_export.json and "
                          f"model.bin); write one with `mtkit export -m {model} -o DIR`")
    return engine


def open_engine(engine: str, model: str | Path, load: LoadOptions, overrides: Sequence[str], threads: int,
                attention_layer: int = -1, seed: int | None = None) -> Engine:
    """Engine ``engine`` ("torch" or "ct2", from ``resolve_engine``) on ``model``, loaded and ready
    to search."""
    if engine == "ct2":
        from mtkit.decode.ct2 import Ct2Model

        return Ct2Model(model, load, overrides, threads, attention_layer, seed)
    from mtkit.decode.torch_engine import TorchEngine

    return TorchEngine(model, load, overrides, threads, attention_layer, seed)


def stored_languages(model: str | Path) -> dict[str, Any]:
    """The languages record of a model directory, checkpoint or export (`mtkit.data.corpora.languages`):
    {} for a model of one language pair, or where there is no record to read (loading will say why)."""
    from mtkit.data.meta import read_meta
    from mtkit.interop.manifest import is_exported, read_manifest

    try:
        if is_exported(model):
            return read_manifest(model).meta.languages
        path = Path(model)
        return read_meta(path if path.is_dir() else path.parent).languages
    except MtkitError:
        return {}


__all__ = ["ENGINES", "Engine", "open_engine", "resolve_engine", "stored_languages"]
