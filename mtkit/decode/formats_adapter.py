"""A `mtkit.decode.translator.Translator` as the string functions `mtkit.formats` takes: its plain
search and, where its engine has one, its constrained search, each giving every finished hypothesis of
the beam as a candidate (what ``translate_strings`` needs to choose one that keeps the placeholders).
The formats never import decoding; the translate stage and the server join the two through this.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Protocol

from mtkit.formats.placeholders import ConstrainedFn, TranslateFn


class _Translator(Protocol):
    """What ``search_functions`` needs of a `mtkit.decode.translator.Translator` (a protocol: a stand-in
    with these will do, as in the tests)."""

    can_constrain: bool
    nbest: int
    decoding: Any  # its DecodingConfig: beam_size

    def translate_chunk(self, lines: list[str], start: int = ..., need_attention: bool = ...,
                        name: str = ..., constraints: Sequence[Sequence[str]] | None = ...) -> list[Any]: ...


class _Progress(Protocol):
    """Where ``search_functions`` reports its work (a progress bar of the caller's)."""

    def grow(self, n: int) -> None: ...

    def advance(self, n: int) -> None: ...


#: strings searched per call, so that a long document's progress shows (the Translator sorts each
#: call's sentences by length into batches: a call of a thousand keeps the batches full)
SEARCH_CHUNK = 1000


def search_functions(translator: _Translator, name: str = "<input>", progress: _Progress | None = None
                     ) -> tuple[TranslateFn, ConstrainedFn | None]:
    """A Translator's plain search, and its constrained search where its engine has one: what
    ``translate_strings`` takes. Both give every finished hypothesis of the beam as a candidate (the
    same search, the same best one: a copy of the translator with n-best as wide as the beam), search
    ``SEARCH_CHUNK`` strings at a time and report them to ``progress``."""
    wide = copy.copy(translator)
    wide.nbest = max(translator.nbest, translator.decoding.beam_size)

    def run(lines: list[str], constraints: list[list[str]] | None = None) -> list[list[str]]:
        if progress is not None:
            progress.grow(len(lines))
        out: list[list[str]] = []
        for at in range(0, len(lines), SEARCH_CHUNK):
            part = lines[at:at + SEARCH_CHUNK]
            found = wide.translate_chunk(part, name=name, constraints=None if constraints is None
                                         else constraints[at:at + SEARCH_CHUNK])
            out += [[h.text for h in t.hypotheses] or [""] for t in found]
            if progress is not None:
                progress.advance(len(part))
        return out

    return run, (run if translator.can_constrain else None)


__all__ = ["SEARCH_CHUNK", "search_functions"]
