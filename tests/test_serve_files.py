"""`mtkit serve`'s file API (LibreTranslate's /translate_file and /download_file): a file uploaded comes
back as `translate_document` translates it, under its own name; only names the server made are
served; the size limit, bad files, unknown extensions and a failed translation answer one line and
leave nothing on disk; API keys pay by size; --disable-files-translation; expired files are swept.
(The web page's Files tab in a real browser: test_serve_browser.py.)"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import re
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402
from starlette.requests import Request  # noqa: E402

from mtkit.decode.formats_adapter import search_functions  # noqa: E402
from mtkit.decode.translator import LoadOptions  # noqa: E402
from mtkit.formats.documents import HANDLERS, translate_document  # noqa: E402
from mtkit.serve import ServeOptions, build_app  # noqa: E402
from mtkit.serve.batcher import QueueFull  # noqa: E402
from mtkit.serve.bodies import HTTPError  # noqa: E402
from mtkit.serve.files import FileStore  # noqa: E402
from mtkit.serve.routes.files import FORM_OVERHEAD, read_upload, supported_formats  # noqa: E402
from mtkit.serve.security import KeyRing  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from serve_helpers import offline, served_model  # noqa: E402

EXACT = LoadOptions(device="cpu", threads=1, precision="fp32")
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"

CATALOG = (b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
           b'#: src/main.c:10\nmsgid "the cat sat on the mat ."\nmsgstr ""\n\n'
           b'msgid "Save %s now"\nmsgstr ""\n')
PAGE = (b"<!doctype html>\n<html><body><h1>the house</h1>\n<p>the cat <b>sat</b> on the mat .</p>"
        b"</body></html>\n")
#: a small file of every format whose module exists here (the others are written as this is)
SAMPLES: dict[str, tuple[str, bytes]] = {
    "po": ("messages.po", CATALOG), "html": ("page.html", PAGE),
    "text": ("notes.txt", b"the cat sat on the mat .\n\nthe house is small .\n"),
    "srt": ("movie.srt", b"1\n00:00:01,000 --> 00:00:02,500\nthe cat sat\n\n"
                         b"2\n00:00:03,000 --> 00:00:04,000\non the <i>mat</i> .\n"),
    "vtt": ("talk.vtt", b"WEBVTT\n\n00:00:01.000 --> 00:00:02.500\nthe cat sat\n\n"
                        b"00:00:03.000 --> 00:00:04.000\nthe house is small .\n"),
}

XLIFF = (b'<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" '
         b'xmlns="urn:oasis:names:tc:xliff:document:1.2">\n<file source-language="en" target-language="de" '
         b'datatype="plaintext" original="ui"><body>\n<trans-unit id="1"><source>the cat sat on the mat .'
         b'</source></trans-unit>\n<trans-unit id="2"><source>the house is small .</source></trans-unit>\n'
         b"</body></file>\n</xliff>\n")
SAMPLES["xliff"] = ("ui.xlf", XLIFF)


def word_document() -> bytes:
    """A .docx with two paragraphs (python-docx, a test-only library: the dev extra)."""
    docx = pytest.importorskip("docx")
    document = docx.Document()
    document.add_paragraph("the cat sat on the mat .")
    document.add_paragraph("the house is ").add_run("small").bold = True
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return served_model(tmp_path_factory.mktemp("serve-files") / "en-de")


def app_for(model: Path, keys: KeyRing | None = None, **options):
    app = build_app([model], EXACT, ServeOptions(**options))
    if keys is not None:
        app.state.server.keys = keys
    return app


@pytest.fixture(scope="module")
def client(model):
    with TestClient(app_for(model, files_max_size=50_000, char_limit=500)) as c:
        yield c


def upload(client, name: str, data: bytes, source: str = "en", target: str = "de", **fields):
    return client.post("/translate_file", files={"file": (name, data)},
                       data={"source": source, "target": target, **fields})


def stored_files(client) -> list[Path]:
    return sorted(client.app.state.server.files.root.iterdir())


def test_an_upload_comes_back_as_translate_document_translates_it(client, model):
    reference = offline(model)
    formats = [f for f in [*SAMPLES, "docx"] if f in supported_formats().values()]
    assert {"po", "html"} <= set(formats)
    for fmt in formats:
        name, data = SAMPLES[fmt] if fmt != "docx" else ("report.docx", word_document())
        reply = upload(client, name, data)
        assert reply.status_code == 200, reply.text
        url = reply.json()["translatedFileUrl"]
        assert re.fullmatch(rf"http://testserver/download_file/{UUID}\.{re.escape(name)}", url)
        download = client.get(url)
        offline_result = translate_document(data, name, fmt, "de", *search_functions(reference, name))
        expected = offline_result.data
        assert reply.json()["summary"] == offline_result.summary  # what `mtkit translate` prints
        assert reply.json()["needsReview"] == offline_result.guessed
        assert download.status_code == 200
        assert download.content == expected and expected != data
        assert download.headers["content-type"] == HANDLERS[fmt].media_type
        assert download.headers["content-disposition"] == (
            f"attachment; filename=\"{name}\"; filename*=UTF-8''{name}")


def test_the_download_has_the_uploads_own_name_without_the_uuid(client):
    reply = upload(client, "../../Übersicht 2.po", CATALOG)
    url = reply.json()["translatedFileUrl"]
    assert re.fullmatch(rf"http://testserver/download_file/{UUID}\.Ubersicht_2\.po", url)
    disposition = client.get(url).headers["content-disposition"]
    assert disposition == ("attachment; filename=\"Ubersicht_2.po\"; filename*=UTF-8''"
                           + urllib.parse.quote("Übersicht 2.po", safe=""))


def test_only_names_the_server_made_are_served(client, tmp_path):
    url = upload(client, "a.po", CATALOG).json()["translatedFileUrl"]
    made = url.rsplit("/", 1)[1]
    secret = tmp_path / "secret.po"
    secret.write_bytes(b"SECRET-BYTES")
    store = client.app.state.server.files
    planted = f"{made[:-4]}ab.po"  # a name of the right shape, in the store's directory, not made by it
    (store.root / planted).write_bytes(b"PLANTED-BYTES")
    attempts = ["../secret.po", "..%2Fsecret.po", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", "%2Fetc%2Fpasswd",
                urllib.parse.quote(str(secret), safe=""), made.replace(made[:8], "00000000"), planted,
                made.split(".", 1)[1], made + "x", made.upper(), "." + made, f"{made}%00.po"]
    for name in attempts:
        reply = client.get(f"/download_file/{name}")
        assert reply.status_code in (400, 404), name
        assert b"SECRET-BYTES" not in reply.content and b"PLANTED-BYTES" not in reply.content
        assert set(reply.json()) == {"error"}
    assert client.get(f"/download_file/{made}").status_code == 200


def test_a_file_over_the_size_limit_is_413_and_leaves_nothing(client):
    before = stored_files(client)
    big = b"msgid \"x\"\nmsgstr \"\"\n" * 2600  # 52,000 bytes against a limit of 50,000
    reply = upload(client, "big.po", big)
    assert reply.status_code == 413
    assert reply.json()["error"] == "the file is over the limit of 50,000 bytes (52,000)"
    announced = client.post("/translate_file", content=b"#" * (50_000 + FORM_OVERHEAD + 1),
                            headers={"content-type": "multipart/form-data; boundary=b0undary"})
    assert announced.status_code == 413 and "the request announces" in announced.json()["error"]
    assert stored_files(client) == before


def test_the_size_limit_is_counted_as_the_body_arrives():
    """A body without Content-Length whose file part would never end: refused after the limit's worth
    of chunks."""
    received = 0
    head = b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'

    async def receive() -> dict:
        nonlocal received
        received += 1
        return {"type": "http.request", "body": head if received == 1 else b"#" * 10_000,
                "more_body": received < 1000}

    scope = {"type": "http", "method": "POST", "path": "/translate_file", "query_string": b"",
             "headers": [(b"content-type", b"multipart/form-data; boundary=b0undary")]}
    with pytest.raises(HTTPError) as refused:
        asyncio.run(read_upload(Request(scope, receive), 4000))
    assert refused.value.status == 413
    assert refused.value.message == "the file is over the limit of 4,000 bytes"
    assert received == (4000 + FORM_OVERHEAD) // 10_000 + 2  # the part's head, then the chunks


def test_bad_files_and_unknown_extensions_are_one_400_line_and_nothing_on_disk(client):
    before = stored_files(client)
    bad = [("broken.po", b'msgid "a\nmsgstr ""\n', "not a gettext line"),
           ("latin.po", CATALOG.replace(b"mat", b"m\xe4t"), "not UTF-8"),
           ("page.html", b"<p>the cat</b>\n", "end tag"),
           ("doc.xyz", b"data", f"not supported: .xyz (supported: {', '.join(supported_formats())})"),
           ("README", b"data", "file format not supported: no extension")]
    if "docx" in supported_formats().values():
        bad += [("report.docx", b"PK\x03\x04 not a zip at all", "report.docx"),
                ("report.docx", CATALOG, "report.docx")]
    for name, data, why in bad:
        reply = upload(client, name, data)
        assert reply.status_code == 400, (name, reply.text)
        assert why in reply.json()["error"] and "\n" not in reply.json()["error"]
    assert upload(client, "", CATALOG).json()["error"].startswith("Invalid request: ")
    assert upload(client, "a.po", CATALOG, target="fr").json() == {"error": "fr is not supported"}
    missing = client.post("/translate_file", files={"file": ("a.po", CATALOG)}, data={"target": "de"})
    assert missing.json() == {"error": "Invalid request: missing source parameter"}
    assert client.post("/translate_file", json={"q": "x"}).status_code == 400
    assert stored_files(client) == before


def test_a_translation_that_fails_midway_leaves_no_file(model):
    with TestClient(app_for(model)) as c:
        batcher = c.app.state.models.models[model.name].batcher
        submitted, submit = [], batcher.submit

        def full_on_the_second_call(*args, **kwargs):
            submitted.append(args[0])
            if len(submitted) == 2:
                raise QueueFull("10000 sentences are waiting (capacity 10000)")
            return submit(*args, **kwargs)

        batcher.submit = full_on_the_second_call
        reply = upload(c, "messages.po", CATALOG)  # the placeholder's retry is the second call
        assert len(submitted) == 2 and reply.status_code == 503 and "busy" in reply.json()["error"]
        assert stored_files(c) == []


def test_source_auto_identifies_the_documents_language(client):
    reply = upload(client, "page.html", PAGE, source="auto")
    assert reply.status_code == 200 and reply.json()["detectedLanguage"]["language"] == "en"
    german = b"<p>Die Datei konnte nicht gespeichert werden, weil die Festplatte voll ist.</p>\n"
    same = client.get(upload(client, "de.html", german, source="auto").json()["translatedFileUrl"])
    assert same.content == german  # already in the target language: comes back as it was


def test_disabled_file_translation_is_refused_as_libretranslate_does(model):
    with TestClient(app_for(model, files=False)) as c:
        assert upload(c, "a.po", CATALOG).status_code == 403
        assert c.get(f"/download_file/{'0' * 8}-0000-4000-8000-{'0' * 12}.a.po").status_code == 400
        settings = c.get("/frontend/settings").json()
        assert settings["filesTranslation"] is False and settings["supportedFilesFormat"] == []
        assert c.app.state.server.files is None


def test_frontend_settings_list_every_supported_extension(client):
    settings = client.get("/frontend/settings").json()
    assert settings["filesTranslation"] is True
    listed = settings["supportedFilesFormat"]
    assert {".po", ".pot", ".html", ".htm", ".xhtml"} <= set(listed)
    assert listed == [s for f in HANDLERS.values() for s in f.suffixes]  # every format, none left out


def test_a_format_module_that_does_not_load_stops_the_list(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken format is an error, not a format quietly missing from the server and its tests."""
    broken = dataclasses.replace(HANDLERS["srt"], module="mtkit.formats.no_such_module")
    monkeypatch.setitem(HANDLERS, "srt", broken)
    supported_formats.cache_clear()  # the list is made once per process
    try:
        with pytest.raises(ImportError):
            supported_formats()
    finally:
        monkeypatch.undo()
        supported_formats.cache_clear()


def test_an_api_key_pays_for_a_file_by_its_size(model):
    keys = KeyRing({"k": 3})
    with TestClient(app_for(model, keys, char_limit=100)) as c:
        assert upload(c, "a.po", CATALOG).status_code == 403
        assert len(CATALOG) // 100 == 1
        assert upload(c, "a.po", CATALOG, api_key="k").status_code == 200  # counts 1
        padded = CATALOG + b"#" * (200 - len(CATALOG)) + b"\n"  # 2 requests' worth
        assert upload(c, "b.po", padded, api_key="k").status_code == 200  # 1 + 2 = 3
        late = upload(c, "a.po", CATALOG, api_key="k")
        assert late.status_code == 429 and "Retry-After" in late.headers
    with TestClient(app_for(model, KeyRing({"k": 3}), char_limit=100)) as c:
        huge = upload(c, "c.po", CATALOG + b"#" * 400 + b"\n", api_key="k")  # 5 requests' worth
        assert huge.status_code == 429 and "counts as 5 requests" in huge.json()["error"]


def test_expired_files_are_swept_and_the_directory_goes_with_the_server(model):
    with TestClient(app_for(model, files_keep_minutes=0.5)) as c:
        store = c.app.state.server.files
        url = upload(c, "a.po", CATALOG).json()["translatedFileUrl"]
        assert len(stored_files(c)) == 1 and store.sweep() == 0
        assert c.get(url).status_code == 200
        assert store.sweep(time.monotonic() + 31) == 1
        assert stored_files(c) == [] and c.get(url).status_code == 404
        root = store.root
    assert not root.exists()


def test_the_store_serves_no_expired_file_and_sweeps_leftovers(tmp_path):
    store = FileStore(keep_seconds=0.05, root=tmp_path)
    try:
        name = store.save("x.po", "po", b"data")
        assert store.read(name)[1] == b"data"
        (store.root / ".partial-dead").write_bytes(b"")
        time.sleep(0.1)
        assert store.find(name) is None  # not served, though not swept yet
        assert store.sweep() == 1 and list(store.root.iterdir()) == []
    finally:
        store.close()
    assert not store.root.exists()
