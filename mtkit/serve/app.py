"""The HTTP API of `mtkit serve` (a FastAPI application) and its web page.

Two APIs over the same models:

- LibreTranslate's (``POST /translate``, ``POST /detect``, ``GET /languages``, ``GET
  /frontend/settings``), so that LibreTranslate clients and integrations work unchanged; fields mtkit
  cannot honour are refused with 400, never ignored (docs/serve.md lists them). ``source: "auto"``
  and ``/detect`` identify what language a text is (`mtkit.decode.langid`); a pair without a model is
  answered through the pivot language (`ModelSet.route`).
- mtkit's own (``POST /v1/translate``, ``GET /v1/models``): beam size, n-best with scores, each
  sentence's confidence, subwords and attention.

Requests are read (`mtkit.serve.bodies`: size limit, JSON or a form, valid Unicode whatever was
sent), validated by pydantic, checked against the API keys, and queued on the model's `Batcher`,
which translates concurrent requests together. Every error is one JSON line ``{"error": "..."}``
with LibreTranslate's status codes; no request, however malformed, is answered 500.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from pydantic import ValidationError

from mtkit.decode.langid import Guess
from mtkit.decode.translation import Candidate, Translation
from mtkit.errors import ConfigError, MtkitError
from mtkit.formats.documents import translate_html_text
from mtkit.serve.batcher import QueueFull, Settings
from mtkit.serve.bodies import (
    DetectRequest,
    HTTPError,
    LibreRequest,
    V1Request,
    one_line,
    parse_body,
    read_body,
)
from mtkit.serve.metrics import ServerMetrics
from mtkit.serve.models import ModelSet, Route, ServedModel, sentences_of
from mtkit.serve.replies import Done, detections, libre_reply, v1_reply
from mtkit.serve.security import KeyRing

#: the languages /detect answers, likeliest first
DETECTIONS = 5


@dataclass
class ServerSettings:
    """Limits of one server (``mtkit serve`` options)."""

    char_limit: int = 20_000  # characters of text in one request
    max_body: int = 1_048_576  # bytes of one request body
    timeout: float = 60.0  # seconds a request may wait for its translation
    max_beam: int = 16
    max_nbest: int = 8
    cors_origins: list[str] = field(default_factory=list)


def create_app(models: ModelSet, settings: ServerSettings, keys: KeyRing | None = None) -> FastAPI:
    keys = keys or KeyRing()
    metrics = ServerMetrics(models)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await asyncio.to_thread(models.close)  # translate what is queued, then stop the workers

    app = FastAPI(title="mtkit", docs_url="/docs", redoc_url=None, lifespan=lifespan)
    app.state.models = models
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["*"])

    @app.middleware("http")
    async def count(request: Request, call_next):
        started = time.perf_counter()
        try:
            response = await call_next(request)
        except HTTPError as exc:
            response = _error(exc)
        metrics.observe(request.url.path, response.status_code, time.perf_counter() - started)
        return response

    async def request_data(request: Request) -> dict[str, Any]:
        body = await read_body(request, settings.max_body)
        return parse_body(body, request.headers.get("content-type", ""))

    def check_key(request: Request, given: str | None) -> None:
        header = request.headers.get("x-api-key") or request.headers.get("authorization", "")
        key = given or (header[7:] if header.lower().startswith("bearer ") else header) or None
        refusal = keys.check(key)
        if refusal is not None:
            status, message, retry = refusal
            raise HTTPError(status, message, {"Retry-After": str(retry)} if retry else None)

    def check_chars(texts: list[str]) -> None:
        chars = sum(len(t) for t in texts)
        if chars > settings.char_limit:
            raise HTTPError(400, f"Invalid request: request ({chars}) exceeds text limit "
                                 f"({settings.char_limit})")

    def busy(exc: QueueFull) -> HTTPError:
        return HTTPError(503, f"the server is busy: {exc}; try again shortly", {"Retry-After": "1"})

    def too_slow() -> HTTPError:
        return HTTPError(503, f"translation took longer than {settings.timeout:g} s", {"Retry-After": "5"})

    async def translate(model: ServedModel, texts: list[str], run: Settings,
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
            results = await asyncio.wait_for(asyncio.wrap_future(future), settings.timeout)
        except TimeoutError:
            future.cancel()
            raise too_slow() from None
        metrics.sentences(model.name, len(flat))
        out, start = [], 0
        for sentences in per_text:
            out.append(list(zip(sentences, results[start:start + len(sentences)], strict=True)))
            start += len(sentences)
        return out

    async def identify(texts: list[str]) -> list[list[Guess]]:
        """Each text's languages, likeliest first for this server (off the event loop: the
        identifier's first use loads its model)."""
        try:
            return await asyncio.to_thread(lambda: [models.identify(t) for t in texts])
        except ConfigError as exc:  # py3langid missing
            raise HTTPError(501, str(exc)) from None

    async def translate_route(route: Route, texts: list[str], beam: int | None, nbest: int = 1,
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
            done = await translate(leg, texts, run, constraints if last else None)
            if not last:
                firsts = done
                texts = [" ".join(t.text for _, t in pairs if t.text) for pairs in done]
        return done, firsts

    async def translate_each(routes: list[Route | None], texts: list[str], alternatives: int) -> list[Any]:
        """``texts[i]`` translated along ``routes[i]`` (None: answered as it is): one job per route,
        the routes at once."""
        order: dict[tuple[str, ...], list[int]] = {}
        done: list[Any] = [None] * len(texts)
        for i, route in enumerate(routes):
            if route is None:
                done[i] = [(texts[i], Translation(0, texts[i], [], [Candidate(texts[i], 0.0, 0.0, [], [])]))]
            else:
                order.setdefault(tuple(m.name for m in route.legs), []).append(i)
        jobs = [translate_route(routes[ids[0]], [texts[i] for i in ids], None, alternatives + 1)  # type: ignore[arg-type]
                for ids in order.values()]
        for ids, (results, _) in zip(order.values(), await asyncio.gather(*jobs), strict=True):
            for i, result in zip(ids, results, strict=True):
                done[i] = result
        return done

    async def libre_body(request: Request, schema: Any) -> tuple[Any, list[str]]:
        """A LibreTranslate body (JSON or form) validated against ``schema``, its API key checked; with
        its ``q`` as a list of texts."""
        try:
            req = schema.model_validate(await request_data(request))
        except ValidationError as exc:
            raise HTTPError(400, f"Invalid request: {one_line(exc)}") from None
        check_key(request, req.api_key)
        return req, [req.q] if isinstance(req.q, str) else req.q

    async def translate_pages(routes: list[Route | None], texts: list[str]) -> list[str]:
        """format html: each text a page or fragment translated with its tags (mtkit.formats.html),
        off the event loop; a run whose translation would lose or unnest a tag stays as it was.
        Through a pivot, each run's first-leg best is what the last leg translates."""
        def searcher(model: ServedModel, glossary: bool = True) -> Any:
            def search(lines: list[str], constraints: list[list[str]] | None = None) -> list[list[str]]:
                wide = Settings(model.default_beam, model.default_beam, glossary=glossary)  # all candidates
                future = model.batcher.submit(lines, wide, constraints)
                try:
                    results = future.result(settings.timeout)
                except concurrent.futures.TimeoutError:
                    future.cancel()
                    raise
                metrics.sentences(model.name, len(lines))
                return [[h.text for h in t.hypotheses] or [""] for t in results]
            return search

        def page(route: Route | None, text: str) -> str:
            if route is None:
                return text
            legs = [searcher(m, n == len(route.legs) - 1) for n, m in enumerate(route.legs)]

            def search(lines: list[str], constraints: list[list[str]] | None = None) -> list[list[str]]:
                for leg in legs[:-1]:
                    lines = [found[0] for found in leg(lines)]
                return legs[-1](lines, constraints)

            retry = search if route.legs[-1].translator.can_constrain else None
            return translate_html_text(text, "q", route.target, search, retry)

        try:
            return await asyncio.to_thread(lambda: [page(r, t) for r, t in zip(routes, texts, strict=True)])
        except MtkitError as exc:  # a page that is not HTML (a mismatched end tag)
            raise HTTPError(400, f"Invalid request: {exc}") from None
        except QueueFull as exc:
            raise busy(exc) from None
        except concurrent.futures.TimeoutError:
            raise too_slow() from None

    @app.post("/translate")
    async def libre_translate(request: Request) -> Response:
        req, texts = await libre_body(request, LibreRequest)
        if req.format == "html" and req.alternatives:
            raise HTTPError(400, "Invalid request: alternatives do not combine with format html")
        check_chars(texts)
        if req.alternatives > settings.max_nbest - 1:
            raise HTTPError(400, f"Invalid request: alternatives is at most {settings.max_nbest - 1}")
        detected = None
        routes: list[Route | None]
        try:
            if req.source == "auto":  # each text from its own language, directly or through the pivot
                if req.target not in models.known_languages():
                    raise LookupError(f"{req.target} is not supported")
                ranked = await identify(texts)
                chosen = [models.route_detected(r, req.target, req.route) for r in ranked]
                detected, routes = [g for g, _ in chosen], [r for _, r in chosen]
            else:
                routes = [models.route(req.source, req.target, req.route)] * len(texts)
        except LookupError as exc:
            raise HTTPError(400, str(exc)) from None
        if req.alternatives and any(r is not None and r.kind == "pivot" for r in routes):
            raise HTTPError(400, "Invalid request: alternatives do not apply through a pivot language (the "
                                 "last leg's alternatives of one first-leg translation are not the pair's)")
        if req.format == "html":
            pages = await translate_pages(routes, texts)
            return JSONResponse(libre_reply(req.q, [], 0, detected, pages))
        done = await translate_each(routes, texts, req.alternatives)
        return JSONResponse(libre_reply(req.q, done, req.alternatives, detected))

    @app.post("/detect")
    async def detect(request: Request) -> Response:
        _, texts = await libre_body(request, DetectRequest)
        if not any(texts):
            raise HTTPError(400, "Invalid request: missing q parameter")
        check_chars(texts)
        (ranked,) = await identify(["\n".join(texts)])
        return JSONResponse(detections(ranked[:DETECTIONS]))

    @app.post("/v1/translate")
    async def v1_translate(request: Request) -> Response:
        try:
            req = V1Request.model_validate(await request_data(request))
        except ValidationError as exc:
            raise HTTPError(422, one_line(exc)) from None
        check_key(request, req.api_key)
        texts = [req.text] if isinstance(req.text, str) else req.text
        check_chars(texts)
        detected: Guess | None = None
        route: Route | None
        try:
            if req.model is not None:
                model = models.models.get(req.model)
                if model is None:
                    raise HTTPError(400, f"no model {req.model!r} (models: {', '.join(models.models)})")
                route = Route(model.source, model.target, (model,), "direct")
            elif req.source is None or req.target is None:
                raise HTTPError(422, "name the model, or the source and target languages")
            elif req.source == "auto":  # the texts identified as one, as /detect does
                if req.target not in models.known_languages():
                    raise LookupError(f"{req.target} is not supported")
                (ranked,) = await identify(["\n".join(texts)])
                detected, route = models.route_detected(ranked, req.target, req.route)
            else:
                route = models.route(req.source, req.target, req.route)
        except LookupError as exc:
            raise HTTPError(400, str(exc)) from None
        last = route.legs[-1] if route is not None else None
        beam = req.beam_size or (last.default_beam if last is not None else 1)
        if beam > settings.max_beam or req.nbest > settings.max_nbest:
            raise HTTPError(422, f"beam_size is at most {settings.max_beam} and nbest at most "
                                 f"{settings.max_nbest}")
        if route is not None and route.kind == "pivot" and (req.nbest > 1 or req.attention):
            raise HTTPError(400, f"nbest and attention do not apply through a pivot language ({route.source}"
                                 f" → {route.via} → {route.target}): the last leg sees the pivot text, not "
                                 "the source")
        constraints = req.constraints
        if constraints is not None and isinstance(req.text, str):
            if constraints and not all(isinstance(c, str) for c in constraints):
                raise HTTPError(422, "constraints: a list of strings for one text")
            constraints = [constraints]  # type: ignore[list-item]
        elif constraints is not None and (len(constraints) != len(texts)
                                          or not all(isinstance(c, list) for c in constraints)):
            raise HTTPError(422, "constraints: one list of strings per text")
        firsts = None
        if route is None:  # already in the target language
            done = await translate_each([None] * len(texts), texts, 0)
        else:
            try:
                done, firsts = await translate_route(route, texts, req.beam_size, req.nbest, req.attention,
                                                     constraints)  # type: ignore[arg-type]
            except MtkitError as exc:  # a constraint the model cannot write, or an engine without constraints
                raise HTTPError(400, str(exc)) from None
        return JSONResponse(v1_reply(req.text, done, route, max(beam, req.nbest), req.nbest, req.attention,
                                     firsts, detected, req.target or ""))

    @app.get("/languages")
    async def languages() -> list[dict[str, Any]]:
        return models.languages()

    @app.get("/frontend/settings")
    async def frontend_settings() -> dict[str, Any]:
        first = next(iter(models.models.values()))
        return {"charLimit": settings.char_limit, "apiKeys": keys.enabled, "keyRequired": keys.enabled,
                "suggestions": False, "filesTranslation": False, "supportedFilesFormat": [],
                "language": {"source": {"code": first.source}, "target": {"code": first.target}}}

    @app.get("/v1/models")
    async def list_models() -> list[dict[str, Any]]:
        return [{"name": m.name, "source": m.source, "target": m.target, "engine": m.engine,
                 "beam_size": m.default_beam, "queued_sentences": m.batcher.queued_sentences,
                 "translating_sentences": m.batcher.stats.translating}
                for m in models.models.values()]

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics")
    async def prometheus() -> Response:
        body, content_type = metrics.render()
        return Response(body, media_type=content_type)

    static = resources.files("mtkit.serve") / "static"

    @app.get("/", response_class=HTMLResponse)
    async def page() -> HTMLResponse:
        return HTMLResponse((static / "index.html").read_text(encoding="utf-8"))

    app.mount("/static", StaticFiles(packages=[("mtkit.serve", "static")]), name="static")

    @app.exception_handler(HTTPError)
    async def http_error(request: Request, exc: HTTPError) -> JSONResponse:
        return _error(exc)

    @app.exception_handler(404)
    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": f"no such endpoint: {request.url.path}"}, status_code=404)

    @app.exception_handler(405)
    async def not_allowed(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"error": f"{request.method} is not allowed on {request.url.path}"},
                            status_code=405)

    @app.exception_handler(Exception)
    async def failed(request: Request, exc: Exception) -> JSONResponse:
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return JSONResponse({"error": f"translation failed: {reason}"}, status_code=500)

    return app


def _error(exc: HTTPError) -> JSONResponse:
    """The answer to an error: its message on one line (a field's name may hold a newline), cut short
    (so may it be long)."""
    message = " ".join(exc.message.split())
    if len(message) > 300:
        message = message[:297] + "..."
    return JSONResponse({"error": message}, status_code=exc.status, headers=exc.headers)
