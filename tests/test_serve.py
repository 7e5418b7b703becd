"""`mtkit serve`: LibreTranslate's API and mtkit's, answers equal to offline translation, errors as one
JSON line, API keys, CORS, the bounded queue, batching across requests, a real server process that
answers hundreds of concurrent requests each with its own translation and finishes its requests on
SIGTERM. (The web page in a real browser: test_serve_browser.py.)"""

from __future__ import annotations

import concurrent.futures
import json
import random
import signal
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from mtkit.decode.formats_adapter import search_functions  # noqa: E402
from mtkit.decode.translation import Translation  # noqa: E402
from mtkit.decode.translator import LoadOptions  # noqa: E402
from mtkit.errors import DataError  # noqa: E402
from mtkit.formats.documents import translate_html_text  # noqa: E402
from mtkit.serve import ServeOptions, build_app  # noqa: E402
from mtkit.serve.batcher import Batcher, QueueFull, Settings  # noqa: E402
from mtkit.serve.security import KeyRing  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import run_mtkit  # noqa: E402
from near_ties import check_texts_same_or_near_tie  # noqa: E402
from serve_helpers import WORDS, ServerProcess, offline, served_model  # noqa: E402

EXACT = LoadOptions(device="cpu", threads=1, precision="fp32")


def sentence(rng: random.Random, words: int | None = None) -> str:
    return " ".join(rng.choice(WORDS[:-4]) for _ in range(words or rng.randint(2, 9)))


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("serve")
    return {"de": served_model(root / "en-de", "de", seed=0),
            "es": served_model(root / "en-es", "es", seed=1)}


@pytest.fixture(scope="module")
def client(models):
    app = build_app([models["de"], models["es"]], EXACT, ServeOptions(char_limit=2000, max_body=4096))
    with TestClient(app) as c:
        yield c


@pytest.fixture(scope="module")
def reference(models):
    return {lang: offline(path) for lang, path in models.items()}


# ------------------------------------------------------------------------------- LibreTranslate API
def test_languages_list_every_pair(client):
    assert client.get("/languages").json() == [{"code": "en", "name": "English", "targets": ["de", "es"]}]
    names = {m["name"]: (m["source"], m["target"]) for m in client.get("/v1/models").json()}
    assert sorted(names.values()) == [("en", "de"), ("en", "es")]


def test_translate_equals_offline_translation(client, reference):
    rng = random.Random(3)
    q = sentence(rng)
    for target in ("de", "es"):
        reply = client.post("/translate", json={"q": q, "source": "en", "target": target})
        assert reply.status_code == 200
        assert reply.json() == {"translatedText": reference[target].translate([q])[0]}
    many = [sentence(rng) for _ in range(5)]
    reply = client.post("/translate", json={"q": many, "source": "en", "target": "de"}).json()
    assert reply["translatedText"] == reference["de"].translate(many)


def test_a_form_request_as_libretranslate_clients_send_it(client, reference):
    reply = client.post("/translate", data={"q": "the house is small .", "source": "en", "target": "es"})
    assert reply.json()["translatedText"] == reference["es"].translate(["the house is small ."])[0]


def test_alternatives_differ_from_the_translation_and_each_other(client):
    reply = client.post("/translate", json={"q": "the cat sat on the mat", "source": "en", "target": "de",
                                            "alternatives": 3}).json()
    alternatives = reply["alternatives"]
    assert 1 <= len(alternatives) <= 3 and len(set(alternatives)) == len(alternatives)
    assert reply["translatedText"] not in alternatives


def test_source_auto_asks_the_identifier_even_with_one_source_language(client, reference):
    """What the text is, not which served source it is closest to (issue #41): its probability."""
    pytest.importorskip("py3langid")
    reply = client.post("/translate", json={"q": ENGLISH, "source": "auto", "target": "de"}).json()
    found = reply["detectedLanguage"]
    assert found["language"] == "en" and 50 < found["confidence"] < 100
    assert reply["translatedText"] == reference["de"].translate([ENGLISH])[0]


def test_format_html_translates_each_run_with_its_tags_as_offline_translation_does(client, reference):
    """LibreTranslate's format html: the page comes back whole, each run translated with its tags as
    `mtkit translate --format html` translates it (mtkit.formats), what is not text left alone."""
    pages = ['<p class="x">green tea <b>every</b> day</p>\n<pre>the house is small</pre>',
             "we like <a href='/x'>bread</a> and tea"]
    reply = client.post("/translate", json={"q": pages, "source": "en", "target": "de", "format": "html"})
    assert reply.status_code == 200, reply.text
    offline_pages = [translate_html_text(page, "q", "de", *search_functions(reference["de"]))
                     for page in pages]
    assert reply.json() == {"translatedText": offline_pages}
    assert "<pre>the house is small</pre>" in offline_pages[0] and 'class="x"' in offline_pages[0]


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"source": "en", "target": "de"}, 400, "Invalid request: missing q parameter"),
    ({"q": 5, "source": "en", "target": "de"}, 400, "Invalid request: q"),
    ({"q": "x", "source": "fr", "target": "de"}, 400, "fr is not supported"),
    ({"q": "x", "source": "en", "target": "it"}, 400, "it is not supported"),
    ({"q": "<p>a <b>x</i></p>", "source": "en", "target": "de", "format": "html"}, 400,
     "Invalid request: q:1: Unexpected end tag : i"),
    ({"q": "<p>x</p>", "source": "en", "target": "de", "format": "html", "alternatives": 1}, 400,
     "alternatives do not combine with format html"),
    ({"q": "x", "source": "en", "target": "de", "alternatives": -1}, 400, "Invalid request: alternatives"),
    ({"q": "x" * 2001, "source": "en", "target": "de"}, 400, "exceeds text limit (2000)"),
])
def test_bad_requests_get_one_line_and_libretranslates_status(client, body, status, message):
    reply = client.post("/translate", json=body)
    assert reply.status_code == status
    assert list(reply.json()) == ["error"] and message in reply.json()["error"]
    assert "\n" not in reply.json()["error"]


def test_malformed_bodies(client):
    reply = client.post("/translate", content=b'{"q": ', headers={"content-type": "application/json"})
    assert reply.status_code == 400 and "not JSON" in reply.json()["error"]
    reply = client.post("/translate", content=b"[1, 2]", headers={"content-type": "application/json"})
    assert reply.status_code == 400 and "JSON object" in reply.json()["error"]
    reply = client.post("/translate", content=b"q=x", headers={"content-type": "text/plain"})
    assert reply.status_code == 415
    big = json.dumps({"q": "x" * 5000, "source": "en", "target": "de"}).encode()
    reply = client.post("/translate", content=big, headers={"content-type": "application/json"})
    assert reply.status_code == 413 and "over the limit" in reply.json()["error"]
    assert client.get("/nowhere").json() == {"error": "no such endpoint: /nowhere"}
    assert client.get("/translate").status_code == 405


def test_invalid_utf8_and_control_characters_are_handled_as_translate_handles_them(client, reference):
    body = b'{"q": "the house \xff is\x07 small", "source": "en", "target": "de"}'
    reply = client.post("/translate", content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 200
    assert reply.json()["translatedText"] == reference["de"].translate(["the house \ufffd is\x07 small"])[0]


def post_json(client, path: str, body: dict):
    """A JSON body as a browser's JSON.stringify writes it: a lone surrogate as its escape, which
    httpx's own encoder (UTF-8, strict) cannot write."""
    return client.post(path, content=json.dumps(body).encode(), headers={"content-type": "application/json"})


def test_a_lone_surrogate_is_translated_as_the_replacement_character(client, reference):
    expected = reference["de"].translate(["c\ufffd"])[0]
    reply = post_json(client, "/translate", {"q": "c\ud800", "source": "en", "target": "de"})
    assert reply.status_code == 200 and reply.json() == {"translatedText": expected}
    reply = post_json(client, "/v1/translate", {"text": ["c\ud800"], "source": "en", "target": "de"})
    assert reply.status_code == 200 and reply.json()["translations"][0]["text"] == expected
    refused = post_json(client, "/translate", {"q": "x", "source": "\ud800", "target": "de"})
    assert refused.status_code == 400 and refused.json() == {"error": "\ufffd is not supported"}


def test_text_with_nothing_visible_gives_an_empty_translation(client):
    reply = post_json(client, "/translate", {"q": ["\u202e\u200b", "\ufe0f \u2066"], "source": "en",
                                             "target": "de"})
    assert reply.json() == {"translatedText": ["", ""]}
    (translation,) = post_json(client, "/v1/translate", {"text": "\u202e\u200b", "model": "en-de"}
                               ).json()["translations"]
    assert translation == {"text": "", "sentences": []}


def test_a_multipart_form_as_libretranslates_own_page_sends_it(client, reference):
    fields = {"q": "the house is small .", "source": "en", "target": "es", "format": "text", "api_key": ""}
    reply = client.post("/translate", files={k: (None, v) for k, v in fields.items()})
    assert reply.request.headers["content-type"].startswith("multipart/form-data; boundary=")
    assert reply.json() == {"translatedText": reference["es"].translate([fields["q"]])[0]}
    a_file = client.post("/translate", files={"q": ("a.txt", b"tea")}, data={"source": "en", "target": "de"})
    assert a_file.status_code == 400 and "files go to /translate_file" in a_file.json()["error"]


# ------------------------------------------------------------------- /detect and source auto
SPANISH = "No se pudo guardar el archivo porque el disco está lleno."
ENGLISH = "The file could not be saved because the disk is full."


@pytest.fixture(scope="module")
def multilingual(models, tmp_path_factory):
    """A server of en→de and es→de: `source: auto` into German chooses between them."""
    pytest.importorskip("py3langid")
    es_de = served_model(tmp_path_factory.mktemp("es-de"), "de", seed=2, source="es")
    app = build_app([models["de"], es_de], EXACT, ServeOptions())
    with TestClient(app) as c:
        yield c, offline(es_de)


def test_detect_answers_libretranslates_shape_with_the_identifiers_probabilities(multilingual):
    client, _ = multilingual
    for text, lang in ((ENGLISH, "en"), (SPANISH, "es")):
        found = client.post("/detect", json={"q": text}).json()
        assert found[0]["language"] == lang and found[0]["confidence"] > 90 and 1 < len(found) <= 5
        assert all(0 <= d["confidence"] <= 100 for d in found)
        assert sum(d["confidence"] for d in found) <= 100.3  # the identifier's own, over all its languages
        assert client.post("/detect", data={"q": text}).json() == found  # a form, as libretranslatepy sends
    german = client.post("/detect", json={"q": "Die Datei konnte nicht gespeichert werden."}).json()
    assert german[0]["language"] == "de"  # what the text is (the server translates into German)
    for body in ({}, {"q": ""}, {"q": []}):
        reply = client.post("/detect", json=body)
        assert reply.status_code == 400 and reply.json() == {"error": "Invalid request: missing q parameter"}


def test_source_auto_translates_each_text_with_the_model_of_its_language(multilingual, reference):
    client, es_de = multilingual
    reply = client.post("/translate", json={"q": [ENGLISH, SPANISH], "source": "auto", "target": "de"}).json()
    assert reply["translatedText"] == [reference["de"].translate([ENGLISH])[0], es_de.translate([SPANISH])[0]]
    assert [d["language"] for d in reply["detectedLanguage"]] == ["en", "es"]
    assert all(d["confidence"] > 90 for d in reply["detectedLanguage"])
    one = client.post("/translate", data={"q": SPANISH, "source": "auto", "target": "de"}).json()
    assert one["detectedLanguage"]["language"] == "es"
    assert one["translatedText"] == es_de.translate([SPANISH])[0]
    v1 = client.post("/v1/translate", json={"text": SPANISH, "source": "auto", "target": "de"})
    assert v1.status_code == 200 and v1.json()["detectedLanguage"]["language"] == "es"
    assert v1.json()["route"]["kind"] == "direct" and v1.json()["source"] == "es"
    assert v1.json()["translations"][0]["text"] == es_de.translate([SPANISH])[0]


def test_without_the_identifier_detection_is_one_line_naming_the_package(multilingual, client, monkeypatch):
    from mtkit.langid import LanguageIdentifier

    multi, _ = multilingual
    monkeypatch.setattr(multi.app.state.models, "_identifier", None)
    monkeypatch.setattr(LanguageIdentifier, "_model", None)
    monkeypatch.setitem(sys.modules, "py3langid.langid", None)
    reply = multi.post("/detect", json={"q": ENGLISH})
    assert reply.status_code == 501 and "pip install 'py3langid" in reply.json()["error"]
    # one source language served: the identifier is asked all the same (what is the text?)
    monkeypatch.setattr(client.app.state.models, "_identifier", None)
    reply = client.post("/translate", json={"q": SPANISH, "source": "auto", "target": "de"})
    assert reply.status_code == 501 and "pip install 'py3langid" in reply.json()["error"]


# ------------------------------------------------------------------------------------- mtkit's API
def test_v1_gives_sentences_confidence_and_attention(client, reference):
    paragraph = "The cat sat on the mat. Where are you going? We like green tea!"
    reply = client.post("/v1/translate", json={"text": paragraph, "source": "en", "target": "de",
                                               "attention": True})
    assert reply.status_code == 200
    data = reply.json()
    (translation,) = data["translations"]
    assert translation["text"] == reference["de"].translate([paragraph])[0]  # the paragraph comes back whole
    sentences = translation["sentences"]
    assert [s["source"] for s in sentences] == ["The cat sat on the mat.", "Where are you going?",
                                                "We like green tea!"]
    for s in sentences:
        assert 0 < s["confidence"] <= 1
        assert s["text"] == reference["de"].translate([s["source"]])[0]
        rows = s["attention"]
        assert len(rows) == len(s["target_tokens"]) + 1
        assert all(len(r) == len(s["source_tokens"]) for r in rows)
        assert all(abs(sum(r) - 1) < 0.01 for r in rows)


def test_v1_nbest_is_ranked_and_beam_is_applied(client):
    data = client.post("/v1/translate", json={"text": "the house is small", "model": "en-de", "nbest": 3,
                                              "beam_size": 4}).json()
    assert data["beam_size"] == 4
    nbest = data["translations"][0]["sentences"][0]["nbest"]
    scores = [n["score"] for n in nbest]
    assert len(nbest) == 3 and scores == sorted(scores, reverse=True)


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"text": "x"}, 422, "name the model, or the source and target languages"),
    ({"text": "x", "model": "nope"}, 400, "no model 'nope'"),
    ({"text": ["x", 3], "model": "en-de"}, 422, "text"),
    ({"text": "x", "model": "en-de", "beam_size": 0}, 422, "beam_size"),
    ({"text": "x", "model": "en-de", "beam_size": 99}, 422, "beam_size is at most 16"),
    ({"text": "x", "model": "en-de", "colour": "red"}, 422, "colour"),
])
def test_v1_bad_requests(client, body, status, message):
    reply = client.post("/v1/translate", json=body)
    assert reply.status_code == status and message in reply.json()["error"]


def test_metrics_and_page(client):
    client.post("/translate", json={"q": "tea", "source": "en", "target": "de"})
    text = client.get("/metrics").text
    assert 'mtkit_requests_total{endpoint="/translate",status="200"}' in text
    assert "mtkit_sentences_total" in text and "mtkit_queued_sentences" in text
    page = client.get("/")
    assert page.status_code == 200 and 'id="source"' in page.text and "/static/app.js" in page.text
    assert "function highlight" in client.get("/static/app.js").text


# ---------------------------------------------------------------------------------- keys and CORS
def test_api_keys_and_their_limits(models, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# team keys\nopen-key\nslow-key 2\n", encoding="utf-8")
    app = build_app([models["de"]], EXACT, ServeOptions(api_keys=keys))
    body = {"q": "tea", "source": "en", "target": "de"}
    with TestClient(app) as client:
        assert client.get("/frontend/settings").json()["keyRequired"] is True
        assert client.post("/translate", json=body).status_code == 403
        assert client.post("/detect", json={"q": "tea"}).status_code == 403
        wrong = client.post("/translate", json={**body, "api_key": "wrong"})
        assert wrong.json() == {"error": "Invalid API key"}
        for _ in range(3):
            assert client.post("/translate", json={**body, "api_key": "open-key"}).status_code == 200
        assert client.post("/v1/translate", json={"text": "tea", "model": "en-de"},
                           headers={"Authorization": "Bearer open-key"}).status_code == 200
        for _ in range(2):
            assert client.post("/translate", json=body, headers={"X-API-Key": "slow-key"}).status_code == 200
        limited = client.post("/translate", json={**body, "api_key": "slow-key"})
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1


@pytest.mark.parametrize(("text", "message"), [
    ("key 0\n", "keys.txt:1: expected a key and an optional positive number"),
    ("a\nb x\n", "keys.txt:2: expected a key"),
    ("a\na 3\n", "keys.txt:2: key 'a' is listed twice"),
    ("# nothing\n", "holds no API key"),
])
def test_a_bad_key_file_is_one_error_naming_the_line(tmp_path, text, message):
    (tmp_path / "keys.txt").write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        KeyRing.from_file(tmp_path / "keys.txt")


def test_cors_is_off_unless_an_origin_is_allowed(models, client):
    preflight = {"Origin": "https://example.org", "Access-Control-Request-Method": "POST"}
    assert "access-control-allow-origin" not in client.options("/translate", headers=preflight).headers
    app = build_app([models["de"]], EXACT, ServeOptions(cors_origins=["https://example.org"]))
    with TestClient(app) as allowed:
        reply = allowed.options("/translate", headers=preflight)
        assert reply.headers["access-control-allow-origin"] == "https://example.org"


# -------------------------------------------------------------------------------- the queue, batching
def _echo(sentences: list[str], settings: Settings, constraints=None) -> list[Translation]:
    return [Translation(0, s.upper()) for s in sentences]


def test_concurrent_jobs_share_batches_and_each_gets_its_own_answer():
    seen: list[int] = []

    def record(sentences, settings, constraints=None):
        seen.append(len(sentences))
        return _echo(sentences, settings)

    batcher = Batcher(record, max_wait=0.05, max_sentences=64)
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        futures = list(pool.map(lambda i: batcher.submit([f"s{i}a", f"s{i}b"], Settings(1)), range(64)))
        answers = [f.result(timeout=10) for f in futures]
    batcher.close()
    assert [[t.source for t in a] for a in answers] == [[f"S{i}A", f"S{i}B"] for i in range(64)]
    assert sum(seen) == 128 and len(seen) < 64 and max(seen) <= 64


def test_jobs_with_other_settings_never_share_a_batch():
    batches: list[set[Settings]] = []
    release = threading.Event()

    def record(sentences, settings, constraints=None):
        release.wait(5)
        batches.append({settings})
        return _echo(sentences, settings)

    batcher = Batcher(record, max_wait=0.05)
    futures = [batcher.submit(["x"], Settings(beam_size=1 + i % 2, nbest=1, attention=bool(i % 3)))
               for i in range(12)]
    release.set()
    assert all(len(f.result(timeout=10)) == 1 for f in futures)
    batcher.close()
    assert len(batches) >= 4  # (beam 1|2) × (attention or not): four kinds at least


def test_a_full_queue_refuses_at_once_and_the_server_says_503(models, monkeypatch):
    gate = threading.Event()
    batcher = Batcher(lambda s, st, c: (gate.wait(10), _echo(s, st))[1], max_wait=0, capacity=3)
    batcher.submit(["a"], Settings(1))  # taken by the worker, which waits at the gate
    time.sleep(0.1)
    batcher.submit(["b", "c", "d"], Settings(1))
    with pytest.raises(QueueFull):
        batcher.submit(["e"], Settings(1))
    gate.set()
    batcher.close()
    app = build_app([models["de"]], EXACT, ServeOptions(queue_sentences=1))
    with TestClient(app) as client:
        model = app.state.models.models["en-de"]
        monkeypatch.setattr(model.batcher, "submit", lambda *a: (_ for _ in ()).throw(QueueFull("full")))
        reply = client.post("/translate", json={"q": "tea", "source": "en", "target": "de"})
        assert reply.status_code == 503 and reply.headers["retry-after"] == "1"


def test_a_request_that_waits_too_long_gets_503(models, monkeypatch):
    app = build_app([models["de"]], EXACT, ServeOptions(timeout=0.2))
    with TestClient(app) as client:
        model = app.state.models.models["en-de"]
        real = model.batcher.translate
        monkeypatch.setattr(model.batcher, "translate", lambda s, st, c: (time.sleep(1), real(s, st, c))[1])
        reply = client.post("/translate", json={"q": "tea", "source": "en", "target": "de"})
        assert reply.status_code == 503 and "longer than 0.2 s" in reply.json()["error"]


# ------------------------------------------------------------------------------- a real server process
def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.loads(reply.read())


@pytest.mark.slow
def test_hundreds_of_concurrent_requests_each_get_their_own_translation(models, reference):
    # 800 requests, 64 at a time: as many in flight as with 2,000, at 40% of the cost
    rng = random.Random(11)
    texts = list(dict.fromkeys(sentence(rng) for _ in range(1100)))[:800]
    expected = reference["de"].translate(texts)
    with ServerProcess([models["de"]]) as server, concurrent.futures.ThreadPoolExecutor(64) as pool:
        url = f"{server.url}/translate"
        answers = list(pool.map(lambda t: _post(url, {"q": t, "source": "en", "target": "de"}), texts))
        metrics = urllib.request.urlopen(f"{server.url}/metrics").read().decode()
    # the server batches the requests as they come, offline translation by length: rounding may break
    # a near-tie differently (tests/near_ties.py), so a few lines may differ, each a near-tie
    check_texts_same_or_near_tie(reference["de"], texts, expected, [a["translatedText"] for a in answers],
                                 max_differing=len(texts) // 100)
    batches = float(next(row.split()[-1] for row in metrics.splitlines() if row.startswith("mtkit_batches{")))
    assert batches < len(texts) / 2, "requests were not batched together"


@pytest.mark.slow
def test_sigterm_finishes_the_requests_in_flight_then_exits(models, reference):
    rng = random.Random(5)
    texts = [sentence(rng, 12) for _ in range(300)]
    with ServerProcess([models["de"]], "--max-batch", "8") as server:
        result: dict = {}
        worker = threading.Thread(target=lambda: result.update(
            _post(f"{server.url}/translate", {"q": texts, "source": "en", "target": "de"})))
        worker.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # until the request is in and its sentences queued
            models = json.loads(urllib.request.urlopen(f"{server.url}/v1/models", timeout=10).read())
            if models[0]["queued_sentences"] + models[0]["translating_sentences"] > 0:
                break
            time.sleep(0.02)
        server.proc.send_signal(signal.SIGTERM)
        worker.join(120)
        code = server.proc.wait(60)
    check_texts_same_or_near_tie(reference["de"], texts, reference["de"].translate(texts),
                                 result["translatedText"], max_differing=3)  # batches of 8 here
    assert code == 0


def test_the_cli_refuses_what_it_cannot_serve(tmp_path):
    run = run_mtkit("serve", "-m", tmp_path / "missing")
    assert run.returncode != 0 and run.stderr.startswith("error: ") and len(run.stderr.splitlines()) == 1
    helped = run_mtkit("serve", "--help")
    assert "127.0.0.1" in helped.stdout and "--api-keys" in helped.stdout


# ---------------------------------------------------------------------------------------- glossaries
def test_a_served_glossary_and_per_request_constraints(models, tmp_path):
    terms = tmp_path / "terms.tsv"
    terms.write_text("house\tstone table\n", encoding="utf-8")
    app = build_app([models["de"]], EXACT, ServeOptions(glossary=terms))
    with TestClient(app) as client:
        reply = client.post("/translate", json={"q": "the house is small", "source": "en", "target": "de"})
        assert "stone table" in reply.json()["translatedText"]
        data = client.post("/v1/translate", json={"text": ["we like green tea", "a cat"], "model": "en-de",
                                                  "constraints": [["river light"], []]}).json()
        first, second = data["translations"]
        assert "river light" in first["text"]
        plain = client.post("/v1/translate", json={"text": "a cat", "model": "en-de"}).json()
        assert second["text"] == plain["translations"][0]["text"]
        bad = client.post("/v1/translate",
                          json={"text": ["a", "b"], "model": "en-de", "constraints": [["x"]]})
        assert bad.status_code == 422 and "one list of strings per text" in bad.json()["error"]
        unknown = client.post("/v1/translate", json={"text": "a", "model": "en-de", "constraints": ["木"]})
        assert unknown.status_code == 400 and "cannot encode" in unknown.json()["error"]
