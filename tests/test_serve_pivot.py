"""`mtkit serve` through a pivot language and with honest detection (issue #41): every pair reachable
through English is listed and answered by chaining the directions held (two bilingual models, a
multilingual model's own, one of each), equal to the API's pivot; the route is reported; a trained
direct pair always wins and a zero-shot one is used only when asked for; an unreachable pair is one
400 line; `/detect` and `source: auto` name what the text is (German and French on an en→de server
are never English), with the identifier's own probability."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from mtkit.decode.pivot import PivotTranslator  # noqa: E402
from mtkit.decode.translator import LoadOptions, Translator  # noqa: E402
from mtkit.serve import ServeOptions, build_app  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from serve_helpers import multilingual_model, served_model  # noqa: E402

EXACT = LoadOptions(device="cpu", threads=1, precision="fp32")
KW = {"device": "cpu", "threads": 1, "precision": "fp32"}
TEXTS = ["the house is small . we like green tea", "a cat sat on the mat", "where are you going ?"]
GERMAN = ["Die Datei konnte nicht gespeichert werden, weil die Festplatte voll ist.",
          "Am Anfang schuf Gott Himmel und Erde.",
          "Klicken Sie auf Speichern, um die Änderungen zu behalten."]
FRENCH = ["Le fichier n'a pas pu être enregistré car le disque est plein.",
          "Au commencement, Dieu créa les cieux et la terre.",
          "Cliquez sur Enregistrer pour garder les modifications."]
ENGLISH = "The file could not be saved because the disk is full."


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("serve-pivot")
    return {"es-en": served_model(root / "es-en", "en", seed=5, source="es"),
            "en-de": served_model(root / "en-de", "de", seed=6),
            "es-de": served_model(root / "es-de", "de", seed=7, source="es"),
            "fr-en": served_model(root / "fr-en", "en", seed=8, source="fr"),
            "multi": multilingual_model(root / "multi")}


def client_of(paths: list[Path], **options) -> TestClient:
    return TestClient(build_app(paths, EXACT, ServeOptions(**options)))


def test_two_bilingual_models_answer_the_pair_between_them_through_english(models):
    pivot = PivotTranslator.open(models["es-en"], then=models["en-de"], **KW)
    with client_of([models["es-en"], models["en-de"]]) as client:
        assert client.get("/languages").json() == [
            {"code": "en", "name": "English", "targets": ["de"]},
            {"code": "es", "name": "Spanish", "targets": ["de", "en"]}]
        reply = client.post("/translate", json={"q": TEXTS, "source": "es", "target": "de"})
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"translatedText": pivot.translate(TEXTS)}
        v1 = client.post("/v1/translate", json={"text": TEXTS, "source": "es", "target": "de"}).json()
        assert v1["route"] == {"kind": "pivot", "via": "en", "models": ["es-en", "en-de"]}
        assert [t["text"] for t in v1["translations"]] == pivot.translate(TEXTS)
        firsts = Translator(models["es-en"], **KW).translate(TEXTS)
        assert [t["pivot"]["text"] for t in v1["translations"]] == firsts
        for entry, tr in zip(v1["translations"], pivot.translate_hypotheses(TEXTS), strict=True):
            assert entry["confidence"] == pytest.approx(tr.confidence, abs=2e-4)  # the product of the legs
        direct = client.post("/v1/translate", json={"text": TEXTS[0], "source": "es", "target": "en"}).json()
        assert direct["route"] == {"kind": "direct", "via": None, "models": ["es-en"]}
        for body, message in (({"nbest": 2}, "nbest and attention do not apply through a pivot"),
                              ({"attention": True}, "nbest and attention do not apply through a pivot")):
            refused = client.post("/v1/translate", json={"text": "x", "source": "es", "target": "de",
                                                         **body})
            assert refused.status_code == 400 and message in refused.json()["error"]
        refused = client.post("/translate", json={"q": "x", "source": "es", "target": "de",
                                                  "alternatives": 2})
        assert refused.status_code == 400
        assert "alternatives do not apply through a pivot" in refused.json()["error"]
        # an unreachable pair (no model from German): one 400 line
        unreachable = client.post("/translate", json={"q": "x", "source": "de", "target": "es"})
        assert unreachable.status_code == 400
        assert unreachable.json() == {"error": "no model translates de → es (nor through en)"}
    with client_of([models["es-en"], models["en-de"]], pivot=None) as client:  # --pivot none
        assert client.get("/languages").json()[1] == {"code": "es", "name": "Spanish", "targets": ["en"]}
        reply = client.post("/translate", json={"q": "x", "source": "es", "target": "de"})
        assert reply.status_code == 400 and reply.json() == {"error": "no model translates es → de"}


def test_the_servers_glossary_constrains_the_last_leg_of_a_pivot_as_the_api_does(models, tmp_path):
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("cat\tstone window\n", encoding="utf-8")
    pivot = PivotTranslator.open(models["es-en"], then=models["en-de"], glossary=str(glossary), **KW)
    expected = pivot.translate(TEXTS)
    assert "stone window" in expected[1] and "cat" in TEXTS[1]
    with client_of([models["es-en"], models["en-de"]], glossary=glossary) as client:
        reply = client.post("/translate", json={"q": TEXTS, "source": "es", "target": "de"}).json()
        assert reply["translatedText"] == expected


def test_a_direct_pair_is_never_pivoted_and_a_pivot_is_taken_only_when_asked(models):
    with client_of([models["es-en"], models["en-de"], models["es-de"]]) as client:
        v1 = client.post("/v1/translate", json={"text": TEXTS, "source": "es", "target": "de"}).json()
        assert v1["route"] == {"kind": "direct", "via": None, "models": ["es-de"]}
        assert [t["text"] for t in v1["translations"]] == Translator(models["es-de"], **KW).translate(TEXTS)
        libre = client.post("/translate", json={"q": TEXTS, "source": "es", "target": "de"}).json()
        assert libre["translatedText"] == [t["text"] for t in v1["translations"]]
        forced = client.post("/v1/translate", json={"text": TEXTS, "source": "es", "target": "de",
                                                    "route": "pivot"}).json()
        assert forced["route"]["kind"] == "pivot"
        assert [t["text"] for t in forced["translations"]] == PivotTranslator.open(
            models["es-en"], then=models["en-de"], **KW).translate(TEXTS)


def test_a_multilingual_model_pivots_its_zero_shot_pairs_and_answers_them_directly_only_when_asked(models):
    multi = models["multi"]
    with client_of([multi, models["fr-en"]]) as client:
        languages = {x["code"]: x["targets"] for x in client.get("/languages").json()}
        assert languages == {"de": ["en", "es"], "en": ["de", "es"], "es": ["de", "en"],
                             "fr": ["de", "en", "es"]}
        v1 = client.post("/v1/translate", json={"text": TEXTS, "source": "de", "target": "es"}).json()
        assert v1["route"] == {"kind": "pivot", "via": "en", "models": ["multi-de-en", "multi-en-es"]}
        pivot = PivotTranslator.open(multi, pivot="en", tgt_lang="es", **KW)
        assert [t["text"] for t in v1["translations"]] == pivot.translate(TEXTS)
        zero = client.post("/v1/translate", json={"text": TEXTS, "source": "de", "target": "es",
                                                  "route": "direct"}).json()
        assert zero["route"] == {"kind": "zero-shot", "via": None, "models": ["multi-en-es"]}
        zero_shot = Translator(multi, tgt_lang="es", **KW).translate(TEXTS)  # the tag <2es> on German
        assert [t["text"] for t in zero["translations"]] == zero_shot
        # one of each: the bilingual fr→en, then the multilingual model's en→de
        mixed = client.post("/v1/translate", json={"text": TEXTS, "source": "fr", "target": "de"}).json()
        assert mixed["route"] == {"kind": "pivot", "via": "en", "models": ["fr-en", "multi-en-de"]}
        assert [t["text"] for t in mixed["translations"]] == PivotTranslator.open(
            models["fr-en"], then=multi, tgt_lang="de", **KW).translate(TEXTS)
        html = client.post("/translate", json={"q": "<p>a cat <b>sat</b></p>", "source": "de",
                                               "target": "es", "format": "html"})
        assert html.status_code == 200 and html.json()["translatedText"].startswith("<p>")
        refused = client.post("/v1/translate", json={"text": "x", "source": "fr", "target": "es",
                                                     "route": "direct"})
        assert refused.status_code == 400
        assert refused.json() == {"error": "no model translates fr → es directly"}


def test_german_and_french_are_never_english_on_an_en_de_server(models):
    pytest.importorskip("py3langid")
    from mtkit.langid import LanguageIdentifier

    own = LanguageIdentifier()
    with client_of([models["en-de"]]) as client:
        for text in GERMAN:
            found = client.post("/detect", json={"q": text}).json()
            assert found[0]["language"] == "de", (text, found)
            probability = {g.language: g.probability for g in own.rank(text)}["de"]
            assert found[0]["confidence"] == pytest.approx(100 * probability, abs=0.06)  # the identifier's
            reply = client.post("/translate", json={"q": text, "source": "auto", "target": "de"}).json()
            assert reply["translatedText"] == text and reply["detectedLanguage"]["language"] == "de"
        for text in FRENCH:
            assert client.post("/detect", json={"q": text}).json()[0]["language"] == "fr"
            reply = client.post("/translate", json={"q": text, "source": "auto", "target": "de"})
            assert reply.status_code == 400
            error = reply.json()["error"]
            assert re.fullmatch(r"detected fr \([01]\.\d\d\): no model translates fr → de \(nor through en\)",
                                error), error
        english = client.post("/translate", json={"q": ENGLISH, "source": "auto", "target": "de"}).json()
        assert english["detectedLanguage"]["language"] == "en"
        assert english["detectedLanguage"]["confidence"] < 100
        assert english["translatedText"] == Translator(models["en-de"], **KW).translate([ENGLISH])[0]
        v1 = client.post("/v1/translate", json={"text": GERMAN[0], "source": "auto", "target": "de"}).json()
        assert v1["route"]["kind"] == "unchanged" and v1["translations"][0]["text"] == GERMAN[0]
        assert v1["detectedLanguage"]["language"] == "de"


def test_source_auto_routes_each_text_from_its_language_directly_or_through_english(models):
    pytest.importorskip("py3langid")
    spanish = "No se pudo guardar el archivo porque el disco está lleno."
    with client_of([models["es-en"], models["en-de"]]) as client:
        reply = client.post("/translate", json={"q": [ENGLISH, spanish, GERMAN[0]], "source": "auto",
                                                "target": "de"}).json()
        assert [d["language"] for d in reply["detectedLanguage"]] == ["en", "es", "de"]
        pivot = PivotTranslator.open(models["es-en"], then=models["en-de"], **KW)
        assert reply["translatedText"] == [Translator(models["en-de"], **KW).translate([ENGLISH])[0],
                                           pivot.translate([spanish])[0], GERMAN[0]]
