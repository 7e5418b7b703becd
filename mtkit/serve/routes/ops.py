"""For those who run the server: ``GET /health`` (the server is up) and ``GET /metrics``
(Prometheus: requests by endpoint and status, latency, sentences, queues and batches per model)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from mtkit.serve.context import ServerDep

router = APIRouter()


@router.get("/health")
async def health() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/metrics")
async def prometheus(server: ServerDep) -> Response:
    body, content_type = server.metrics.render()
    return Response(body, media_type=content_type)
