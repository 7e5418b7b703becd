"""The data and bpe sections of the experiment config (`mtkit.config.experiment` holds the rest and the
loader), and ``config_field``: a dataclass field with its documentation, range and applicability.

A multilingual model is configured by ``data.corpora``: a list of corpora, each with its two languages
(``CorpusConfig``); `mtkit prepare` tags each pair with its target language (`mtkit.data.corpora`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from mtkit.config.checks import Condition, Not
from mtkit.vocab import BPE_SAMPLE_SENTENCES


def _f(default: Any, doc: str, lo: float | None = None, hi: float | None = None,
       when: dict[str, Condition] | None = None) -> Any:
    """A dataclass field with its documentation, optional inclusive range and the conditions under
    which it applies (``when``, see mtkit.config.checks: set elsewhere, the key is refused)."""
    meta: dict[str, Any] = {"doc": doc}
    if when:
        meta["when"] = when
    if lo is not None:
        meta["min"] = lo
    if hi is not None:
        meta["max"] = hi
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass
class CorpusConfig:
    """One parallel corpus of a multilingual model: an item of data.corpora."""

    train_src: str = ""
    train_tgt: str = ""
    src_lang: str = ""
    tgt_lang: str = ""
    dev_src: str = ""
    dev_tgt: str = ""
    test_src: str = ""
    test_tgt: str = ""
    weight: float = 1.0


@dataclass
class SourceConfig:
    """One training corpus of data.sources: a TSV or TMX file (``path``) or a Moses pair (src, tgt)."""

    path: str = ""
    src: str = ""
    tgt: str = ""
    src_column: str = ""
    tgt_column: str = ""
    quoting: Literal["csv", "none"] = "csv"
    weight: float = 1.0
    clean: dict[str, Any] = field(default_factory=dict)


@dataclass
class DataConfig:
    """Where the raw parallel text is and how `mtkit prepare` filters it."""

    train_src: str = _f("", "Raw training source file (plain text or .gz), one segment per line.")
    train_tgt: str = _f("", "Raw training target file, line-aligned with train_src.")
    dev_src: str = _f("", "Raw development source file (validation during training).")
    dev_tgt: str = _f("", "Raw development target file.")
    test_src: str = _f("", "Raw test source file (optional; binarized too when given).")
    test_tgt: str = _f("", "Raw test target file (optional).")
    src_lang: str = _f("src", "Source language code, used in file names and reports.")
    tgt_lang: str = _f("tgt", "Target language code.")
    dir: str = _f("data-bin", "Experiment data directory that `prepare` writes shards and BPE models to.")
    max_len: int = _f(250, "Drop training pairs with more subword tokens than this on either side.", 1)
    min_len: int = _f(1, "Drop training pairs with fewer subword tokens than this on either side.", 0)
    max_len_ratio: float = _f(
        3.0, "Drop training pairs whose token-length ratio (longer/shorter) exceeds this; 0 disables.", 0
    )
    sources: list[SourceConfig] = _f(
        [], "Training corpora, instead of train_src / train_tgt: a list of mappings, each a TSV or TMX "
        "file (path; .gz too; src_column and tgt_column: a 1-based number or a header name, default 1 "
        "and 2; quoting: csv or none) or a Moses pair (src, tgt), with weight (default 1: its kept pairs "
        "are used weight times, a fraction as a seeded sample) and clean (keys of the clean section for "
        "this corpus alone). Their pairs in src_lang / tgt_lang are read, cleaned when clean.enabled, "
        "and joined (docs/cleaning.md)."
    )
    filter_dev: bool = _f(
        False, "Apply the filters to dev/test too (normally they are kept whole, empty lines included, so "
        "they stay line-aligned with the raw files)."
    )
    corpora: list[CorpusConfig] = _f(
        [], "Several corpora for one multilingual model, instead of train_src … test_tgt: a list of "
        "mappings with train_src, train_tgt, src_lang, tgt_lang (required), dev_src, dev_tgt, test_src, "
        "test_tgt and weight (default 1). Each source is tagged with its target language (<2xx>) and the "
        "smaller corpora are repeated by temperature sampling (docs/multilingual.md)."
    )
    temperature: float = _f(
        5.0, "Sampling temperature of data.corpora: corpus i makes up a share of the training data "
        "proportional to (weight_i * size_i)^(1/T); 1 keeps the sizes, larger evens them out.", 1,
        when={"corpora": Not([])}
    )
    language_tag: Literal["source", "decoder"] = _f(
        "source", "Where the tag naming the target language goes (data.corpora): source, a <2xx> token "
        "before the source sentence (Johnson et al. 2017), or decoder, the decoder's first input in "
        "place of BOS (no source token added). Measured: docs/multilingual.md.",
        when={"corpora": Not([])}
    )
    markup_augmentation: float = _f(
        0.0, "Share of the training pairs that `prepare` gives a placeholder (%s, %d, %1$s, %(name)s, "
        "{name}, ${NAME}) or an inline tag pair (<b>…</b>, <a href=\"…\">…</a>) on both sides at aligned "
        "places (a word copied from source to target, or the sentence's edges), drawn with "
        "training.seed, so that the model learns to carry markup (docs/formats.md); pairs that hold "
        "markup already are left as they are; one pair of files only (not data.corpora). 0 disables.", 0, 1
    )


@dataclass
class BpeConfig:
    """Subword segmentation (sentencepiece BPE)."""

    joint: bool = _f(True, "One BPE model and vocabulary shared by source and target.")
    vocab_size: int = _f(8000, "Vocabulary size of each BPE model.", 16)
    character_coverage: float = _f(
        1.0, "Share of characters the model must cover (1.0 for Latin scripts, ~0.9995 for CJK; "
        "sentencepiece accepts 0.98 to 1).", 0.98, 1.0
    )
    input_sentence_size: int = _f(
        BPE_SAMPLE_SENTENCES, "Sample at most this many sentences to train BPE (0 = use all).", 0
    )
    model: str = _f("", "Existing joint model (PREFIX.model) to reuse instead of training one; copied "
                    "into data.dir.")
    src_model: str = _f("", "Existing source model to reuse when joint is false (else one is trained).")
    tgt_model: str = _f("", "Existing target model to reuse when joint is false (else one is trained).")
    model_from: str = _f("", "Copy the BPE model(s) of a trained model (its directory or a .model file) "
                         "instead of training: the vocabulary a fine-tune of it (training.init_from) needs.")
    seed: int = _f(1, "Seed for sampling the BPE training sentences (when the corpus has more than "
                   "input_sentence_size).", when={"input_sentence_size": Not(0)})


config_field = _f  # for mtkit.config.experiment

__all__ = ["BpeConfig", "CorpusConfig", "DataConfig", "SourceConfig", "config_field"]
