"""Request bodies of `mtkit serve`, read the way clients send them: JSON, a url-encoded form
(``libretranslatepy``, curl ``-d``) or a multipart form (LibreTranslate's own web page sends
``FormData``; curl ``-F``).

Whatever arrives becomes a dict of fields whose strings all encode to UTF-8: undecodable bytes become
U+FFFD, as `mtkit translate` reads a file, and so do lone surrogates, which JSON can spell
(``"\\ud800"``: what a JavaScript client sends after cutting an emoji in half) but which neither the
tokenizer nor an HTTP answer can encode. That happens here, once, for keys and values alike, so no
field can carry one into an error message or a reply.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import urllib.parse
from typing import Any, Literal

from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mtkit.decode.segment import valid_unicode


class HTTPError(Exception):
    """An answer other than 200: the status, one line of message, and headers (``Retry-After``)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 past ``limit`` bytes (announced or actually sent)."""
    announced = request.headers.get("content-length")
    if announced and announced.isdigit() and int(announced) > limit:
        raise HTTPError(413, f"request body of {int(announced):,} bytes is over the limit of {limit:,}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPError(413, f"request body is over the limit of {limit:,} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_body(body: bytes, content_type: str) -> dict[str, Any]:
    """The fields of a JSON object, a url-encoded form or a multipart form, with valid Unicode."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        pairs = urllib.parse.parse_qsl(body.decode("utf-8", errors="replace"), keep_blank_values=True)
        return _fields(pairs)
    if kind == "multipart/form-data":
        return _fields(_multipart(body, content_type))
    if kind not in ("application/json", ""):
        raise HTTPError(415, f"content type {valid_unicode(kind)[:100]}: send application/json, "
                             "application/x-www-form-urlencoded or multipart/form-data")
    try:
        # strict=False: control characters inside strings are cleaned later, as in files
        data = _valid(json.loads(body.decode("utf-8", errors="replace"), strict=False))
    except json.JSONDecodeError as exc:
        raise HTTPError(400, f"Invalid request: the body is not JSON ({exc.msg} at line {exc.lineno} "
                             f"column {exc.colno})") from None
    except RecursionError:  # [[[[...]]]]: deeper than Python's stack
        raise HTTPError(400, "Invalid request: the body is nested too deeply") from None
    if not isinstance(data, dict):
        raise HTTPError(400, "Invalid request: the body must be a JSON object")
    return data


def _fields(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Form fields as a dict: a repeated ``q`` is a list of texts (as LibreTranslate reads it); of
    another repeated field the last counts."""
    fields: dict[str, list[str]] = {}
    for key, value in pairs:
        fields.setdefault(valid_unicode(key), []).append(valid_unicode(value))
    return {k: v if k == "q" and len(v) > 1 else v[-1] for k, v in fields.items()}


def _multipart(body: bytes, content_type: str) -> list[tuple[str, str]]:
    """(name, text) of each field of a multipart/form-data body; a file part is refused (mtkit
    translates text fields, not files)."""
    head = b"Content-Type: " + content_type.encode("utf-8", "replace") + b"\r\n\r\n"
    try:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        parts = list(message.iter_parts()) if message.is_multipart() else []
        pairs = []
        for part in parts:
            name = part.get_param("name", header="content-disposition")
            if not isinstance(name, str):
                continue
            if part.get_filename() is not None:
                raise HTTPError(400, f"Invalid request: {valid_unicode(name)[:100]} is a file; this "
                                     "endpoint translates text fields (files go to /translate_file)")
            payload = part.get_payload(decode=True)
            text = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
            pairs.append((name, text))
    except HTTPError:
        raise
    except Exception:  # the email parser is lenient; anything it still cannot read is the client's
        raise HTTPError(400, "Invalid request: the multipart body cannot be read") from None
    if not parts:
        raise HTTPError(400, "Invalid request: a multipart body without parts (is the boundary right?)")
    return pairs


def _valid(value: Any) -> Any:
    """``value`` (parsed JSON) with every string, key or value, at any depth, made valid Unicode."""
    if isinstance(value, str):
        return valid_unicode(value)
    if isinstance(value, list):
        return [_valid(v) for v in value]
    if isinstance(value, dict):
        return {valid_unicode(k): _valid(v) for k, v in value.items()}
    return value


# ------------------------------------------------------------------------------- request schemas
class LibreRequest(BaseModel):
    """LibreTranslate's /translate fields (others, such as its file options, are ignored as there)."""

    model_config = ConfigDict(extra="ignore")
    q: str | list[str]
    source: str
    target: str
    format: Literal["text", "html"] = "text"
    alternatives: int = Field(0, ge=0)
    api_key: str | None = None
    route: Literal["auto", "direct", "pivot"] = "auto"  # mtkit's: how a pair without a model is reached


class DetectRequest(BaseModel):
    """LibreTranslate's /detect: the text (mtkit also takes a list, identified as one text)."""

    model_config = ConfigDict(extra="ignore")
    q: str | list[str]
    api_key: str | None = None


class V1Request(BaseModel):
    """mtkit's /v1/translate: name the model or the language pair."""

    model_config = ConfigDict(extra="forbid")
    text: str | list[str]
    source: str | None = None
    target: str | None = None
    model: str | None = None
    beam_size: int | None = Field(None, ge=1)
    nbest: int = Field(1, ge=1)
    attention: bool = False
    constraints: list[str] | list[list[str]] | None = None  # per text: target strings it must contain
    api_key: str | None = None
    route: Literal["auto", "direct", "pivot"] = "auto"  # direct: a zero-shot direction where no trained one


def one_line(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "body"
    if first.get("type") == "missing":
        return f"missing {where} parameter"
    return f"{where}: {first.get('msg', 'invalid')}"
