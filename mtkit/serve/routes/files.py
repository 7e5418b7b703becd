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
import functools
import urllib.parse
from dataclasses import dataclass
from pathlib import PurePosixPath

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import MultipartParser, parse_options_header

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
    """The multipart form, parsed as it arrives (python-multipart's streaming parser, what Starlette's
    own form reader uses) and refused with 413 as soon as it is past ``max_size`` bytes of file (and
    `FORM_OVERHEAD`), or announces it will be; 400 for a body that is not a multipart form."""
    kind = request.headers.get("content-type", "")
    mime, options = parse_options_header(kind)
    if mime.lower() != b"multipart/form-data":
        raise HTTPError(400, "Invalid request: send the file as a multipart/form-data form (field file)")
    boundary = options.get(b"boundary", b"")
    if not boundary:
        raise HTTPError(400, "Invalid request: a multipart body without a boundary")
    too_big = f"the file is over the limit of {max_size:,} bytes"
    limit = max_size + FORM_OVERHEAD
    announced = request.headers.get("content-length", "")
    if announced.isdigit() and int(announced) > limit:
        raise HTTPError(413, f"{too_big} (the request announces {int(announced):,})")
    form = _Form()
    parser = MultipartParser(boundary, form.callbacks())
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise HTTPError(413, too_big)
            parser.write(chunk)
        parser.finalize()
    except MultipartParseError as exc:
        raise HTTPError(400, f"Invalid request: the multipart body cannot be read ({exc})") from None
    if not form.ended:
        raise HTTPError(400, "Invalid request: the multipart body ends before its last boundary")
    if len(form.upload.data) > max_size:
        raise HTTPError(413, f"{too_big} ({len(form.upload.data):,})")
    return form.upload


class _Form:
    """python-multipart's callbacks, collecting the ``file`` part's bytes as they are (a file part's
    bytes are the file's exactly) and the text fields."""

    def __init__(self) -> None:
        self.upload = Upload(None, b"", {})
        self.ended = False
        self._headers: dict[bytes, bytes] = {}
        self._field, self._value = b"", b""
        self._data: list[bytes] = []

    def callbacks(self) -> dict:
        def on_part_begin() -> None:
            self._headers, self._data = {}, []

        def on_header_field(data: bytes, start: int, end: int) -> None:
            self._field += data[start:end]

        def on_header_value(data: bytes, start: int, end: int) -> None:
            self._value += data[start:end]

        def on_header_end() -> None:
            self._headers[self._field.strip().lower()] = self._value.strip()
            self._field, self._value = b"", b""

        def on_part_data(data: bytes, start: int, end: int) -> None:
            self._data.append(data[start:end])

        def on_part_end() -> None:
            _, params = parse_options_header(self._headers.get(b"content-disposition", b""))
            name = params.get(b"name")
            if name is None:
                return
            field = valid_unicode(name.decode("utf-8", "replace"))
            content = b"".join(self._data)
            if field == "file":
                filename = params.get(b"filename")
                decoded = None if filename is None else filename.decode("utf-8", "replace")
                self.upload.name = "" if decoded is None else valid_unicode(decoded)
                self.upload.data = content
            else:
                self.upload.fields[field] = valid_unicode(content.decode("utf-8", "replace"))

        def on_end() -> None:
            self.ended = True

        return {"on_part_begin": on_part_begin, "on_header_field": on_header_field,
                "on_header_value": on_header_value, "on_header_end": on_header_end,
                "on_part_data": on_part_data, "on_part_end": on_part_end, "on_end": on_end}


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
    reply: dict[str, object] = {"translatedFileUrl": str(request.url_for("download_file", name=stored)),
                                # mtkit's own, which LibreTranslate's clients ignore: what `mtkit translate`
                                # prints, and how many strings to review (placeholders put by guess)
                                "summary": result.summary, "needsReview": result.guessed}
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
