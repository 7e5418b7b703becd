"""What every route of `mtkit serve` shares: one typed `Server` object with the server's limits, its
models, API keys and metrics, which handlers receive through FastAPI's dependency injection
(a parameter ``server: ServerDep``) rather than from closures.

`Server` also makes the checks every translation request goes through, in this order: its body read
(size limit, JSON or a form, valid Unicode: `mtkit.serve.bodies`), its API key, its characters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Request

from mtkit.serve.bodies import HTTPError, parse_body, read_body
from mtkit.serve.files import FileStore
from mtkit.serve.metrics import ServerMetrics
from mtkit.serve.models import ModelSet
from mtkit.serve.security import KeyRing


@dataclass
class ServerSettings:
    """Limits of one server (``mtkit serve`` options)."""

    char_limit: int = 20_000  # characters of text in one request
    max_body: int = 1_048_576  # bytes of one request body
    timeout: float = 60.0  # seconds a request may wait for its translation
    max_beam: int = 16
    max_nbest: int = 8
    cors_origins: list[str] = field(default_factory=list)
    files: bool = True  # POST /translate_file (off: --disable-files-translation)
    files_max_size: int = 10 * 1024 * 1024  # bytes of one uploaded file (413 past it)
    files_keep_minutes: float = 30.0  # how long a translated file can be downloaded


@dataclass
class Server:
    """One server's shared state, made once by `create_app` and kept as ``app.state.server``."""

    models: ModelSet
    settings: ServerSettings
    keys: KeyRing
    metrics: ServerMetrics
    files: FileStore | None = None  # the translated files (made when the server starts, unless disabled)

    async def fields(self, request: Request) -> dict[str, Any]:
        """The request body's fields (JSON or a form); 413 past ``max_body`` bytes, 415 for other content."""
        body = await read_body(request, self.settings.max_body)
        return parse_body(body, request.headers.get("content-type", ""))

    def check_key(self, request: Request, given: str | None, cost: int = 1) -> None:
        """403 or 429 (with ``Retry-After``) unless the key may make a request now: ``given`` (the body's
        ``api_key``), else an ``X-API-Key`` header or ``Authorization: Bearer KEY``; the request counts
        as ``cost`` requests against the key's limit (a file: by its size)."""
        header = request.headers.get("x-api-key") or request.headers.get("authorization", "")
        key = given or (header[7:] if header.lower().startswith("bearer ") else header) or None
        refusal = self.keys.check(key, cost)
        if refusal is not None:
            status, message, retry = refusal
            raise HTTPError(status, message, {"Retry-After": str(retry)} if retry else None)

    def check_chars(self, texts: list[str]) -> None:
        """400, in LibreTranslate's words, when the texts hold more than ``char_limit`` characters."""
        chars = sum(len(t) for t in texts)
        if chars > self.settings.char_limit:
            raise HTTPError(400, f"Invalid request: request ({chars}) exceeds text limit "
                                 f"({self.settings.char_limit})")


async def server_of(request: Request) -> Server:
    """The server a request came to (async: FastAPI would run a plain function on its thread pool)."""
    return request.app.state.server


#: a handler's parameter ``server: ServerDep`` is the `Server` the request came to
ServerDep = Annotated[Server, Depends(server_of)]
