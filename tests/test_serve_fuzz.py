"""`mtkit serve` takes whatever a client sends: seeded random requests to every endpoint — JSON of
random shapes, types and sizes, url-encoded and multipart forms, raw junk, odd content types and
methods; text of random Unicode with lone surrogates, controls, bidi marks, zero-width characters
and NUL — are each answered 2xx or 4xx (an error as one JSON line), never 500, and afterwards the
server translates a normal request exactly as before.

Bounded: 200 requests, a few words of text each or more than the server's limits (a few seconds);
the seed is fixed, so a failure replays (the failing request is in the assertion message)."""

from __future__ import annotations

import json
import random
import sys
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("py3langid")
from fastapi.testclient import TestClient  # noqa: E402

from mtkit.decode.translator import LoadOptions  # noqa: E402
from mtkit.serve import ServeOptions, build_app  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from serve_helpers import WORDS, offline, served_model  # noqa: E402

REQUESTS = 200
ODD = ["\ud800", "\udfff", "\udc80", "\ud83d", "\ud83d\ude00", "\x00", "\x07", "\x1b[31m", "\x7f", "\x85",
       "\u202e", "\u202d", "\u2066", "\u2069", "\u200e", "\u200f", "\u061c", "\u200b", "\u200c", "\u200d",
       "\ufeff", "\ufe0f", "\U000e0100", "\u00ad", "\u2028", "\u2029", "\ufffd", "\uffff", "\ufffe",
       "\u0301", "\U0001f600", "木", "ﷺ", "\U0010ffff", "\ue000", "\t", "\n", "\r\n", " ", '"', "\\", "%",
       "&", "=", "+", ";", "<b>", "{", "}", "[", "]", ".", "?", "!", "。", "Die", "Datei", "el", "archivo"]
LANGUAGES = ["en", "de", "es", "auto", "fr", "", "EN", "en-US", "\ud800", "de\n", "x" * 200]
FIELDS = {
    "/translate": {"q": "text", "source": "lang", "target": "lang", "format": ["text", "html", "xml", ""],
                   "alternatives": [0, 1, 3, 7, 8, -1, "2", "many"], "api_key": ["", "key"],
                   "route": ["auto", "direct", "pivot", "", 3, None]},
    "/detect": {"q": "text", "api_key": ["", "key"]},
    "/v1/translate": {"text": "text", "source": "lang", "target": "lang", "model": ["en-de", "es-de", "nope"],
                      "beam_size": [1, 4, 16, 17, 0, None], "nbest": [1, 2, 8, 9, 0],
                      "attention": [True, False, "yes", 1], "constraints": "constraints",
                      "api_key": ["", "key"], "route": ["auto", "direct", "pivot", "zero", None]},
}
PLAIN = [("GET", "/languages"), ("GET", "/frontend/settings"), ("GET", "/v1/models"), ("GET", "/health"),
         ("GET", "/metrics"), ("GET", "/"), ("GET", "/static/app.js"), ("GET", "/translate"),
         ("DELETE", "/detect"), ("PUT", "/v1/translate"), ("OPTIONS", "/translate"), ("GET", "/nowhere"),
         ("GET", "/static/%2e%2e/%2e%2e/etc/passwd"), ("POST", "/%ff%fe"), ("GET", "/docs"),
         ("POST", "/suggest"), ("POST", "/translate_file"), ("PATCH", "/detect")]


def text(rng: random.Random) -> str:
    """Words and odd characters: short (a random model's translation takes time), or now and then too
    long for the server's limits."""
    size = 600 if rng.random() < 0.03 else rng.choice([0, 1, 2, 3, 5, 8, 13, 21])
    return "".join(rng.choice(ODD) if rng.random() < 0.35 else rng.choice(WORDS) + " " for _ in range(size))


def value(rng: random.Random, depth: int = 0) -> Any:
    """A random JSON value of any type, nested at most three deep."""
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 1, 7, 2**31, 2**63, -(2**70), 10**30])
    if kind == 3:
        return rng.choice([0.5, -1e308, 1e308, 3.0, 1e-320])
    if kind == 4:
        return text(rng)
    if kind == 5:
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 6:
        return {text(rng)[:20]: value(rng, depth + 1) for _ in range(rng.randrange(4))}
    return [text(rng) for _ in range(rng.randrange(6))]


def field(rng: random.Random, kind: Any) -> Any:
    """A plausible value of a field most of the time, anything at all otherwise."""
    if rng.random() < 0.2:
        return value(rng)
    if kind == "text":
        return text(rng) if rng.random() < 0.7 else [text(rng) for _ in range(rng.randrange(5))]
    if kind == "lang":
        return rng.choice(LANGUAGES)
    if kind == "constraints":
        return rng.choice([[], [text(rng)[:12]], [["tea"], []], [[]], "tea"])
    return rng.choice(kind)


def well_formed(rng: random.Random, path: str) -> dict[str, Any]:
    """A request the server translates: only its text is odd."""
    texts = text(rng) if rng.random() < 0.7 else [text(rng) for _ in range(rng.randrange(4))]
    if path == "/detect":
        return {"q": texts}
    if path == "/translate":
        return {"q": texts, "source": rng.choice(["en", "es", "auto"]), "target": "de",
                "alternatives": rng.choice([0, 0, 2]), "route": rng.choice(["auto", "direct", "pivot"])}
    pair = {"model": "es-de"} if rng.random() < 0.3 else {"source": "en", "target": "de"}
    return {"text": texts, **pair, "beam_size": rng.choice([1, 2, 4]), "nbest": rng.choice([1, 2]),
            "attention": rng.random() < 0.3}


def request_fields(rng: random.Random, path: str) -> dict[str, Any]:
    """Half the time a well-formed request, else one of random fields of random values."""
    if rng.random() < 0.5:
        return well_formed(rng, path)
    fields = {name: field(rng, kind) for name, kind in FIELDS[path].items() if rng.random() < 0.8}
    if rng.random() < 0.2:
        fields[text(rng)[:30]] = value(rng)
    return fields


def form_pairs(fields: dict[str, Any]) -> list[tuple[str, str]]:
    """A form's fields: a list is a repeated field (as a repeated ``q``), anything else its text."""
    pairs = []
    for key, v in fields.items():
        for item in v if isinstance(v, list) else [v]:
            pairs.append((key, item if isinstance(item, str) else json.dumps(item)))
    return pairs


def multipart(pairs: list[tuple[str, str]], rng: random.Random) -> tuple[bytes, str]:
    boundary = f"mtkitfuzz{rng.randrange(10**9)}"
    body = b""
    for key, v in pairs:
        filename = '; filename="a.txt"' if rng.random() < 0.05 else ""
        head = f'--{boundary}\r\nContent-Disposition: form-data; name="{key}"{filename}\r\n\r\n'
        body += head.encode("utf-8", "surrogatepass") + v.encode("utf-8", "surrogatepass") + b"\r\n"
    body += f"--{boundary}--\r\n".encode()
    kind = rng.choice([f"multipart/form-data; boundary={boundary}"] * 8
                      + ["multipart/form-data", "multipart/form-data; boundary=other"])
    return body, kind


def encoded(rng: random.Random, fields: dict[str, Any]) -> tuple[bytes, str]:
    """The body and its content type: JSON (as a browser writes it, or raw UTF-8 with surrogates in
    it), a url-encoded or multipart form, or junk."""
    roll = rng.random()
    if roll < 0.55:
        kind = rng.choice(["application/json"] * 6 + ["", "application/json; charset=utf-8"])
        return json.dumps(fields).encode(), kind
    if roll < 0.65:
        raw = json.dumps(fields, ensure_ascii=False).encode("utf-8", "surrogatepass")
        return raw, "application/json"
    if roll < 0.8:
        body = urllib.parse.urlencode(form_pairs(fields), encoding="utf-8", errors="surrogatepass")
        return body.encode(), "application/x-www-form-urlencoded"
    if roll < 0.92:
        return multipart(form_pairs(fields), rng)
    junk = [json.dumps(fields).encode()[: rng.randrange(1, 40)], json.dumps(value(rng)).encode(),
            bytes(rng.randrange(256) for _ in range(rng.randrange(64))), b"[" * 5000, b"",
            b'{"q": "a", "q": 1}', b"\xff\xfe{}", b'{"q": NaN, "source": Infinity}']
    return rng.choice(junk), rng.choice(["application/json", "text/plain", "application/xml",
                                          "application/x-www-form-urlencoded", "multipart/form-data"])


def check(reply, what: str) -> None:
    """2xx or 4xx; an error is {"error": one line}; a 200 to a POST is JSON."""
    assert 200 <= reply.status_code < 500, f"{reply.status_code} {reply.text[:300]} for {what}"
    if reply.status_code >= 400:
        assert reply.headers["content-type"].startswith("application/json"), what
        body = reply.json()
        assert list(body) == ["error"] and isinstance(body["error"], str), what
        assert "\n" not in body["error"] and body["error"], what
    elif what.startswith("POST"):
        reply.json()


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fuzz")
    # a random model writes as long a translation as it may: a short limit keeps 200 requests quick
    short = {"max_len_a": 0.25, "max_len_b": 2}
    return {"en": served_model(root / "en-de", "de", seed=0, **short),
            "es": served_model(root / "es-de", "de", seed=1, source="es", **short),
            # with "route": "pivot", es→de goes es→en→de
            "es-en": served_model(root / "es-en", "en", seed=2, source="es", **short)}


def test_random_requests_to_every_endpoint_get_2xx_or_a_4xx_line(models):
    load = LoadOptions(device="cpu", threads=1, precision="fp32")
    app = build_app([models["en"], models["es"], models["es-en"]], load,
                    ServeOptions(char_limit=2000, max_body=4096, max_wait_ms=0))
    normal = {"q": "the cat sat on the mat", "source": "en", "target": "de"}
    rng = random.Random(29)
    with TestClient(app, raise_server_exceptions=False) as client:
        before = client.post("/translate", json=normal).json()
        for n in range(REQUESTS):
            if rng.random() < 0.1:
                method, path = rng.choice(PLAIN)
                body, kind = encoded(rng, request_fields(rng, "/translate"))
                reply = client.request(method, path, content=body, headers={"content-type": kind})
                check(reply, f"{method} {path} #{n}")
                continue
            path = rng.choice(list(FIELDS))
            body, kind = encoded(rng, request_fields(rng, path))
            reply = client.post(path, content=body, headers={"content-type": kind})
            check(reply, f"POST {path} #{n} {kind!r} {body[:300]!r}")
        after = client.post("/translate", json=normal).json()
        detected = client.post("/detect", json={"q": "Die Datei konnte nicht gespeichert werden."}).json()
    assert after == before == {"translatedText": offline(models["en"]).translate([normal["q"]])[0]}
    assert detected[0]["language"] == "de"  # what the text is, served or not
