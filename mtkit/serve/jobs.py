"""The work a request asks of the models, for the routes of `mtkit serve`: identifying languages, and
translating texts along a route (`ModelSet.route`: one model, or two through the pivot language) as
jobs on the models' batchers, which translate concurrent requests together.

A request's texts are cut into sentences and go as one job per model (per leg of the route); the
request waits for its job at most ``timeout`` seconds. A full queue is 503 with ``Retry-After`` at
once, a wait too long 503 as well; every other failure is the route's to answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import zipfile
from functools import partial
from typing import Any
from xml.etree.ElementTree import ParseError

from mtkit.decode.translation import Candidate, Translation
from mtkit.errors import ConfigError, MtkitError
from mtkit.formats.documents import DocumentResult, Format, translate_document, translate_html_text
from mtkit.langid import Guess
from mtkit.placeholders.strings import ConstrainedFn, TranslateFn
from mtkit.serve.batcher import QueueFull, Settings
from mtkit.serve.bodies import HTTPError
from mtkit.serve.context import Server
from mtkit.serve.models import Route, ServedModel, sentences_of
from mtkit.serve.replies import Done
from mtkit.serve.route_search import RouteSearch

#: what a file's reader may raise on a file that is not of its format, where its module does not turn it
#: into a DataError: answered 400, as bad input, never 500
UNREADABLE = (zipfile.BadZipFile, UnicodeDecodeError, ParseError, EOFError)


def busy(exc: QueueFull) -> HTTPError:
    return HTTPError(503, f"the server is busy: {exc}; try again shortly", {"Retry-After": "1"})


def too_slow(server: Server) -> HTTPError:
    return HTTPError(503, f"translation took longer than {server.settings.timeout:g} s", {"Retry-After": "5"})


async def identify(server: Server, texts: list[str]) -> list[list[Guess]]:
    """Each text's languages, likeliest first for this server (off the event loop: the identifier's
    first use loads its model); 501 without py3langid."""
    try:
        return await asyncio.to_thread(lambda: [server.models.identify(t) for t in texts])
    except ConfigError as exc:  # py3langid missing
        raise HTTPError(501, str(exc)) from None


async def translate(server: Server, model: ServedModel, texts: list[str], run: Settings,
                    constraints: list[list[str]] | None = None) -> list[list[Any]]:
    """Each text's sentences with their translations, all of one request in one job. A text with
    constraints is one sentence (as a JSON input line of `mtkit translate`)."""
    wanted = constraints or [[] for _ in texts]
    per_text = [[" ".join(t.split())] if c and t.strip() else sentences_of(t)
                for t, c in zip(texts, wanted, strict=True)]
    flat = [s for sentences in per_text for s in sentences]
    flat_constraints = [c for sentences, c in zip(per_text, wanted, strict=True) for _ in sentences]
    try:
        future = model.batcher.submit(flat, run, flat_constraints if constraints else None)
    except QueueFull as exc:
        raise busy(exc) from None
    try:
        results = await asyncio.wait_for(asyncio.wrap_future(future), server.settings.timeout)
    except TimeoutError:
        future.cancel()
        raise too_slow(server) from None
    server.metrics.sentences(model.name, len(flat))
    out, start = [], 0
    for sentences in per_text:
        out.append(list(zip(sentences, results[start:start + len(sentences)], strict=True)))
        start += len(sentences)
    return out


async def translate_route(server: Server, route: Route, texts: list[str], beam: int | None, nbest: int = 1,
                          attention: bool = False, constraints: list[list[str]] | None = None
                          ) -> tuple[list[Done], list[Done] | None]:
    """Each text's sentences with their translations along ``route`` (and, through a pivot, the
    first leg's): the first leg's text of each (sentences joined, as `mtkit translate` writes a
    line) is the last leg's input, which cuts it into sentences again; constraints go to the last
    leg, and so do the --glossary terms found in each text (as `PivotTranslator` does). Each leg
    searches with ``beam`` or its model's own beam."""
    firsts, pivoted = None, len(route.legs) > 1
    glossary = route.legs[-1].translator.glossary
    if pivoted and glossary is not None:
        given = constraints or [[] for _ in texts]
        found = [[t.target for t in glossary.find(text)] for text in texts]
        constraints = [f + [c for c in g if c not in f] for f, g in zip(found, given, strict=True)]
        constraints = constraints if any(constraints) else None
    for n, leg in enumerate(route.legs):
        last = n == len(route.legs) - 1
        width = max(beam or leg.default_beam, nbest if last else 1)
        run = Settings(width, nbest if last else 1, attention and last, glossary=not pivoted)
        done = await translate(server, leg, texts, run, constraints if last else None)
        if not last:
            firsts = done
            texts = [" ".join(t.text for _, t in pairs if t.text) for pairs in done]
    return done, firsts


async def translate_each(server: Server, routes: list[Route | None], texts: list[str],
                         alternatives: int) -> list[Any]:
    """``texts[i]`` translated along ``routes[i]`` (None: answered as it is): one job per route,
    the routes at once."""
    order: dict[tuple[str, ...], list[int]] = {}
    done: list[Any] = [None] * len(texts)
    for i, route in enumerate(routes):
        if route is None:
            done[i] = [(texts[i], Translation(0, texts[i], [], [Candidate(texts[i], 0.0, 0.0, [], [])]))]
        else:
            order.setdefault(tuple(m.name for m in route.legs), []).append(i)
    jobs = [translate_route(server, routes[ids[0]], [texts[i] for i in ids], None, alternatives + 1)  # type: ignore[arg-type]
            for ids in order.values()]
    for ids, (results, _) in zip(order.values(), await asyncio.gather(*jobs), strict=True):
        for i, result in zip(ids, results, strict=True):
            done[i] = result
    return done


def search_pair(server: Server, route: Route) -> tuple[TranslateFn, ConstrainedFn | None]:
    """The plain and the constrained search of ``route`` (mtkit.serve.route_search), for a worker
    thread; no constrained one where the last leg's engine has none."""
    search = RouteSearch(server, route)
    return search, (search if route.legs[-1].translator.can_constrain else None)


async def translate_pages(server: Server, routes: list[Route | None], texts: list[str]) -> list[str]:
    """format html: each text a page or fragment translated with its tags (mtkit.formats.xml.html),
    off the event loop; a run whose translation would lose or unnest a tag stays as it was.
    Through a pivot, each run's first-leg best is what the last leg translates."""
    def page(route: Route | None, text: str) -> str:
        if route is None:
            return text
        return translate_html_text(text, "q", route.target, *search_pair(server, route))

    try:
        return await asyncio.to_thread(lambda: [page(r, t) for r, t in zip(routes, texts, strict=True)])
    except MtkitError as exc:  # a page that is not HTML (a mismatched end tag)
        raise HTTPError(400, f"Invalid request: {exc}") from None
    except QueueFull as exc:
        raise busy(exc) from None
    except concurrent.futures.TimeoutError:
        raise too_slow(server) from None


def document_text(data: bytes, name: str, fmt: Format, limit: int = 20_000) -> str:
    """What a document says, for identifying its language (``source: auto``): the strings its format
    would translate, gathered by translating it with a function that keeps each as it is, joined up
    to about ``limit`` characters."""
    seen: list[str] = []

    def keep(lines: list[str], constraints: list[list[str]] | None = None) -> list[list[str]]:
        seen.extend(lines)
        return [[line] for line in lines]

    translate_document(data, name, fmt, "und", keep)
    return "\n".join(seen)[:limit]


async def translate_file(server: Server, route: Route | None, data: bytes, name: str, fmt: Format
                         ) -> DocumentResult:
    """An uploaded document translated along ``route`` (None: answered as it is, the file already in
    the target language), as `mtkit translate` translates the file (mtkit.formats.documents), in one
    of the file store's worker threads. 400 (one line) for a file its format cannot read, 503 for a
    full queue or a translation past ``timeout``."""
    if route is None:
        return DocumentResult(data, [], f"{name}: already in the target language")
    assert server.files is not None
    work = partial(translate_document, data, name, fmt, route.target, *search_pair(server, route),
                   src_lang=route.source)
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(server.files.workers, work)
    except MtkitError as exc:
        raise HTTPError(400, f"Invalid request: {exc}") from None
    except UNREADABLE as exc:  # a reader's own exception that its format module let through
        raise HTTPError(400, f"Invalid request: {name} cannot be read as {fmt}: {exc}") from None
    except QueueFull as exc:
        raise busy(exc) from None
    except concurrent.futures.TimeoutError:
        raise too_slow(server) from None
