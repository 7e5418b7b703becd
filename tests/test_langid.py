"""mtkit.langid: the language of a text among all the identifier knows or among a few; probabilities
renormalised over the few; nothing to go on gives 0; without py3langid one line says how to install it."""

from __future__ import annotations

import sys

import pytest

from mtkit.errors import ConfigError
from mtkit.langid import NEEDS, Guess, LanguageIdentifier

pytest.importorskip("py3langid")

SENTENCES = {"en": "The file could not be saved because the disk is full.",
             "de": "Die Datei konnte nicht gespeichert werden, weil die Festplatte voll ist.",
             "es": "No se pudo guardar el archivo porque el disco está lleno."}


@pytest.fixture(scope="module")
def identifier() -> LanguageIdentifier:
    return LanguageIdentifier()


def test_each_language_is_found_among_all_and_among_a_few(identifier):
    for lang, text in SENTENCES.items():
        assert identifier.best(text).language == lang
        among = identifier.rank(text, ["es", "de", "en"])
        assert [g.language for g in among][0] == lang and len(among) == 3
        assert sum(g.probability for g in among) == pytest.approx(1.0, abs=1e-5)
        assert among == sorted(among, key=lambda g: -g.probability)


def test_probabilities_among_a_few_are_the_full_ones_renormalised(identifier):
    text = "No se pudo guardar el archivo."
    full = {g.language: g.probability for g in identifier.rank(text)}
    among = identifier.rank(text, ["en", "es"])
    assert among[0].probability == pytest.approx(full["es"] / (full["en"] + full["es"]), rel=1e-5)


def test_languages_it_does_not_know_are_left_out_and_no_letters_tell_nothing(identifier):
    assert [g.language for g in identifier.rank(SENTENCES["de"], ["de", "xx"])] == ["de"]
    assert identifier.best(SENTENCES["de"], ["xx"]) is None
    for text in ["", "123 456", "!!! ...", "\u202e\u200b", "\ud800"]:
        assert {g.probability for g in identifier.rank(text, ["en", "de"])} == {0.0}


def test_without_py3langid_one_line_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(LanguageIdentifier, "_model", None)
    monkeypatch.setitem(sys.modules, "py3langid.langid", None)
    with pytest.raises(ConfigError) as caught:
        LanguageIdentifier()
    assert str(caught.value) == NEEDS and "pip install 'py3langid" in NEEDS


def test_for_a_server_the_answer_is_what_the_text_is_with_the_identifiers_own_probability(identifier):
    """Issue #41: German sent to a server of English alone is German, not the closest served language;
    a served language wins only where the identifier finds it likely (short Spanish, not Galician)."""
    for lang in ("de", "es"):
        ranked = identifier.for_server(SENTENCES[lang], ["en"])
        own = {g.language: g.probability for g in identifier.rank(SENTENCES[lang])}
        assert ranked[0].language == lang and ranked[0].probability == own[lang] < 1.0
    assert identifier.for_server("No se pudo guardar", ["en", "es"])[0].language == "es"
    assert identifier.for_server("No se pudo guardar", ["en", "es"], weight=1.0)[0].language != "es"
    assert identifier.for_server("123 !!!", ["en", "de", "xx"]) == [Guess("de", 0.0), Guess("en", 0.0)]
