"""The web page of `mtkit serve`: ``GET /`` and its script and style under ``/static``
(`mtkit/serve/static/`), which translate with ``POST /v1/translate``."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC = resources.files("mtkit.serve") / "static"

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
async def page() -> HTMLResponse:
    return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))


def static_files() -> StaticFiles:
    """The page's files, for the app to mount at ``/static`` (a router carries routes, not mounts)."""
    return StaticFiles(packages=[("mtkit.serve", "static")])
