"""The HTTP API of `mtkit serve` (a FastAPI application) and its web page, put together from routers.

Two APIs over the same models, and what goes around them:

- LibreTranslate's (``POST /translate``, ``POST /detect``, ``GET /languages``, ``GET
  /frontend/settings``: `mtkit.serve.routes.libre`), so that LibreTranslate clients and integrations
  work unchanged;
- mtkit's own (``POST /v1/translate``, ``GET /v1/models``: `mtkit.serve.routes.v1`): beam size,
  n-best with scores, each sentence's confidence, subwords and attention;
- LibreTranslate's file API (``POST /translate_file``, ``GET /download_file/<name>``:
  `mtkit.serve.routes.files`), its files kept in a directory of the server's (`mtkit.serve.files`),
  made when the server starts, swept of expired files while it runs, removed when it stops;
- ``GET /health`` and ``GET /metrics`` (`mtkit.serve.routes.ops`), the web page (`routes.page`).

What they share (the models, limits, API keys, metrics) is one `Server` (`mtkit.serve.context`) on
``app.state.server``, which each handler receives as a FastAPI dependency. A request is read
(`mtkit.serve.bodies`), validated by pydantic, checked against the API keys, and queued on its model's
`Batcher` (`mtkit.serve.jobs`), which translates concurrent requests together. Here lives what applies
to every route: the metrics of each request, CORS, and the errors: every one a JSON line ``{"error":
"..."}`` with LibreTranslate's status codes; no request, however malformed, is answered 500.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from mtkit.serve.bodies import HTTPError
from mtkit.serve.context import Server, ServerSettings
from mtkit.serve.files import FileStore
from mtkit.serve.metrics import ServerMetrics
from mtkit.serve.models import ModelSet
from mtkit.serve.routes import files, libre, ops, page, v1
from mtkit.serve.security import KeyRing

__all__ = ["ServerSettings", "create_app"]


def create_app(models: ModelSet, settings: ServerSettings, keys: KeyRing | None = None) -> FastAPI:
    """The application serving ``models`` within ``settings``; ``keys``: the API keys (none: open)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        server: Server = app.state.server
        sweeper = None
        if settings.files:
            files.supported_formats()  # every format module loads, or the server does not start
            server.files = FileStore(settings.files_keep_minutes * 60)
            sweeper = asyncio.create_task(sweep_files(server.files))
        try:
            yield
        finally:
            await asyncio.to_thread(models.close)  # translate what is queued, then stop the workers
            if sweeper is not None and server.files is not None:
                sweeper.cancel()
                store, server.files = server.files, None
                await asyncio.to_thread(store.close)

    app = FastAPI(title="mtkit", docs_url="/docs", redoc_url=None, lifespan=lifespan)
    app.state.server = Server(models, settings, keys or KeyRing(), ServerMetrics(models))
    app.state.models = models
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["GET", "POST"],
                           allow_headers=["*"])
    app.middleware("http")(count)
    app.include_router(libre.router)
    app.include_router(files.router)
    app.include_router(v1.router)
    app.include_router(ops.router)
    app.include_router(page.router)
    app.mount("/static", page.static_files(), name="static")
    app.add_exception_handler(HTTPError, http_error)
    app.add_exception_handler(404, not_found)
    app.add_exception_handler(405, not_allowed)
    app.add_exception_handler(Exception, failed)
    return app


async def sweep_files(store: FileStore) -> None:
    """Remove expired files while the server runs: every quarter of the keep time, at most a minute
    apart (a file is never served once expired; the sweep frees the disk)."""
    while True:
        await asyncio.sleep(min(60.0, store.keep_seconds / 4))
        await asyncio.to_thread(store.sweep)


async def count(request: Request, call_next) -> Response:
    """Every request in the metrics: its endpoint, status and time (an error raised while the body is
    read answered here)."""
    started = time.perf_counter()
    try:
        response = await call_next(request)
    except HTTPError as exc:
        response = _error(exc)
    request.app.state.server.metrics.observe(request.url.path, response.status_code,
                                             time.perf_counter() - started)
    return response


async def http_error(request: Request, exc: HTTPError) -> JSONResponse:
    return _error(exc)


async def not_found(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"error": f"no such endpoint: {request.url.path}"}, status_code=404)


async def not_allowed(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"error": f"{request.method} is not allowed on {request.url.path}"}, status_code=405)


async def failed(request: Request, exc: Exception) -> JSONResponse:
    """The last resort: an exception no route turned into an answer, still one line."""
    reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    return JSONResponse({"error": f"translation failed: {reason}"}, status_code=500)


def _error(exc: HTTPError) -> JSONResponse:
    """The answer to an error: its message on one line (a field's name may hold a newline), cut short
    (so may it be long)."""
    message = " ".join(exc.message.split())
    if len(message) > 300:
        message = message[:297] + "..."
    return JSONResponse({"error": message}, status_code=exc.status, headers=exc.headers)
