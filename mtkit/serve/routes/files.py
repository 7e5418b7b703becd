"""LibreTranslate's file API: ``POST /translate_file`` (a multipart form: ``file``, ``source`` (or
``auto``), ``target``, ``api_key``) answers ``{"translatedFileUrl": ".../download_file/<uuid>.<name>"}``,
and ``GET /download_file/<uuid>.<name>`` serves that file under the upload's own name.

A file is translated as `mtkit translate` translates it (mtkit.formats.documents, by its extension),
its sentences on the models' batchers with every other request's. What can go wrong is answered in
one line before anything is stored: the upload past ``--files-max-size`` (413, counted while the body
arrives), an extension no format takes, a file its format cannot read (400), a full queue (503). The
API key's cost is the file's size over ``--char-limit``, as in LibreTranslate. Files are kept by
`mtkit.serve.files.FileStore`.
"""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import functools
import urllib.parse
from dataclasses import dataclass
from pathlib import PurePosixPath

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from mtkit.decode.segment import valid_unicode
from mtkit.errors import MtkitError
from mtkit.formats.documents import HANDLERS, document_format
from mtkit.serve.bodies import HTTPError
from mtkit.serve.context import Server, ServerDep
from mtkit.serve.files import FileStore, download_name, safe_name
from mtkit.serve.jobs import UNREADABLE, document_text, identify, translate_file
from mtkit.serve.models import Route
from mtkit.serve.replies import detected

#: bytes a multipart body may hold beyond the file itself (its part headers, the other fields)
FORM_OVERHEAD = 64 * 1024

DISABLED = "file translation is disabled on this server"

router = APIRouter()


@functools.cache
def supported_formats() -> dict[str, str]:
    """The extensions the server translates, each with its format: every format of
    mtkit.formats.documents. Each handler is loaded here, so that a format module that fails to import
    stops the server at start (and the tests) instead of quietly leaving the list."""
    found: dict[str, str] = {}
    for fmt, handler in HANDLERS.items():
        handler.load()
        found.update({suffix: fmt for suffix in handler.suffixes})
    return found


@dataclass
class Upload:
    """The fields of a /translate_file form: the file's name and bytes, and the text fields."""

    name: str | None
    data: bytes
    fields: dict[str, str]


async def read_upload(request: Request, max_size: int) -> Upload:
    """The multipart form, read as it arrives and refused with 413 as soon as it is past ``max_size``
    bytes of file (and `FORM_OVERHEAD`), or announces it will be."""
    kind = request.headers.get("content-type", "")
    if kind.split(";")[0].strip().lower() != "multipart/form-data":
        raise HTTPError(400, "Invalid request: send the file as a multipart/form-data form (field file)")
    too_big = f"the file is over the limit of {max_size:,} bytes"
    limit = max_size + FORM_OVERHEAD
    announced = request.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > limit:
        raise HTTPError(413, f"{too_big} (the request announces {int(announced):,})")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPError(413, too_big)
        chunks.append(chunk)
    upload = parse_form(b"".join(chunks), kind)
    if len(upload.data) > max_size:
        raise HTTPError(413, f"{too_big} ({len(upload.data):,})")
    return upload


def parse_form(body: bytes, content_type: str) -> Upload:
    """A multipart/form-data body split at its boundary, byte for byte (a file part's bytes are the
    file's exactly): the ``file`` part and the text fields. 400 for a body that is not one."""
    head = email.parser.Parser(policy=email.policy.HTTP).parsestr(
        f"Content-Type: {content_type}\r\n\r\n", headersonly=True)
    boundary = head.get_param("boundary")
    if not isinstance(boundary, str) or not boundary:
        raise HTTPError(400, "Invalid request: a multipart body without a boundary")
    delimiter = b"\r\n--" + boundary.encode("latin-1", "replace")
    at = (b"\r\n" + body).find(delimiter)
    if at < 0:
        raise HTTPError(400, "Invalid request: the multipart body has no part (is the boundary right?)")
    pos, upload = at + len(delimiter) - 2, Upload(None, b"", {})
    while not body.startswith(b"--", pos):
        if not body.startswith(b"\r\n", pos):
            raise HTTPError(400, "Invalid request: the multipart body cannot be read")
        end = body.find(delimiter, pos + 2)
        if end < 0:
            raise HTTPError(400, "Invalid request: the multipart body ends before its last boundary")
        _part(body[pos + 2:end], upload)
        pos = end + len(delimiter)
    return upload


def _part(part: bytes, upload: Upload) -> None:
    """One part of the form into ``upload``: the file (the part named ``file``) or a text field."""
    split = part.find(b"\r\n\r\n")
    headers, content = (part[:split], part[split + 4:]) if split >= 0 else (part, b"")
    message = email.parser.Parser(policy=email.policy.HTTP).parsestr(
        headers.decode("utf-8", "replace") + "\r\n\r\n", headersonly=True)
    name = message.get_param("name", header="content-disposition")
    if not isinstance(name, str):
        return
    if name == "file":
        filename = message.get_filename()
        upload.name, upload.data = valid_unicode(filename) if filename is not None else "", content
    else:
        upload.fields[valid_unicode(name)] = valid_unicode(content.decode("utf-8", "replace"))


def _files(server: Server, status: int) -> FileStore:
    if not server.settings.files:
        raise HTTPError(status, f"{DISABLED} (--disable-files-translation)")
    if server.files is None:
        raise HTTPError(503, "the server is starting or stopping; try again shortly", {"Retry-After": "1"})
    return server.files


@router.post("/translate_file")
async def translate_file_route(request: Request, server: ServerDep) -> Response:
    store = _files(server, 403)
    upload = await read_upload(request, server.settings.files_max_size)
    server.check_key(request, upload.fields.get("api_key"),
                     max(1, len(upload.data) // max(1, server.settings.char_limit)))
    for field, given in (("file", upload.name is not None), ("source", upload.fields.get("source")),
                         ("target", upload.fields.get("target"))):
        if not given:
            raise HTTPError(400, f"Invalid request: missing {field} parameter")
    name = download_name(upload.name or "")
    if not upload.name or not name.strip():
        raise HTTPError(400, "Invalid request: empty file name")
    suffix = PurePosixPath(safe_name(name)).suffix.lower()
    if suffix not in supported_formats():
        raise HTTPError(400, f"Invalid request: file format not supported: {suffix or 'no extension'} "
                             f"(supported: {', '.join(supported_formats())})")
    fmt = document_format(safe_name(name), "auto")
    source, target = upload.fields["source"], upload.fields["target"]
    guess = None
    route: Route | None
    try:
        if source == "auto":
            if target not in server.models.known_languages():
                raise LookupError(f"{target} is not supported")
            text = await asyncio.to_thread(document_text, upload.data, name, fmt)
            (ranked,) = await identify(server, [text])
            guess, route = server.models.route_detected(ranked, target)
        else:
            route = server.models.route(source, target)
    except LookupError as exc:
        raise HTTPError(400, str(exc)) from None
    except MtkitError as exc:  # the file cannot be read as its format
        raise HTTPError(400, f"Invalid request: {exc}") from None
    except UNREADABLE as exc:
        raise HTTPError(400, f"Invalid request: {name} cannot be read as {fmt}: {exc}") from None
    result = await translate_file(server, route, upload.data, name, fmt)
    stored = await asyncio.to_thread(store.save, name, fmt, result.data)  # not behind the documents
    reply: dict[str, object] = {"translatedFileUrl": str(request.url_for("download_file", name=stored))}
    if guess is not None:
        reply["detectedLanguage"] = detected(guess)
    return JSONResponse(reply)


@router.get("/download_file/{name}", name="download_file")
async def download_file(name: str, server: ServerDep) -> Response:
    store = _files(server, 400)
    found = await asyncio.to_thread(store.read, name)
    if found is None:
        minutes = f"{server.settings.files_keep_minutes:g}"
        raise HTTPError(404, f"no such file: {valid_unicode(name)[:100]} (translated files are kept "
                             f"{minutes} minutes)")
    stored, data = found
    offered = urllib.parse.quote(stored.download_name, safe="")
    disposition = f"attachment; filename=\"{safe_name(stored.download_name)}\"; filename*=UTF-8''{offered}"
    return Response(data, headers={"content-type": HANDLERS[stored.fmt].media_type,
                                   "content-disposition": disposition})
