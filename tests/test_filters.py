"""mtkit.data.filters: each pair rule on labelled pairs it must drop and pairs it must keep, each rule
switched off (or, for numbers and URLs, on) by its clean setting, and the order in which the rules name a
pair's reason.

Building the language check loads py3langid's model (about 0.6 s an instance), so the rules with it are
built once per module and the other tests go without it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from mtkit.config.clean_section import CleanConfig
from mtkit.data.filters import (
    OPEN_ENDINGS,
    REASONS,
    RULE_REASONS,
    SCRIPTS,
    LanguageCheck,
    PairRules,
    is_copy,
    is_truncated,
    length_ratio,
    normalized,
    numbers_differ,
    script_share,
)
from mtkit.languages import primary

DEFAULTS = CleanConfig()
ON = dataclasses.replace(DEFAULTS, urls=True, numbers=True)  # every rule on (numbers and URLs are off)
NO_LANGID = dataclasses.replace(ON, langid=False)

# the clean setting that switches each rule off, and the value that does
SWITCH = {"length_ratio": ("length_ratio", 0.0), "copy": ("copies", False), "charset": ("charset", False),
          "script": ("script", False), "language_src": ("langid", False), "language_tgt": ("langid", False),
          "markup": ("markup", False), "placeholders": ("placeholders", False), "urls": ("urls", False),
          "numbers": ("numbers", False), "truncated": ("truncation", False)}

# well-formed pairs every rule keeps
GOOD = [
    ("The weather is nice today.", "Das Wetter ist heute schön."),
    ("I would like a cup of coffee.", "Ich hätte gern eine Tasse Kaffee."),
    ("Where is the train station?", "Wo ist der Bahnhof?"),
    ("Save the file before closing the program.",
     "Speichern Sie die Datei, bevor Sie das Programm schließen."),
    ("The connection to the server was lost.", "Die Verbindung zum Server wurde unterbrochen."),
]


@pytest.fixture(scope="module")
def rules() -> PairRules:
    """en → de with every rule on, language identification included."""
    return PairRules(ON, "en", "de")


@pytest.fixture(scope="module")
def rules_for(rules: PairRules) -> Callable[[CleanConfig], PairRules]:
    """en → de rules of other settings, sharing the module's language check (built as PairRules builds
    it, but once) where the settings ask for one."""
    def build(clean: CleanConfig) -> PairRules:
        built = PairRules(dataclasses.replace(clean, langid=False), "en", "de")
        if clean.langid:
            assert (clean.langid_min_prob, clean.langid_candidates) == (ON.langid_min_prob,
                                                                        ON.langid_candidates)
            built.clean, built.langid, built.langid_sides = clean, rules.langid, rules.langid_sides
        return built
    return build


def rules_with(**changes: object) -> PairRules:
    """en → de rules without language identification (fast, and no rule of its own in the way)."""
    return PairRules(dataclasses.replace(NO_LANGID, **changes), "en", "de")


@pytest.mark.parametrize(("src", "tgt"), GOOD)
def test_clean_pairs_are_kept(rules: PairRules, src: str, tgt: str) -> None:
    assert rules.reject_reason(src, tgt) is None


def test_reasons_lists() -> None:
    assert REASONS[:2] == ("duplicate", "duplicate_source") and REASONS[-1] == "score"
    assert REASONS[2:-1] == RULE_REASONS
    assert set(SWITCH) == set(RULE_REASONS) - {"empty"}  # every rule but "empty" has a switch


# ------------------------------------------------------------------------------------------- empty
@pytest.mark.parametrize(("src", "tgt"), [("", "Hallo Welt."), ("Hello world.", ""), ("  \t ", "Hallo"),
                                          ("Hello", " ")])
def test_empty_side(rules: PairRules, src: str, tgt: str) -> None:
    assert rules.reject_reason(src, tgt) == "empty"


# ------------------------------------------------------------------------------------------- copies
def test_normalized_form() -> None:
    assert normalized("  Open the FILE... now! ") == "open the file now"
    assert normalized("Ｏｐｅｎ ﬁle") == "open file"  # NFKC: full-width letters, the fi ligature
    assert normalized("Straße") == normalized("STRASSE")  # case folded, not just lowered
    assert normalized("a\u00a0b\tc") == "a b c"


@pytest.mark.parametrize(("src", "tgt"), [
    ("Open the file.", "Open the file."),                                   # exact
    ("Open the file.", "Open the file!"),                                   # punctuation
    ("Open  the file (now)", "Open the file - now"),                        # spacing and punctuation
    ("The configuration file could not be opened.", "the configuration file could not be opened"),  # case
    ("The configuration file could not be opened.", "The configuration file could not be openned."),  # near
    ("Ｏｐｅｎ ｔｈｅ ﬁｌｅ.", "Open the file."),                                 # NFKC
])
def test_copies_are_dropped(rules: PairRules, src: str, tgt: str) -> None:
    assert is_copy(src, tgt, DEFAULTS.copy_similarity)
    assert rules.reject_reason(src, tgt) == "copy"


def test_near_copy_threshold() -> None:
    src, tgt = "The configuration file could not be opened.", "The configuration file could not be openned."
    assert is_copy(src, tgt, 0.95)
    assert not is_copy(src, tgt, 1.0)  # only texts of the same letters and digits
    assert is_copy(src, src.rstrip(".") + " !", 1.0)
    assert rules_with(copy_similarity=1.0).reject_reason(src, tgt) is None
    # a real translation is far from its source
    assert not is_copy(src, "Die Konfigurationsdatei konnte nicht geöffnet werden.", 0.95)
    assert not is_copy("Berlin is the capital of Germany.", "Berlin ist die Hauptstadt von Deutschland.",
                       0.95)
    # case counts: German capitalises nouns, and a short label differs from its copy by a letter
    assert not is_copy("Layer A modulation", "Layer A Modulation", 0.95)
    assert rules_with().reject_reason("Layer A modulation", "Layer A Modulation") is None


def test_a_pair_without_letters_is_no_copy(rules: PairRules) -> None:
    assert not is_copy("10 + 5 = 15", "10 + 5 = 15", 0.95)
    assert not is_copy("3.14", "3,14", 0.95)
    assert rules.reject_reason("10 + 5 = 15", "10 + 5 = 15") is None
    # nor one without a common word: names, codes
    assert not is_copy("IEEE 1394 / FireWire", "IEEE 1394 / FireWire", 0.95)
    assert rules.reject_reason("IEEE 1394 / FireWire", "IEEE 1394 / FireWire") is None
    assert is_copy("10 + 5 = 15 apples", "10 + 5 = 15 apples", 0.95)  # a word makes it text


# ------------------------------------------------------------------------------------------- charset
@pytest.mark.parametrize("tgt", [
    "Die GrÃ¶ÃŸe des Fensters",           # ö, ß read as Windows-1252
    "Das Fenster donâ€™t schließen",       # ’ read as Windows-1252
    "Die Gr\ufffde des Fensters",           # a decoder gave up
    "Preis:Â\u00a0zehn Euro",              # a no-break space read as Latin-1
])
def test_mojibake_is_dropped(rules: PairRules, tgt: str) -> None:
    assert rules.reject_reason("The size of the window", tgt) == "charset"
    # on the source side too
    assert rules_with().reject_reason(tgt.replace("Die", "The"), "Die Größe des Fensters") == "charset"


@pytest.mark.parametrize(("src", "tgt"), [
    ("The size of the window", "Die Größe des Fensters"),
    ("Green apples taste sour.", "Grüne Äpfel schmecken säuerlich."),
    ("It costs 5 €.", "Es kostet 5 €."),
    ("We met in a small café in Zürich.", "Wir trafen uns in einem kleinen Café in Zürich."),
])
def test_clean_umlauts_and_symbols_are_kept(rules: PairRules, src: str, tgt: str) -> None:
    assert rules.reject_reason(src, tgt) is None


# ------------------------------------------------------------------------------------------- script
def test_script_share() -> None:
    assert script_share("Der Winkel α ist klein.", ("LATIN",)) == pytest.approx(17 / 18)
    assert script_share("Размер окна", ("LATIN",)) == 0.0
    assert script_share("Размер окна", ("CYRILLIC",)) == 1.0
    assert script_share("12 + 5 = 17 !", ("LATIN",)) is None  # no letters: nothing to say
    assert script_share("東京ですか", SCRIPTS["ja"]) == 1.0
    assert primary("de-AT") == primary("de_AT") == primary("DE") == "de"


def test_a_side_in_another_script_is_dropped(rules: PairRules) -> None:
    assert rules.reject_reason("The size of the window", "Размер окна программы") == "script"
    assert rules.reject_reason("Размер окна программы", "Die Größe des Fensters") == "script"
    # German with one Greek letter is still German
    assert rules.reject_reason("The angle alpha is small.", "Der Winkel α ist klein.") is None
    # the share is a setting: demanding every letter in the script drops it
    assert rules_with(script_min_share=1.0).reject_reason("The angle alpha is small.",
                                                          "Der Winkel α ist klein.") == "script"
    # a region subtag does not hide the language's script
    assert PairRules(NO_LANGID, "en", "de-AT").reject_reason("The size", "Размер окна") == "script"


def test_a_language_without_a_script_entry_is_not_checked() -> None:
    assert "am" not in SCRIPTS and "tlh" not in SCRIPTS
    assert PairRules(NO_LANGID, "en", "de").reject_reason("Good morning", "Доброе утро") == "script"
    assert PairRules(NO_LANGID, "en", "am").reject_reason("Good morning", "Доброе утро") is None
    assert PairRules(NO_LANGID, "en", "tlh").reject_reason("Good morning", "Доброе утро") is None


# ------------------------------------------------------------------------------------------- language
def test_a_side_in_another_language_is_dropped(rules: PairRules) -> None:
    src = "The house is big and the garden is beautiful."
    assert rules.reject_reason(src, "Das Haus ist groß und der Garten ist schön.") is None
    assert rules.reject_reason(src, "La casa es grande y el jardín es muy bonito.") == "language_tgt"
    assert rules.reject_reason("La casa es grande y el jardín es muy bonito.",
                               "Das Haus ist groß und der Garten ist schön.") == "language_src"
    # a side in another language still written in the right script is the identifier's to catch
    assert rules_with().reject_reason(src, "La casa es grande y el jardín es muy bonito.") is None


def test_language_check_among_candidates(rules: PairRules) -> None:
    check = rules.langid
    assert check is not None
    assert {"en", "de", "es", "fr"} <= set(check.among)
    assert check.knows("de-AT") and not check.knows("tlh")
    p = check.probability("Das Haus ist groß und der Garten ist schön.", "de")
    assert p is not None and p > 0.9
    assert check.wrong("La casa es grande y el jardín es muy bonito.", "de")
    assert not check.wrong("Das Haus ist groß und der Garten ist schön.", "de-DE")
    # a threshold of 0 refuses nothing; a language the identifier does not know is not a candidate
    lenient = LanguageCheck(dataclasses.replace(DEFAULTS, langid_min_prob=0.0), ["en", "tlh"])
    assert not lenient.wrong("La casa es grande y el jardín es muy bonito.", "de")
    assert "tlh" not in lenient.among and not lenient.knows("tlh")


def test_a_text_without_letters_is_not_judged(rules: PairRules) -> None:
    assert rules.langid is not None
    assert rules.langid.probability("3.14 + 2.71 = 5.85", "de") is None
    assert not rules.langid.wrong("3.14 + 2.71 = 5.85", "de")
    assert rules.reject_reason("12:30 - 14:45", "12:30 - 14:45") is None


# ------------------------------------------------------------------------------------------- markup
@pytest.mark.parametrize(("src", "tgt"), [
    ("Click <b>here</b> to continue.", "Klicken Sie hier, um fortzufahren."),
    ("Click here to continue.", "Klicken Sie <i>hier</i>, um fortzufahren."),
    ("Click <b>here</b> to continue.", "Klicken Sie <b>hier, um fortzufahren."),  # a closing tag lost
    ("Hello&nbsp;world, my friend.", "Hallo Welt, mein Freund."),
    ("It&#39;s late.", "Es ist spät."),
])
def test_markup_on_one_side_is_dropped(rules: PairRules, src: str, tgt: str) -> None:
    assert rules.reject_reason(src, tgt) == "markup"


@pytest.mark.parametrize(("src", "tgt"), [
    ("Click <b>here</b> to continue.", "Klicken Sie <b>hier</b>, um fortzufahren."),
    ('Read <a href="en.html">the manual</a>.', 'Lesen Sie <a href="de.html">das Handbuch</a>.'),
    ("Fish &amp; chips are popular.", "Fish &amp; Chips sind beliebt."),
    ("Line one<br/>line two", "Zeile eins<br/>Zeile zwei"),
    ("Run the command with <options>.", "Führen Sie den Befehl mit <Optionen> aus."),  # not HTML
])
def test_the_same_markup_on_both_sides_is_kept(rules: PairRules, src: str, tgt: str) -> None:
    assert rules.reject_reason(src, tgt) is None


# ------------------------------------------------------------------------------------------- placeholders
@pytest.mark.parametrize(("src", "tgt", "reason"), [
    ("Cannot open %s file.", "Kann die Datei %d nicht öffnen.", "placeholders"),
    ("Hello {name}, welcome back.", "Hallo, willkommen zurück.", "placeholders"),
    ("Copy %(count)d files now?", "Jetzt %(anzahl)d Dateien kopieren?", "placeholders"),
    ("Set ${HOME} first.", "Zuerst HOME setzen.", "placeholders"),
    ("Cannot open %s file.", "Kann die Datei %s nicht öffnen.", None),
    ("Hello {name}, welcome back.", "Hallo {name}, willkommen zurück.", None),
    ("Move %1$s to %2$s?", "%2$s nach %1$s verschieben?", None),  # reordered is fine
    ("Copy %(count)d files now?", "Jetzt %(count)d Dateien kopieren?", None),
])
def test_placeholders(rules: PairRules, src: str, tgt: str, reason: str | None) -> None:
    assert rules.reject_reason(src, tgt) == reason


# ------------------------------------------------------------------------------------------- urls
@pytest.mark.parametrize(("src", "tgt", "reason"), [
    ("See https://example.com/docs for details.", "Siehe die Dokumentation für Details.", "urls"),
    ("See https://example.com/en for details.", "Siehe https://example.com/de für Details.", "urls"),
    ("Write to info@example.com for help.", "Schreiben Sie an hilfe@example.com für Hilfe.", "urls"),
    ("See https://example.com/docs for details.", "Siehe https://example.com/docs für Details.", None),
    ("Visit https://Example.com/docs.", "Besuchen Sie https://example.com/docs!", None),  # case, punctuation
    ("Write to info@example.com for help.", "Schreiben Sie an info@example.com für Hilfe.", None),
])
def test_urls(rules: PairRules, src: str, tgt: str, reason: str | None) -> None:
    assert rules.reject_reason(src, tgt) == reason
    assert not DEFAULTS.urls and rules_with(urls=False).reject_reason(src, tgt) is None  # off by default


# ------------------------------------------------------------------------------------------- numbers
@pytest.mark.parametrize(("src", "tgt", "differ"), [
    ("There are 25 files in the folder.", "Es gibt 26 Dateien im Ordner.", True),
    ("Page 12", "Seite", True),                          # two digits on one side only
    ("In 2019 the price rose.", "Der Preis stieg.", True),
    ("Rooms 3 and 4", "Zimmer 3", True),                 # both sides have numbers: any difference counts
    ("It costs 1,000.5 euros in total.", "Es kostet insgesamt 1.000,5 Euro.", False),  # separators
    ("Part Three", "Teil 3", False),                     # one digit, written out on the other side
    ("Part 3", "Teil drei", False),
    ("Version 5 of the program", "Version 05 des Programms", False),  # leading zero
    ("From 9 to 17 o'clock", "Von 9 bis 17 Uhr", False),
    ("Open the file", "Öffnen Sie die Datei", False),
])
def test_numbers(src: str, tgt: str, differ: bool) -> None:
    assert numbers_differ(src, tgt) is differ
    assert numbers_differ(tgt, src) is differ  # symmetric
    # without language identification: "Part 3" alone is not English enough for it
    assert rules_with().reject_reason(src, tgt) == ("numbers" if differ else None)
    assert not DEFAULTS.numbers and rules_with(numbers=False).reject_reason(src, tgt) is None  # default


# ------------------------------------------------------------------------------------------- truncation
@pytest.mark.parametrize(("src", "tgt", "truncated"), [
    ("The window will be closed.", "Das Fenster wird geschl", True),
    ("Is the window closed?", "Ist das Fenster", True),
    ('He said "Close the window now."', 'Er sagte "Schließe das Fen"', True),  # closers looked through
    ("The file was saved.", "Die Datei wurde gespeichert,", True),        # ends with a comma
    ("Open the settings (advanced)", "Öffnen Sie die Einstellungen (erweitert", True),  # left open
    ("The window will be closed", "Das Fenster wird geschlossen.", False),  # the other way round
    ("The window will be closed.", "Das Fenster wird geschlossen.", False),
    ("The window will be closed.", "Das Fenster wird geschlossen …", False),
    ("The window will be closed.", "Das Fenster wird jetzt geschlossen", False),  # long: a stop dropped
    ("Open the settings (advanced)", "Öffnen Sie die Einstellungen (erweitert)", False),
    ("Close the window", "Schließe das Fenster", False),
])
def test_truncation(rules: PairRules, src: str, tgt: str, truncated: bool) -> None:
    assert is_truncated(src, tgt) is truncated
    assert rules.reject_reason(src, tgt) == ("truncated" if truncated else None)


def test_truncation_by_last_word_and_by_length() -> None:
    # a German target that ends with an article or conjunction was cut off; the word is the language's
    src, cut = "Open the settings and the file", "Öffnen Sie die Einstellungen und die"
    assert "die" in OPEN_ENDINGS["de"]
    assert is_truncated(src, cut, "de") and not is_truncated(src, cut, "fr") and not is_truncated(src, cut)
    assert rules_with().reject_reason(src, cut) == "truncated"
    assert rules_with().reject_reason(src, "Öffnen Sie die Einstellungen und die Datei") is None
    assert PairRules(NO_LANGID, "en", "tlh").reject_reason(src, cut) is None  # a language not listed
    # between two languages of one script, a target far shorter than its source was cut off
    long = "Please close all windows before you start the installation"
    assert is_truncated(long, "Bitte schließen", "de", same_script=True, ratio=0.6)
    assert not is_truncated(long, "Bitte schließen", "de", same_script=False, ratio=0.6)
    assert rules_with().reject_reason(long, "Bitte schließen") == "truncated"
    assert rules_with(truncation_ratio=0.0).reject_reason(long, "Bitte schließen") is None
    assert PairRules(NO_LANGID, "en", "ru").reject_reason(long, "Закройте окна") is None  # two scripts
    assert rules_with().reject_reason(long, "Bitte schließen Sie alle Fenster vor der Installation") is None


# ------------------------------------------------------------------------------------------- length ratio
def test_length_ratio() -> None:
    assert length_ratio("OK", "Ja") == 1.0
    assert length_ratio("OK", "In Ordnung") == pytest.approx(20 / 12)  # plus 10 each side
    assert length_ratio("  OK  ", "OK") == 1.0  # surrounding space not counted
    assert length_ratio("a" * 10, "b" * 50) == length_ratio("b" * 50, "a" * 10) == 3.0
    long = "Das ist eine sehr lange Übersetzung eines kurzen Wortes, die nicht passt."
    assert rules_with().reject_reason("Welcome", long) == "length_ratio"
    assert rules_with().reject_reason(long, "Willkommen") == "length_ratio"
    assert rules_with(length_ratio=10.0).reject_reason("Welcome", long) is None
    assert rules_with().reject_reason("Welcome", "Willkommen") is None


# ------------------------------------------------------------------------------------------- switches
# one pair that breaks exactly one rule each (besides what the langid-free rules see)
BREAKS = {
    "length_ratio": ("Welcome", "Das ist eine sehr lange Übersetzung eines kurzen Wortes, die nicht passt."),
    "copy": ("Open the file.", "Open the file."),
    "charset": ("The size of the window", "Die GrÃ¶ÃŸe des Fensters"),
    "script": ("The size of the window", "Размер окна программы"),
    "language_src": ("La casa es grande y el jardín es muy bonito.",
                     "Das Haus ist groß und der Garten ist schön."),
    "language_tgt": ("The house is big and the garden is beautiful.",
                     "La casa es grande y el jardín es bonito."),
    "markup": ("Click <b>here</b> to continue.", "Klicken Sie hier, um fortzufahren."),
    "placeholders": ("Cannot open %s file.", "Kann die Datei %d nicht öffnen."),
    "urls": ("See https://example.com/docs for details.", "Siehe die Dokumentation für Details."),
    "numbers": ("There are 25 files in the folder.", "Es gibt 26 Dateien im Ordner."),
    "truncated": ("The window will be closed.", "Das Fenster wird geschl"),
}


@pytest.mark.parametrize("reason", list(BREAKS))
def test_each_switch_disables_its_rule(rules_for: Callable[[CleanConfig], PairRules], reason: str) -> None:
    src, tgt = BREAKS[reason]
    key, off = SWITCH[reason]
    # the other rules on, bar language identification, which has its say on a copy or a line in
    # Cyrillic too (the order test below covers that)
    base = ON if reason.startswith("language") else NO_LANGID
    assert getattr(base, key) != off
    assert rules_for(base).reject_reason(src, tgt) == reason
    assert rules_for(dataclasses.replace(base, **{key: off})).reject_reason(src, tgt) is None


def test_the_first_broken_rule_is_the_reason(rules_for: Callable[[CleanConfig], PairRules]) -> None:
    """A pair that breaks many rules: switching off the rule named each time names the next one, in
    the order of RULE_REASONS."""
    src = "Click <b>here</b> to open %s at https://example.com/a in 25 seconds."
    tgt = "Нажмите Ã¶ здесь, через 26 секунд откр"
    clean = ON
    named = []
    while (reason := rules_for(clean).reject_reason(src, tgt)) is not None:
        named.append(reason)
        key, off = SWITCH[reason]
        clean = dataclasses.replace(clean, **{key: off})
    assert named == ["charset", "script", "language_tgt", "markup", "placeholders", "urls", "numbers",
                     "truncated"]
    assert [RULE_REASONS.index(r) for r in named] == sorted(RULE_REASONS.index(r) for r in named)


def test_the_cheap_rules_come_first(rules: PairRules) -> None:
    long = "Das ist eine sehr lange Übersetzung eines kurzen Wortes, die nicht passt."
    assert rules.reject_reason("", long) == "empty"  # before length_ratio
    # a near copy also uneven in length with a strict ratio: length_ratio before copy
    src, tgt = "Open the file now, please.", "Open the file now, please!!!!!!"
    assert rules_with(length_ratio=1.1).reject_reason(src, tgt) == "length_ratio"
    assert rules_with().reject_reason(src, tgt) == "copy"
    # a copy of a source with mojibake, in the wrong script, with a tag: copy first
    copied = "Размер Ã¶ <b>окна</b> программы"
    assert rules.reject_reason(copied, copied) == "copy"
    # both sides in the wrong language: the source is named
    assert rules.reject_reason("La casa es grande y el jardín es muy bonito.",
                               "La maison est grande et le jardin est très beau.") == "language_src"
