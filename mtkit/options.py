"""The two option dataclasses of a `Translator`: ``LoadOptions`` (which model, and how it runs) and
``SearchOptions`` (how it searches).

They live below the translator and its engines because both sides read them: the Translator takes
them from its caller and hands ``LoadOptions`` to the engine it opens (`mtkit.decode.engine`,
`mtkit.decode.torch_engine`, `mtkit.decode.ct2`). Here, the engines need not import the translator
that imports them. Both are runtime choices: nothing here is read from, or written to, a checkpoint.
`mtkit.decode.translator` re-exports them, and ``from mtkit import LoadOptions`` works too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass
class LoadOptions:
    """Which model and where it runs."""

    device: str = "auto"  # auto, cpu, cuda, cuda:N, mps
    checkpoint: str = "best"  # best, last, or a checkpoint file
    precision: str = "auto"  # auto, fp32, bf16, fp16 (see mtkit.device.decode_dtype)
    int8: bool = False  # dynamic int8 quantization of the linear layers (CPU)
    threads: int = 0  # CPU threads while translating (0 = all allowed cores)
    ensemble: Sequence[str | Path] = ()  # more model directories to ensemble with
    engine: str = "auto"  # torch, ct2 (an exported CTranslate2 directory), or auto: decided by the directory
    shortlist: bool = True  # ct2 engine: use the export's vocabulary map (vmap.txt) where it has one


@dataclass
class SearchOptions:
    """How to search. ``overrides`` are ``decoding.key=value`` strings over the model's stored
    decoding section (beam size, length penalty, length limits, sampling shape …)."""

    overrides: Sequence[str] = ()
    nbest: int = 1
    sample: bool = False
    seed: int | None = None
    attention_layer: int = -1
    max_tokens: int = 0  # batch budget: source subwords × beam (× samples); 0 = auto (decode.translator)
    glossary: str | Path | None = None  # terms the translation must use (mtkit.decode.glossary; torch engine)
    glossary_ignore_case: bool = False  # match the glossary's source terms in any case
    soft_bonus: float | None = None  # None: constraints are hard; a number: soft, this bonus per subword
    scores: bool = True  # exact scores (ct2: one more pass for a hypothesis cut at the length limit);
    # False where nothing reads them (plain text output): the text is the same, the search faster
    tgt_lang: str = ""  # the language to translate into: needed where a model knows several (data.corpora)


__all__ = ["LoadOptions", "SearchOptions"]
