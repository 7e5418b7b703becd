"""A `mtkit.decode.translator.Translator` as the string functions `mtkit.formats` takes: its plain
search and, where its engine has one, its constrained search, each giving every finished hypothesis of
the beam as a candidate (what ``translate_strings`` needs to choose one that keeps the placeholders).
The plain search also says what the model can write (``can_write``: whether its target vocabulary
spells a text without the unknown subword, so that a ``%s`` it cannot write is masked before the
first translation) and gives its best translation with a word alignment (``aligned``: the
attention's, on either engine, for placing a placeholder by the aligned word). The formats never
import decoding; the translate stage and the server join the two through this.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from mtkit.placeholders.strings import ConstrainedFn, TranslateFn
from mtkit.vocab import UNK_ID


class _Translator(Protocol):
    """What ``search_functions`` needs of a `mtkit.decode.translator.Translator` (a protocol: a stand-in
    with these will do, as in the tests)."""

    can_constrain: bool
    nbest: int
    decoding: Any  # its DecodingConfig: beam_size
    tgt_bpe: Any  # its target Bpe: encode_ids

    def translate_chunk(self, lines: list[str], start: int = ..., need_attention: bool = ...,
                        name: str = ..., constraints: Sequence[Sequence[str]] | None = ...) -> list[Any]: ...


class _Progress(Protocol):
    """Where ``search_functions`` reports its work (a progress bar of the caller's)."""

    def grow(self, n: int) -> None: ...

    def advance(self, n: int) -> None: ...


#: strings searched per call, so that a long document's progress shows (the Translator sorts each
#: call's sentences by length into batches: a call of a thousand keeps the batches full)
SEARCH_CHUNK = 1000


class _Search:
    """The plain (or, given constraints, constrained) search as a function of lines, with the model's
    ``can_write`` and ``aligned`` (formats.placeholders.ModelSearch)."""

    def __init__(self, translator: _Translator, name: str, progress: _Progress | None) -> None:
        self.translator, self.name, self.progress = translator, name, progress
        self.wide = copy.copy(translator)
        self.wide.nbest = max(translator.nbest, translator.decoding.beam_size)
        self._writable: dict[str, bool] = {}

    def __call__(self, lines: list[str], constraints: list[list[str]] | None = None) -> list[list[str]]:
        out: list[list[str]] = []
        for at, part in self._chunks(lines):
            found = self.wide.translate_chunk(part, name=self.name, constraints=None if constraints is None
                                              else constraints[at:at + SEARCH_CHUNK])
            out += [[h.text for h in t.hypotheses] or [""] for t in found]
        return out

    def _chunks(self, lines: list[str]) -> Iterator[tuple[int, list[str]]]:
        if self.progress is not None:
            self.progress.grow(len(lines))
        for at in range(0, len(lines), SEARCH_CHUNK):
            yield at, lines[at:at + SEARCH_CHUNK]
            if self.progress is not None:
                self.progress.advance(len(lines[at:at + SEARCH_CHUNK]))

    def can_write(self, text: str) -> bool:
        """Whether the target vocabulary spells ``text`` (see ``writes``); a stand-in without one is
        taken to write anything."""
        vocabulary = getattr(self.translator, "tgt_bpe", None)
        return True if vocabulary is None else self._writes(vocabulary, text)

    def _writes(self, vocabulary: Any, text: str) -> bool:
        if text not in self._writable:
            self._writable[text] = writes(vocabulary, text)
        return self._writable[text]

    def aligned(self, lines: list[str]) -> list[tuple[str, list[tuple[int, int]] | None]]:
        """Each line's best translation and its word alignment ((source word, target word) pairs, the
        words those of ``str.split``), from the attention; None where the subwords do not add up to
        the words."""
        out: list[tuple[str, list[tuple[int, int]] | None]] = []
        for _, part in self._chunks(lines):
            found = self.translator.translate_chunk(part, name=self.name, need_attention=True)
            out += [best_with_links(line, t) for line, t in zip(part, found, strict=True)]
        return out


def best_with_links(line: str, translation: Any) -> tuple[str, list[tuple[int, int]] | None]:
    """A translation's best hypothesis (a `mtkit.decode.translation.Translation` of ``line`` searched
    with attention) and its word alignment (``word_links``); ("", None) where it has none."""
    best = translation.hypotheses[0] if translation.hypotheses else None
    if best is None:
        return "", None
    links = word_links(line, translation.source_tokens, best.text, best.tokens, best.alignment or [])
    return best.text, links


def writes(vocabulary: Any, text: str) -> bool:
    """Whether a target vocabulary (a `mtkit.data.bpe.Bpe`) spells ``text`` without the unknown subword:
    not so a character it never saw, such as ``%`` for a model trained on text without markup (byte
    fallback spells anything). A chain of models (a pivot) writes what each of its legs writes: the
    server's searches may say so as their ``can_write``."""
    return UNK_ID not in vocabulary.encode_ids([text])[0]


def word_links(source: str, source_pieces: list[str], target: str, target_pieces: list[str],
               links: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """Subword links as word links (a word begins at a piece with sentencepiece's ``▁``); None where
    the pieces of either side do not make as many words as its text has."""
    def words_of(pieces: list[str]) -> list[int]:
        at, out = -1, []
        for piece in pieces:
            at += piece.startswith("\u2581") or at < 0
            out.append(at)
        return out

    src_words, tgt_words = words_of(source_pieces), words_of(target_pieces)
    if (src_words[-1] + 1 if src_words else 0) != len(source.split()) or \
            (tgt_words[-1] + 1 if tgt_words else 0) != len(target.split()):
        return None
    return sorted({(src_words[i], tgt_words[j]) for i, j in links
                   if i < len(src_words) and j < len(tgt_words)})


def search_functions(translator: _Translator, name: str = "<input>", progress: _Progress | None = None
                     ) -> tuple[TranslateFn, ConstrainedFn | None]:
    """A Translator's plain search, and its constrained search where its engine has one: what
    ``translate_strings`` takes. Both give every finished hypothesis of the beam as a candidate (the
    same search, the same best one: a copy of the translator with n-best as wide as the beam), search
    ``SEARCH_CHUNK`` strings at a time and report them to ``progress``; the plain one says what the
    model can write and gives word alignments (see the module docstring)."""
    run = _Search(translator, name, progress)
    return run, (run if translator.can_constrain else None)


__all__ = ["SEARCH_CHUNK", "best_with_links", "search_functions", "word_links", "writes"]
