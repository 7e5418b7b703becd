"""LibreTranslate's API: ``POST /translate``, ``POST /detect``, ``GET /languages``, ``GET
/frontend/settings`` (which lists the file formats of ``/translate_file``: `routes.files`), so that
LibreTranslate's clients and integrations work unchanged.

Bodies are JSON, a url-encoded form or a multipart form; fields mtkit cannot honour are refused with
400, never ignored (docs/serve.md lists them). ``source: "auto"`` and ``/detect`` identify what
language a text is (`mtkit.langid`); a pair without a model is answered through the pivot language
(`ModelSet.route`). Errors are LibreTranslate's: 400 for an invalid request, 403 / 429 for keys.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from mtkit.serve.bodies import DetectRequest, HTTPError, LibreRequest, one_line
from mtkit.serve.context import Server, ServerDep
from mtkit.serve.jobs import identify, translate_each, translate_pages
from mtkit.serve.models import Route
from mtkit.serve.replies import detections, libre_reply
from mtkit.serve.routes.files import supported_formats

#: the languages /detect answers, likeliest first
DETECTIONS = 5

router = APIRouter()


async def libre_body(server: Server, request: Request, schema: Any) -> tuple[Any, list[str]]:
    """A LibreTranslate body (JSON or form) validated against ``schema``, its API key checked; with
    its ``q`` as a list of texts."""
    try:
        req = schema.model_validate(await server.fields(request))
    except ValidationError as exc:
        raise HTTPError(400, f"Invalid request: {one_line(exc)}") from None
    server.check_key(request, req.api_key)
    return req, [req.q] if isinstance(req.q, str) else req.q


@router.post("/translate")
async def libre_translate(request: Request, server: ServerDep) -> Response:
    req, texts = await libre_body(server, request, LibreRequest)
    if req.format == "html" and req.alternatives:
        raise HTTPError(400, "Invalid request: alternatives do not combine with format html")
    server.check_chars(texts)
    if req.alternatives > server.settings.max_nbest - 1:
        raise HTTPError(400, f"Invalid request: alternatives is at most {server.settings.max_nbest - 1}")
    models = server.models
    detected = None
    routes: list[Route | None]
    try:
        if req.source == "auto":  # each text from its own language, directly or through the pivot
            if req.target not in models.known_languages():
                raise LookupError(f"{req.target} is not supported")
            ranked = await identify(server, texts)
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
        pages = await translate_pages(server, routes, texts)
        return JSONResponse(libre_reply(req.q, [], 0, detected, pages))
    done = await translate_each(server, routes, texts, req.alternatives)
    return JSONResponse(libre_reply(req.q, done, req.alternatives, detected))


@router.post("/detect")
async def detect(request: Request, server: ServerDep) -> Response:
    _, texts = await libre_body(server, request, DetectRequest)
    if not any(texts):
        raise HTTPError(400, "Invalid request: missing q parameter")
    server.check_chars(texts)
    (ranked,) = await identify(server, ["\n".join(texts)])
    return JSONResponse(detections(ranked[:DETECTIONS]))


@router.get("/languages")
async def languages(server: ServerDep) -> list[dict[str, Any]]:
    return server.models.languages()


@router.get("/frontend/settings")
async def frontend_settings(server: ServerDep) -> dict[str, Any]:
    first = next(iter(server.models.models.values()))
    return {"charLimit": server.settings.char_limit, "apiKeys": server.keys.enabled,
            "keyRequired": server.keys.enabled, "suggestions": False,
            "filesTranslation": server.settings.files,
            "supportedFilesFormat": list(supported_formats()) if server.settings.files else [],
            "language": {"source": {"code": first.source}, "target": {"code": first.target}}}
