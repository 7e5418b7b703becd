"""A route of `mtkit serve` (one model, or two through the pivot) as the search function the formats
take (mtkit.placeholders.strings), for documents and pages translated in a worker thread: the same
function `mtkit translate` makes of a Translator (mtkit.decode.formats_adapter), but each search sent
to the models' batchers, so that a document's sentences are batched with every other request's.

It offers what the offline function offers, so that a file comes back as `mtkit translate` writes it:
every candidate of the beam, the constrained search where the last leg's engine has one, the models'
``can_write`` and, on a direct route, ``aligned`` (through a pivot the last leg's attention is on the
pivot text, not the source). Through a pivot a placeholder reaches the target only if every leg
writes it: the first leg must carry it into the pivot text for the last to copy, so ``can_write`` asks
each leg's target vocabulary, and a string is masked where any leg cannot. The answers are kept per
vocabulary (``writes_cached``): a page or document builds one RouteSearch, and each asks again.
"""

from __future__ import annotations

import concurrent.futures
import functools
from typing import Any

from mtkit.decode.formats_adapter import best_with_links, writes
from mtkit.serve.batcher import Settings
from mtkit.serve.context import Server
from mtkit.serve.models import Route, ServedModel

#: lines of a document or page sent to the batcher as one job: a long document is not one job past
#: the queue's capacity or the --timeout, and the documents translated at once take turns; the jobs
#: of the documents in translation (mtkit.serve.files.DOCUMENT_WORKERS) make one batch of --max-batch
SEARCH_CHUNK = 64


class RouteSearch:
    """``search(lines, constraints=None)``: each line's candidates along the route (see the module's
    docstring). Each job waits at most the server's ``timeout`` (concurrent.futures.TimeoutError);
    a full queue raises QueueFull."""

    def __init__(self, server: Server, route: Route):
        self.server, self.route = server, route
        self._vocabularies = [getattr(leg.translator, "tgt_bpe", None) for leg in route.legs]
        if len(route.legs) == 1:
            self.aligned = self._aligned

    def can_write(self, text: str) -> bool:
        """Whether every leg's target vocabulary spells ``text`` (see the module's docstring; a leg
        without one is taken to write anything, as offline): no search, no batcher."""
        return all(vocabulary is None or writes_cached(vocabulary, text) for vocabulary in self._vocabularies)

    def __call__(self, lines: list[str], constraints: list[list[str]] | None = None) -> list[list[str]]:
        legs = self.route.legs
        for model in legs[:-1]:  # through the pivot: the first leg's best, without the glossary
            first = Settings(model.default_beam, model.default_beam, glossary=False)
            lines = [t.hypotheses[0].text if t.hypotheses else "" for t in self._run(model, lines, first)]
        last = legs[-1]
        wide = Settings(last.default_beam, last.default_beam)  # every candidate of the beam
        return [[h.text for h in t.hypotheses] or [""] for t in self._run(last, lines, wide, constraints)]

    def _aligned(self, lines: list[str]) -> list[tuple[str, list[tuple[int, int]] | None]]:
        """Each line's best translation with its word alignment, from the attention (as offline)."""
        model = self.route.legs[0]
        found = self._run(model, lines, Settings(model.default_beam, 1, attention=True))
        return [best_with_links(line, t) for line, t in zip(lines, found, strict=True)]

    def _run(self, model: ServedModel, lines: list[str], settings: Settings,
             constraints: list[list[str]] | None = None) -> list[Any]:
        """The lines' translations by ``model``'s batcher, `SEARCH_CHUNK` lines a job."""
        out: list[Any] = []
        for at in range(0, len(lines), SEARCH_CHUNK):
            part = lines[at:at + SEARCH_CHUNK]
            future = model.batcher.submit(part, settings, None if constraints is None
                                          else constraints[at:at + SEARCH_CHUNK])
            try:
                out += future.result(self.server.settings.timeout)
            except concurrent.futures.TimeoutError:
                future.cancel()
                raise
            self.server.metrics.sentences(model.name, len(part))
        return out


@functools.lru_cache(maxsize=4096)
def writes_cached(vocabulary: Any, text: str) -> bool:
    """``writes`` kept per (vocabulary, text), across requests: a server's vocabularies live as long
    as it does, and a catalog's placeholders repeat (bounded, for requests that make up new ones)."""
    return writes(vocabulary, text)
