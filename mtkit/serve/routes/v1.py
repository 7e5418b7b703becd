"""mtkit's own API: ``POST /v1/translate`` (beam size, n-best with scores, each sentence's confidence,
subwords and attention, constraints, the route taken) and ``GET /v1/models``.

A request names a model, or a source (or ``auto``) and a target; its checks run in this order, each
failing with one line: body and fields (422), API key (403 / 429), characters (400), the route (400),
beam and n-best (422), what a pivot cannot give (400), constraints (422).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from mtkit.errors import MtkitError
from mtkit.langid import Guess
from mtkit.serve.bodies import HTTPError, V1Request, one_line
from mtkit.serve.context import Server, ServerDep
from mtkit.serve.jobs import identify, translate_each, translate_route
from mtkit.serve.models import Route
from mtkit.serve.replies import v1_reply

router = APIRouter()


@router.post("/v1/translate")
async def v1_translate(request: Request, server: ServerDep) -> Response:
    try:
        req = V1Request.model_validate(await server.fields(request))
    except ValidationError as exc:
        raise HTTPError(422, one_line(exc)) from None
    server.check_key(request, req.api_key)
    texts = [req.text] if isinstance(req.text, str) else req.text
    server.check_chars(texts)
    detected, route = await route_of(server, req, texts)
    last = route.legs[-1] if route is not None else None
    beam = req.beam_size or (last.default_beam if last is not None else 1)
    limits = server.settings
    if beam > limits.max_beam or req.nbest > limits.max_nbest:
        raise HTTPError(422, f"beam_size is at most {limits.max_beam} and nbest at most {limits.max_nbest}")
    if route is not None and route.kind == "pivot" and (req.nbest > 1 or req.attention):
        raise HTTPError(400, f"nbest and attention do not apply through a pivot language ({route.source}"
                             f" → {route.via} → {route.target}): the last leg sees the pivot text, not "
                             "the source")
    constraints = constraints_of(req, texts)
    firsts = None
    if route is None:  # already in the target language
        done = await translate_each(server, [None] * len(texts), texts, 0)
    else:
        try:
            done, firsts = await translate_route(server, route, texts, req.beam_size, req.nbest,
                                                 req.attention, constraints)
        except MtkitError as exc:  # a constraint the model cannot write, or an engine without constraints
            raise HTTPError(400, str(exc)) from None
    return JSONResponse(v1_reply(req.text, done, route, max(beam, req.nbest), req.nbest, req.attention,
                                 firsts, detected, req.target or ""))


@router.get("/v1/models")
async def list_models(server: ServerDep) -> list[dict[str, Any]]:
    return [{"name": m.name, "source": m.source, "target": m.target, "engine": m.engine,
             "beam_size": m.default_beam, "queued_sentences": m.batcher.queued_sentences,
             "translating_sentences": m.batcher.stats.translating}
            for m in server.models.models.values()]


async def route_of(server: Server, req: V1Request, texts: list[str]) -> tuple[Guess | None, Route | None]:
    """The language detected (``source: auto``) and the route of a request: the model it names as it
    is, else its pair's (None: text already in the target language, left as it is)."""
    models = server.models
    try:
        if req.model is not None:
            model = models.models.get(req.model)
            if model is None:
                raise HTTPError(400, f"no model {req.model!r} (models: {', '.join(models.models)})")
            return None, Route(model.source, model.target, (model,), "direct")
        if req.source is None or req.target is None:
            raise HTTPError(422, "name the model, or the source and target languages")
        if req.source == "auto":  # the texts identified as one, as /detect does
            if req.target not in models.known_languages():
                raise LookupError(f"{req.target} is not supported")
            (ranked,) = await identify(server, ["\n".join(texts)])
            return models.route_detected(ranked, req.target, req.route)
        return None, models.route(req.source, req.target, req.route)
    except LookupError as exc:
        raise HTTPError(400, str(exc)) from None


def constraints_of(req: V1Request, texts: list[str]) -> list[list[str]] | None:
    """The request's constraints as one list of strings per text (one text may give just the list)."""
    constraints = req.constraints
    if constraints is not None and isinstance(req.text, str):
        if constraints and not all(isinstance(c, str) for c in constraints):
            raise HTTPError(422, "constraints: a list of strings for one text")
        return [constraints]  # type: ignore[list-item]
    if constraints is not None and (len(constraints) != len(texts)
                                    or not all(isinstance(c, list) for c in constraints)):
        raise HTTPError(422, "constraints: one list of strings per text")
    return constraints  # type: ignore[return-value]
