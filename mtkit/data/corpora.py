"""Multilingual data: the corpora of ``data.corpora``, their language tags, and temperature sampling.

One model translates into several languages when it is told which one is wanted by a tag:
``<2de>``, ``<2es>``, one subword (a user-defined piece of the BPE model, never split). Where it goes
is ``data.language_tag``:

- ``source`` (Johnson et al. 2017): before the source sentence's own subwords, the same way at
  training (`mtkit prepare` writes tagged source text and encodes the tag as its id) and at
  translation (the Translator prepends the id of ``--tgt-lang``'s tag). Targets hold no tag.
- ``decoder``: the decoder's first input, in place of BOS. `mtkit prepare` stores it as the first
  subword of each target; a batch (`mtkit.data.batching.collate`) feeds it where BOS would be and
  never asks the model to predict it; the search starts from it (``search(start=…)``). The source is
  left as it is.

Corpora differ in size, and a model trained on their plain union starves the small ones. Temperature
sampling (Arivazhagan et al. 2019) gives corpus i the share p_i ∝ q_i^(1/T) of the training pairs,
q_i being its share of the pairs (times its weight): T = 1 keeps the sizes, larger T evens them out.
mtkit reaches those shares by repeating the smaller corpora, the one furthest below its share being
used once, whole: no pair is thrown away. The shards hold each pair once; each epoch's batches are
drawn from them by the rule (``train_draws``: each corpus ``times`` over, whole passes plus a sample
of its pairs drawn afresh every epoch, `mtkit.data.batching.TokenBatchSampler`). The BPE model is
trained on the same mix (the tagged training text repeats the smaller corpora as an epoch does), so no
language is starved of subwords either.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from mtkit.config.data_sections import CorpusConfig, DataConfig
from mtkit.errors import ConfigError
from mtkit.textio import read_lines, scan_pair

LANGUAGE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,15}\Z")
SINGLE_PAIR_KEYS = ("train_src", "train_tgt", "dev_src", "dev_tgt", "test_src", "test_tgt")


def tag(language: str) -> str:
    """The source tag that asks for a translation into ``language``."""
    return f"<2{language}>"


def check_corpora(data: DataConfig) -> list[CorpusConfig]:
    """data.corpora, checked: one line naming the first mistake (the files are checked as they are read)."""
    given = [k for k in SINGLE_PAIR_KEYS if getattr(data, k)]
    if given:
        raise ConfigError(f"data.corpora replaces data.{given[0]}: give each file inside a corpus of "
                          "data.corpora (docs/multilingual.md)")
    for n, c in enumerate(data.corpora):
        where = f"data.corpora[{n}]"
        for key in ("train_src", "train_tgt", "src_lang", "tgt_lang"):
            if not getattr(c, key):
                raise ConfigError(f"{where}.{key} is not set (each corpus needs train_src, train_tgt, "
                                  "src_lang and tgt_lang)")
        for key in ("src_lang", "tgt_lang"):
            if not LANGUAGE.match(getattr(c, key)):
                raise ConfigError(f"{where}.{key}: {getattr(c, key)!r} is not a language code (a letter, "
                                  "then up to 15 letters, digits, _ or -)")
        for split in ("dev", "test"):
            src, tgt = getattr(c, f"{split}_src"), getattr(c, f"{split}_tgt")
            if bool(src) != bool(tgt):
                raise ConfigError(f"{where}: give both {split}_src and {split}_tgt, or neither")
        if c.weight <= 0:
            raise ConfigError(f"{where}.weight must be above 0, not {c.weight}")
    if not any(c.dev_src for c in data.corpora):
        raise ConfigError("data.corpora: no corpus has dev_src / dev_tgt; validation needs at least one")
    return list(data.corpora)


def languages(corpora: list[CorpusConfig], side: str = "source") -> dict[str, Any]:
    """The languages a model of these corpora knows, as kept in meta.json (and every checkpoint);
    ``side``: where the tag goes (data.language_tag)."""
    pairs = [list(p) for p in dict.fromkeys((c.src_lang, c.tgt_lang) for c in corpora)]
    return {"tag": side, "src": sorted({c.src_lang for c in corpora}),
            "tgt": sorted({c.tgt_lang for c in corpora}), "pairs": pairs}


def repeats(sizes: list[int], weights: list[float], temperature: float) -> list[float]:
    """How many times each corpus is used so that its share of the whole is ∝ (weight·size)^(1/T); the
    corpus furthest below its share is used once. A corpus of no pairs is used 0 times."""
    total = sum(w * n for w, n in zip(weights, sizes, strict=True))
    if total <= 0:
        return [0.0 for _ in sizes]
    share = [(w * n / total) ** (1.0 / temperature) if n else 0.0
             for w, n in zip(weights, sizes, strict=True)]
    scale = max(n / p for n, p in zip(sizes, share, strict=True) if p > 0)
    return [p * scale / n if n else 0.0 for n, p in zip(sizes, share, strict=True)]


@dataclass
class TaggedSplit:
    """One split of all corpora as tagged plain text: what `mtkit prepare` encodes."""

    src: Path
    tgt: Path
    counts: list[dict[str, Any]] = field(default_factory=list)  # per corpus: pair, input, written


def _pairs(c: CorpusConfig, split: str) -> tuple[str, str]:
    return getattr(c, f"{split}_src"), getattr(c, f"{split}_tgt")


def _read_pairs(c: CorpusConfig, split: str) -> Iterator[tuple[str, str]]:
    src, tgt = _pairs(c, split)
    return zip(read_lines(src, strict=True), read_lines(tgt, strict=True), strict=False)  # counted before


def _tagged_pair(c: CorpusConfig, src: str, tgt: str, side: str) -> tuple[str, str]:
    """A pair with its corpus's tag: before a non-empty source line, or (side "decoder") before every
    target line, empty or not, since the decoder's first input is taken from there."""
    if side == "decoder":
        return src, f"{tag(c.tgt_lang)} {tgt}"
    return (f"{tag(c.tgt_lang)} {src}" if src.strip() else "", tgt)


def write_tagged(corpora: list[CorpusConfig], split: str, out: Path, temperature: float,
                 seed: int, side: str = "source") -> TaggedSplit | None:
    """Write ``split`` of every corpus that has it as OUT/split.src / split.tgt: each pair tagged with
    its corpus's target language (on ``side``: data.language_tag); the training split corpus after
    corpus, each pair once, with each corpus's temperature repetition (``times``) recorded; dev and test
    with the corpora's lines interleaved. None when no corpus has the split."""
    chosen = [c for c in corpora if _pairs(c, split)[0]]
    if not chosen:
        return None
    sizes = [scan_pair(*_pairs(c, split)) for c in chosen]
    result = TaggedSplit(out / f"{split}.src", out / f"{split}.tgt")
    with open(result.src, "w", encoding="utf-8") as fs, open(result.tgt, "w", encoding="utf-8") as ft:
        if split != "train":  # interleaved, so that the first N (training.valid_max_sentences) hold each
            rows = [[_tagged_pair(c, s, g, side) for s, g in _read_pairs(c, split)] for c in chosen]
            for group in itertools.zip_longest(*rows):
                for row in filter(None, group):
                    fs.write(row[0] + "\n")
                    ft.write(row[1] + "\n")
            result.counts = [{"pair": f"{c.src_lang}-{c.tgt_lang}", "input": len(r), "written": len(r)}
                             for c, r in zip(chosen, rows, strict=True)]
            return result
        times = repeats(sizes, [c.weight for c in chosen], temperature)
        for c, n, t in zip(chosen, sizes, times, strict=True):
            for s, g in _read_pairs(c, split):
                ts, tg = _tagged_pair(c, s, g, side)
                fs.write(ts + "\n")
                ft.write(tg + "\n")
            result.counts.append({"pair": f"{c.src_lang}-{c.tgt_lang}", "input": n, "written": n,
                                  "times": t})
    return result


def epoch_draw(first: int, end: int, times: float, rng: np.random.Generator,
               dtype: type = np.int64) -> np.ndarray:
    """One epoch's sentences of the corpus at [first, end) of a training split: each of them
    ``int(times)`` over, then a sample of them (without replacement, in order) for the fraction."""
    ids = np.arange(first, end, dtype=dtype)
    extra = round((times - int(times)) * len(ids))
    sample = np.sort(rng.choice(ids, extra, replace=False)) if extra else ids[:0]
    return np.concatenate([*[ids] * int(times), sample])


def bpe_sample(split: TaggedSplit, seed: int) -> TaggedSplit:
    """The tagged training text as one epoch draws it (``epoch_draw`` of each corpus), for training the
    BPE model on the same mix as the model: OUT/bpe.src / bpe.tgt."""
    rng = np.random.default_rng(seed)
    sample = TaggedSplit(split.src.with_name("bpe.src"), split.tgt.with_name("bpe.tgt"))
    with (open(split.src, encoding="utf-8") as fs, open(split.tgt, encoding="utf-8") as ft,
          open(sample.src, "w", encoding="utf-8") as out_s, open(sample.tgt, "w", encoding="utf-8") as out_t):
        pairs = zip(fs, ft, strict=False)
        for count in split.counts:
            n = count["input"]
            uses = np.bincount(epoch_draw(0, n, count["times"], rng), minlength=n)
            for (s, g), k in zip(itertools.islice(pairs, n), uses.tolist(), strict=True):
                out_s.write(s * k)
                out_t.write(g * k)
    return sample


def train_draws(langs: dict[str, Any], kept: int) -> list[tuple[int, int, float]]:
    """Each corpus's (first, end, times) in a prepared training split of ``kept`` pairs (the corpora
    lie one after the other), for drawing each epoch's sentences; [] for a model of one pair or a data
    directory whose shards already repeat the corpora (prepared before the draws were per epoch)."""
    counts = langs.get("train") or []
    if not counts or any("kept" not in c or "times" not in c for c in counts):
        return []
    if sum(c["kept"] for c in counts) != kept:
        return []
    ends = list(itertools.accumulate(c["kept"] for c in counts))
    return [(end - c["kept"], end, float(c["times"])) for c, end in zip(counts, ends, strict=True)]


def line_directions(langs: dict[str, Any], split: str, kept: int, n: int) -> list[str] | None:
    """The direction ("en-de") of each of the first ``n`` lines of a prepared dev or test split that
    holds ``kept`` pairs, from the counts `write_tagged` recorded and its interleaving; None for a model
    of one language pair, or where the split lost lines to filters (data.filter_dev: ``kept`` is not
    what was written) and the order cannot be rebuilt."""
    counts = langs.get(split)
    if not counts or sum(c["written"] for c in counts) != kept or n > kept:
        return None
    rows = [[c["pair"]] * c["written"] for c in counts]
    return [pair for group in itertools.zip_longest(*rows) for pair in group if pair is not None][:n]


def split_tags(lines: list[str], tag_ids: dict[str, int]) -> tuple[list[str], list[int | None]]:
    """Tagged lines → (the lines without their tag, the tag's id or None for each)."""
    texts, ids = [], []
    for line in lines:
        head, sep, rest = line.partition(" ")
        if sep and head in tag_ids:
            texts.append(rest)
            ids.append(tag_ids[head])
        else:
            texts.append(line)
            ids.append(None)
    return texts, ids


__all__ = ["LANGUAGE", "TaggedSplit", "bpe_sample", "check_corpora", "epoch_draw", "languages",
           "line_directions", "repeats", "split_tags", "tag", "train_draws", "write_tagged"]
