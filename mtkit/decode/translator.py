"""Translator: text in, text out, rebuilt entirely from a model directory (or one checkpoint).

Pipeline per chunk of input lines (so that long streams run in bounded memory): clean (control
characters) → cut each line into sentences, and a sentence longer than the model takes into pieces
(`mtkit.decode.segment`) → BPE-encode → sort all pieces by length and cut into token-budget batches →
search → restore the input order → join each line's pieces → BPE-decode. A model trained on sentences
is given sentences: a paragraph is translated sentence by sentence, each sentence an ordinary batch
member. Exactly one translation per input line, always: an empty line gives an empty translation
without touching the model, and nothing is ever dropped.

Settings come in two small dataclasses: ``LoadOptions`` (which model and how it runs: device,
precision, threads …) and ``SearchOptions`` (how it searches), defined in `mtkit.options` (the engines
read ``LoadOptions`` too) and re-exported here. Both are runtime choices: nothing here is read from,
or written to, a checkpoint except the model's own decoding section, which ``SearchOptions.overrides``
may change. A Translator leaves process-wide settings (PyTorch's thread count) as it found them.

Two engines search (`mtkit.decode.engine`): PyTorch with `mtkit.decode.search` for a model directory,
and CTranslate2 for a directory written by `mtkit export`; ``LoadOptions.engine`` (auto by default)
picks one, and everything around the search is the same for both. This module imports neither
engine, so an exported model translates without PyTorch in the process.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mtkit.config.experiment import DecodingConfig
from mtkit.data.batching import pack_sorted
from mtkit.data.bpe import Bpe
from mtkit.data.corpora import tag
from mtkit.decode.engine import Engine, open_engine, resolve_engine
from mtkit.decode.glossary import Glossary, encode_constraints
from mtkit.decode.segment import clean_line, cut_sentence, split_sentences
from mtkit.decode.translation import (
    Candidate,
    Hypothesis,
    Translation,
    alignment_from_attention,
    join_attention,
    normalise,
)
from mtkit.device import thread_count
from mtkit.errors import ConfigError, MtkitError
from mtkit.options import LoadOptions, SearchOptions
from mtkit.textio import chunked, warn

if TYPE_CHECKING:
    from mtkit.formats.documents import DocumentResult


def options_from(kwargs: dict[str, Any], load: LoadOptions | None,
                  search_options: SearchOptions | None) -> tuple[LoadOptions, SearchOptions]:
    """Keyword arguments fill the fields of either dataclass (``Translator(m, device="cpu", nbest=3)``)."""
    load = dataclasses.replace(load) if load is not None else LoadOptions()
    search_options = dataclasses.replace(search_options) if search_options is not None else SearchOptions()
    load_fields = {f.name for f in dataclasses.fields(LoadOptions)}
    search_fields = {f.name for f in dataclasses.fields(SearchOptions)}
    for key, value in kwargs.items():
        if key in load_fields:
            setattr(load, key, value)
        elif key in search_fields:
            setattr(search_options, key, value)
        else:
            raise TypeError(f"Translator got an unexpected option {key!r} "
                            f"(options: {', '.join(sorted(load_fields | search_fields))})")
    return load, search_options


# The batch budget (source subwords × beam) when --max-tokens is 0 (auto). On a CPU a batch larger
# than this buys little; on a GPU each decoding step costs about the same whatever the batch, so
# fewer, larger batches win, within a few GiB of GPU memory (measured in docs/results.md). A batch
# that does not fit is halved.
CPU_MAX_TOKENS, GPU_MAX_TOKENS = 16000, 256000
AUTO_MAX_TOKENS = {False: CPU_MAX_TOKENS, True: GPU_MAX_TOKENS}  # by whether the device is a GPU
# Lines per chunk of a long input at most: the unit `--resume` can lose, and the most lines one batch
# can hold. A GPU batch of 256,000 subwords holds ~2,500 sentences at beam 5.
CPU_CHUNK_LINES = 1000
GPU_CHUNK_LINES = 8000


def _out_of_memory(exc: BaseException) -> bool:
    """Whether an engine's exception means the device ran out of memory: PyTorch raises
    torch.OutOfMemoryError, CTranslate2 a RuntimeError saying so (this module imports neither)."""
    return type(exc).__name__ == "OutOfMemoryError" or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower())


@dataclass
class _Item:
    line: int  # position in the chunk
    segment: int
    ids: list[int]
    constraints: list[list[int]] = dataclasses.field(default_factory=list)  # target subword runs


class Translator:
    """A model (or ensemble), its BPE models and decoding settings, ready to translate text.

    >>> tr = Translator("runs/en-de", device="cpu", beam_size=4)        # doctest: +SKIP
    >>> tr.translate(["Hello world."])                                  # doctest: +SKIP
    ['Hallo Welt.']

    Options are given as ``LoadOptions`` / ``SearchOptions`` or as keywords naming their fields;
    ``beam_size`` is a shorthand for the override ``decoding.beam_size``.
    """

    def __init__(self, model: str | Path, load: LoadOptions | None = None,
                 search_options: SearchOptions | None = None, *, beam_size: int | None = None,
                 **options: Any):
        load, opts = options_from(options, load, search_options)
        overrides = list(opts.overrides)
        if beam_size is not None:
            overrides.append(f"decoding.beam_size={beam_size}")
        for item in overrides:
            if not item.strip().startswith("decoding."):
                raise ConfigError(f"--set {item!r}: translate accepts only decoding.* keys")
        if opts.nbest < 1:
            raise ConfigError(f"--nbest must be at least 1, not {opts.nbest}")
        if opts.max_tokens < 0:
            raise ConfigError(f"--max-tokens must be at least 1 (or 0: auto), not {opts.max_tokens}")
        self.load_options, self.search_options = load, opts
        self.num_threads = thread_count(load.threads)
        self.engine = resolve_engine(model, load.engine)
        self.backend: Engine = open_engine(self.engine, model, load, overrides, self.num_threads,
                                           opts.attention_layer, opts.seed)
        self.model: Any = self.backend.model
        self.device, self.dtype = self.backend.device, self.backend.dtype
        self.config, self.meta = self.backend.config, self.backend.meta
        self.model_dir = self.backend.model_dir
        self.decoding: DecodingConfig = self.config.decoding
        self._check_attention_layer(opts.attention_layer)
        self.src_bpe = Bpe(self.model_dir / self.meta.src_bpe)
        self.tgt_bpe = (self.src_bpe if self.meta.tgt_bpe == self.meta.src_bpe
                        else Bpe(self.model_dir / self.meta.tgt_bpe))
        self.nbest, self.sample = opts.nbest, opts.sample
        self.attention_layer = opts.attention_layer
        on_gpu = str(self.device).startswith("cuda")  # an engine may choose its own auto budget
        self.max_tokens = opts.max_tokens or self.backend.auto_max_tokens or AUTO_MAX_TOKENS[on_gpu]
        self.chunk_lines = GPU_CHUNK_LINES if on_gpu else CPU_CHUNK_LINES
        self._halving_warned = False
        if self.decoding.beam_size < self.nbest and not opts.sample:
            self.decoding.beam_size = self.nbest
        self.max_input_tokens, self._limit_reason = self._input_limit()
        self.target_tag = self._target_tag(opts.tgt_lang)
        # where the tag goes (data.language_tag): one more source subword, or the decoder's first input
        self.source_tag = self.target_tag is not None and self.meta.languages.get("tag") != "decoder"
        self.max_input_tokens -= self.source_tag
        self._continuations: list[int] | None = None
        self.glossary = self._load_glossary(opts)

    def for_target(self, tgt_lang: str) -> Translator:
        """The same loaded model translating into ``tgt_lang`` (another direction of a multilingual
        model): a copy sharing the engine and its weights, with decoding settings of its own."""
        twin = copy.copy(self)
        twin.decoding = dataclasses.replace(self.decoding)
        twin.target_tag = twin._target_tag(tgt_lang)
        return twin

    def _target_tag(self, tgt_lang: str) -> int | None:
        """The id of the tag asking for ``tgt_lang`` (`mtkit.data.corpora`: a source or a target subword);
        None for a model of one language pair, which takes no tag (and no other target language)."""
        targets = self.meta.languages.get("tgt", [])
        if not targets:
            if tgt_lang and tgt_lang != self.meta.tgt_lang:
                raise ConfigError(f"--tgt-lang {tgt_lang}: the model translates into {self.meta.tgt_lang} "
                                  "only")
            return None
        if not tgt_lang and len(targets) > 1:
            raise ConfigError(f"the model translates into {', '.join(targets)}: choose one with --tgt-lang")
        tgt_lang = tgt_lang or targets[0]
        if tgt_lang not in targets:
            raise ConfigError(f"--tgt-lang {tgt_lang}: the model translates into {', '.join(targets)} only")
        bpe = self.tgt_bpe if self.meta.languages.get("tag") == "decoder" else self.src_bpe
        ids = bpe.piece_ids([tag(t) for t in targets], str(bpe.path))
        self.tag_ids = set(ids.values())
        return ids[tag(tgt_lang)]

    def _load_glossary(self, opts: SearchOptions) -> Glossary | None:
        """The glossary of ``opts`` with its target terms encoded; refused where it cannot apply."""
        if opts.glossary is None:
            return None
        self._check_constrainable("--glossary")
        glossary = Glossary.from_file(opts.glossary, opts.glossary_ignore_case)
        glossary.encode_targets(self.tgt_bpe)
        return glossary

    def _word_pieces(self) -> list[int]:
        """Target subwords that continue the word before them (no leading ▁, a letter or digit first):
        none may follow a completed constraint, so that a term stays a whole word."""
        if self._continuations is None:
            pieces = self.tgt_bpe.id_to_piece(list(range(len(self.tgt_bpe))))
            self._continuations = [i for i, p in enumerate(pieces) if p[:1].isalnum()]
        return self._continuations

    @property
    def can_constrain(self) -> bool:  # translate_chunk takes constraints: a search on the torch engine
        return hasattr(self.backend, "search_constrained") and not self.sample

    def _check_constrainable(self, what: str) -> None:
        if not hasattr(self.backend, "search_constrained"):
            raise ConfigError(f"{what}: the {self.engine} engine has no constrained decoding (CTranslate2 "
                              "cannot force terms into its output); translate with the model directory "
                              "(the torch engine)")
        if self.sample:
            raise ConfigError(f"{what} does not combine with --sample (constraints need a search)")

    def _check_attention_layer(self, layer: int) -> None:
        m = self.config.model
        layers = m.decoder_layers if m.arch == "transformer" else 1
        if not -layers <= layer < layers:
            raise ConfigError(f"--attention-layer {layer}: the model has {layers} decoder "
                              f"attention layer(s) ({-layers}..{layers - 1})")

    def _input_limit(self) -> tuple[int, str]:
        """The longest input given to the model, in subwords, and what sets it: a longer sentence is
        cut into pieces. A model has not learned to translate sentences longer than those it was
        trained on (data.max_len); decoding.max_input_tokens caps that further; learned positions
        (and an exported position table) cannot go past their last row, for inputs and outputs."""
        limits = [(self.decoding.max_input_tokens, "decoding.max_input_tokens"),
                  (self.config.data.max_len, "data.max_len, the longest training sentence")]
        rows = self.backend.max_positions
        if rows is not None:
            room = (rows - 1 - self.decoding.max_len_b) / max(self.decoding.max_len_a, 1.0)
            limits.append((min(int(room), rows), f"the model's {rows} positions"))
        limit, reason = min(limits, key=lambda x: x[0])
        return max(8, limit), reason

    @property
    def rows_per_sentence(self) -> int:
        return self.nbest if self.sample else max(self.decoding.beam_size, self.nbest)

    # ----------------------------------------------------------------------------- public API
    def translate(self, lines: list[str]) -> list[str]:
        """Translate a list of lines; returns one string per line, in order."""
        return [t.text for t in self.translate_stream(lines, chunk_size=max(1, len(lines)))]

    def translate_bytes(self, data: bytes, name: str = "document.txt", format: str = "auto",
                        tgt_lang: str = "", retranslate: bool = False, fuzzy: bool = True,
                        encoding: str = "", progress: Any = None) -> DocumentResult:
        """A document's bytes translated as ``format`` (auto: by ``name``'s extension; any of
        `mtkit.formats.documents.FORMATS`: text, gettext catalogs, HTML, subtitles, XLIFF, office files,
        EPUB). Bytes in, bytes out: what is not translated (markup, timings, line endings, the charset,
        a BOM) comes back as it was. ``retranslate`` and ``fuzzy`` are `mtkit translate`'s for catalogs;
        ``encoding`` the charset of a text or SubRip file (else a file that is not UTF-8 is read in the
        model's source language's usual charset where its text looks right, said in ``left``).
        ``progress``: told of each string searched (`mtkit translate`'s bar). Returns the bytes, what was
        left untranslated (``left``: name:line: why) and a summary."""
        from mtkit.decode.formats_adapter import search_functions
        from mtkit.formats.documents import document_format, translate_document

        translator = self.for_target(tgt_lang) if tgt_lang else self
        language = tgt_lang or self.search_options.tgt_lang or self.meta.tgt_lang
        return translate_document(data, name, document_format(name, format), language,
                                  *search_functions(translator, name, progress), retranslate, fuzzy, encoding,
                                  self.meta.src_lang)

    def translate_file(self, source: str | Path, target: str | Path, format: str = "auto",
                       tgt_lang: str = "", retranslate: bool = False, fuzzy: bool = True,
                       encoding: str = "") -> DocumentResult:
        """``source`` translated into ``target`` (written whole through a temporary file, only when the
        translation succeeded; never over ``source``), as `translate_bytes` translates its bytes.

        >>> Translator("model").translate_file("guide.docx", "guide.de.docx")  # doctest: +SKIP"""
        from mtkit.textio import read_bytes, same_file, write_bytes

        if same_file(source, target):
            raise ConfigError(f"{target} is the file being translated: choose another output")
        result = self.translate_bytes(read_bytes(source), str(source), format, tgt_lang, retranslate, fuzzy,
                                      encoding)
        write_bytes(target, result.data)
        return result

    def translate_hypotheses(self, lines: list[str], need_attention: bool = False) -> list[Translation]:
        """Like ``translate`` but with scores, subword tokens, n-best lists and (with
        ``need_attention``) attention matrices and source-target alignments."""
        return list(self.translate_stream(lines, chunk_size=max(1, len(lines)),
                                          need_attention=need_attention))

    def translate_stream(self, lines: Iterable[str], chunk_size: int = 1000, need_attention: bool = False,
                         name: str = "<input>") -> Iterator[Translation]:
        """Translate an iterable of lines chunk by chunk, yielding one ``Translation`` per line in
        order. ``chunk_size`` 1 answers each line as soon as it is read (interactive use)."""
        start = 0
        for chunk in chunked(lines, chunk_size):
            yield from self.translate_chunk(chunk, start, need_attention, name)
            start += len(chunk)

    def translate_chunk(self, lines: list[str], start: int = 0, need_attention: bool = False,
                        name: str = "<input>", constraints: Sequence[Sequence[str]] | None = None
                        ) -> list[Translation]:
        """Translations of ``lines``, numbered from ``start`` (the index of the first in the input).
        ``constraints``: per line, target strings its translation must contain (JSON input); such a
        line is translated as one sentence, so that a constraint may fall anywhere in it."""
        cleaned = [clean_line(line) for line in lines]
        out = [Translation(start + i, text) for i, text in enumerate(cleaned)]
        todo = [i for i, text in enumerate(cleaned) if text]
        if not todo:
            return out
        forced: dict[int, list[list[int]]] = {}
        if constraints is not None:
            if len(constraints) != len(lines):
                raise ValueError(f"{len(constraints)} constraint lists for {len(lines)} lines")
            wanted = [(i, c) for i, c in enumerate(constraints) if c and cleaned[i]]
            if wanted:
                self._check_constrainable("constraints")
            forced = {i: encode_constraints(list(c), self.tgt_bpe, f"{name}:{start + i + 1}")
                      for i, c in wanted}
        sentences = [(i, s) for i in todo
                     for s in ([cleaned[i]] if i in forced else split_sentences(cleaned[i]))]
        encoded = self.src_bpe.encode_ids([s for _, s in sentences])
        items: list[_Item] = []
        parts: dict[int, int] = {}  # line → its pieces so far
        long: dict[int, list[int]] = {}  # line → subwords of its sentences cut into pieces
        for (i, text), ids in zip(sentences, encoded, strict=True):
            segments = self._cut(text, ids)
            if len(ids) > self.max_input_tokens:
                long.setdefault(i, []).append(len(ids))
            for n, seg in enumerate(filter(None, segments)):
                items.append(_Item(i, parts.get(i, 0), self._tagged(seg), self._constraints_of(
                    text if len(segments) == 1 else self.src_bpe.decode_ids([seg])[0],
                    forced.get(i) if n == 0 else None)))
                parts[i] = parts.get(i, 0) + 1
        for i, lengths in long.items():
            what = (f"a sentence of {lengths[0]} subwords is" if len(lengths) == 1 else
                    f"{len(lengths)} sentences of up to {max(lengths)} subwords are")
            warn(f"{name}:{start + i + 1}: {what} longer than the model takes ({self.max_input_tokens}: "
                 f"{self._limit_reason}); translating the line in {parts[i]} parts")
        results = self._search_items(items, need_attention)
        by_line: dict[int, list[tuple[list[int], list[Hypothesis]]]] = {}
        for item, hyps in zip(items, results, strict=True):
            by_line.setdefault(item.line, []).append((item.ids, hyps))
        for i, parts in by_line.items():
            skip = self.source_tag  # the tag is no word of the source
            out[i].source_tokens = self.src_bpe.id_to_piece([t for ids, _ in parts for t in ids[skip:]])
            out[i].hypotheses = self._candidates(parts, need_attention)
        return out

    def _cut(self, text: str, ids: list[int]) -> list[list[int]]:
        """A sentence's subwords as searched: whole, or cut into pieces where it is longer than the
        model takes (``max_input_tokens``)."""
        if len(ids) > self.max_input_tokens:
            return cut_sentence(text, ids, self.src_bpe, self.max_input_tokens)
        return [ids]

    def source_segments(self, line: str) -> list[list[int]]:
        """The subword segments a line without constraints is searched as, in order: its cleaned
        text's sentences, each cut where longer than the model takes (what `translate_chunk` does)."""
        sentences = split_sentences(clean_line(line))
        encoded = self.src_bpe.encode_ids(sentences) if sentences else []
        return [self._tagged(seg) for text, ids in zip(sentences, encoded, strict=True)
                for seg in self._cut(text, ids) if seg]

    def _tagged(self, ids: list[int]) -> list[int]:
        """A segment as the model takes it: after the target language's tag where it goes there."""
        return [self.target_tag, *ids] if self.source_tag else ids

    def _untagged(self, h: Hypothesis) -> Hypothesis:
        """A hypothesis of a tagged source as the user sees it: no tag in its tokens or attention."""
        keep = [n for n, t in enumerate(h.tokens) if t not in self.tag_ids]
        att = h.attention
        if att is not None:
            att = att[:, [*keep, len(h.tokens)], 1:]
            att = att / att.sum(-1, keepdim=True).clamp_min(1e-9)
        return dataclasses.replace(h, tokens=[h.tokens[n] for n in keep], attention=att)

    def _constraints_of(self, text: str, forced: list[list[int]] | None) -> list[list[int]]:
        """A piece's constraints: the glossary's terms found in its text, and the line's own (JSON
        input; they go with its first piece)."""
        found = self.glossary.constraints(text) if self.glossary is not None else []
        return found + [c for c in forced or [] if c not in found]

    def _search_items(self, items: list[_Item], need_attention: bool) -> list[list[Hypothesis]]:
        """Search every item in length-sorted token-budget batches; results in item order. Items with
        constraints are searched apart (the constrained search, with its wider beam)."""
        results: list[list[Hypothesis]] = [[] for _ in items]
        for constrained in (False, True):
            chosen = [n for n, it in enumerate(items) if bool(it.constraints) == constrained]
            if not chosen:
                continue
            lengths = np.array([len(items[n].ids) for n in chosen], dtype=np.int64)
            order = np.argsort(lengths, kind="stable")
            rows = self.rows_per_sentence
            if constrained:
                rows = max(rows, 1 + max(len(items[n].constraints) for n in chosen))
            for batch in pack_sorted(order, lengths, max(1, self.max_tokens // rows)):
                picked = [chosen[j] for j in batch.tolist()]
                found = self._search_batch([items[n] for n in picked], constrained, need_attention)
                for n, hyps in zip(picked, found, strict=True):
                    results[n] = hyps
        return results

    def _search_batch(self, batch: list[_Item], constrained: bool, need_attention: bool
                      ) -> list[list[Hypothesis]]:
        """Search one batch; a batch the device has no memory for is searched in halves (each
        sentence is searched on its own rows, so halves find what the whole would, up to rounding)."""
        ids = [it.ids for it in batch]
        start = None if self.source_tag else self.target_tag  # a decoder-side tag, or BOS (None)
        try:
            if constrained:
                return self.backend.search_constrained(  # type: ignore[attr-defined]
                    ids, self.decoding, [it.constraints for it in batch], self.nbest,
                    need_attention, self.search_options.soft_bonus, self._word_pieces(), start=start)
            return self.backend.search(ids, self.decoding, self.nbest, need_attention, self.sample, start,
                                       self.search_options.scores)
        except Exception as exc:  # noqa: BLE001 - only out-of-memory errors are handled, the rest re-raised
            if not _out_of_memory(exc):
                raise
            if len(batch) == 1:
                raise MtkitError(f"out of memory on {self.device} for a single sentence of {len(ids[0])} "
                                 "subwords: translate on a device with more memory, or with a smaller "
                                 "beam") from None
            if not self._halving_warned:
                self._halving_warned = True
                warn(f"out of memory on {self.device} with --max-tokens {self.max_tokens}: searching the "
                     "batches that do not fit in halves (a smaller --max-tokens avoids the retries)")
        half = len(batch) // 2
        return (self._search_batch(batch[:half], constrained, need_attention)
                + self._search_batch(batch[half:], constrained, need_attention))

    def _candidates(self, parts: list[tuple[list[int], list[Hypothesis]]],
                    need_attention: bool) -> list[Candidate]:
        """Candidates of one line; a split line's k-th candidate joins its segments' k-th best."""
        count = max(len(h) for _, h in parts)
        out = []
        for rank in range(count):
            chosen = [h[min(rank, len(h) - 1)] for _, h in parts if h]
            if self.source_tag:
                chosen = [self._untagged(h) for h in chosen]
            texts = self.tgt_bpe.decode_ids([h.tokens for h in chosen])
            token_ids = [t for h in chosen for t in h.tokens]
            if len(chosen) == 1:
                score, log_prob = chosen[0].score, chosen[0].log_prob
            else:
                log_prob = sum(h.log_prob for h in chosen)
                score = float(normalise(log_prob, len(token_ids) + 1, self.decoding))
            attention = alignment = None
            if need_attention and all(h.attention is not None for h in chosen):
                attention = join_attention([h.attention for h in chosen])
                alignment = alignment_from_attention(attention[:, : len(token_ids)])
            out.append(Candidate(" ".join(t for t in texts if t), score, log_prob,
                                 self.tgt_bpe.id_to_piece(token_ids), token_ids, alignment, attention))
        return out


__all__ = ["LoadOptions", "SearchOptions", "Translator"]
