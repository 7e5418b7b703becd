"""The ``clean`` section of the experiment config: which cleaning filters run and how strict they are.

`mtkit clean` runs them with these defaults (its options and ``--set clean.KEY=VALUE`` change them);
`mtkit prepare` runs the same filters on the training corpora when ``clean.enabled`` is true, so that
both give the same pairs. The filters are documented with their measurements in docs/cleaning.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from mtkit.config.data_sections import config_field as _f

#: the languages the language identifier chooses among besides the corpus's own two: the major
#: languages of the web. Among all 140-odd it knows, short texts go to rare neighbours (German to
#: Luxembourgish, Spanish to Galician) and clean pairs are lost; see LanguageCheck in mtkit.data.filters
MAJOR_LANGUAGES = [
    "en", "de", "fr", "es", "it", "pt", "nl", "ru", "pl", "ja", "zh", "ko", "ar", "tr", "sv", "da",
    "no", "fi", "cs", "hu", "ro", "el", "uk", "bg", "hr", "sk", "sl", "lt", "lv", "et", "ca", "id",
    "vi", "th", "he", "hi", "fa",
]


@dataclass
class CleanConfig:
    """Cleaning of noisy parallel corpora (`mtkit clean`, and `mtkit prepare` with enabled: true)."""

    enabled: bool = _f(False, "Run the cleaning filters on the training pairs in `mtkit prepare` (`mtkit "
                       "clean` always runs them); the kept pairs are what `mtkit clean` writes.")
    dedup: bool = _f(True, "Drop a pair whose normalised source and target (NFKC, case folded, letters and "
                     "digits only) equal an earlier pair's: exact and near duplicates.")
    dedup_source: bool = _f(False, "Also drop a pair whose normalised source equals an earlier pair's, "
                            "whatever its target: one translation per source (boilerplate such as "
                            "\"Home\" with many targets). Off: sources with several good translations are "
                            "common in real corpora.")
    length_ratio: float = _f(3.0, "Drop a pair whose longer side has more than this many times the "
                             "characters of the shorter (each counted plus 10, so that short strings are "
                             "never uneven); 0 disables.", 0)
    copies: bool = _f(True, "Drop a pair whose target is a copy or near copy of its source (untranslated).")
    copy_similarity: float = _f(0.95, "How alike (difflib ratio of the normalised texts, 0-1) a target must "
                                "be to its source to count as a copy.", 0.5, 1.0, when={"copies": (True,)})
    charset: bool = _f(True, "Drop a pair with mojibake (UTF-8 read as Windows-1252: \"Ã¤\", \"â€™\") or "
                       "the replacement character U+FFFD on either side.")
    script: bool = _f(True, "Drop a pair whose side has fewer than script_min_share of its letters in "
                      "its language's script (Cyrillic in German, Latin in Greek); languages without a "
                      "known script are not checked.")
    script_min_share: float = _f(0.5, "The share of a side's letters that must be in its language's "
                                 "script.", 0.0, 1.0, when={"script": (True,)})
    langid: bool = _f(True, "Drop a pair whose source or target is identified (py3langid) as being in "
                      "another language than the corpus says.")
    langid_min_prob: float = _f(0.02, "Drop a side when the probability of its language, among the "
                                "corpus's two and langid_candidates, is below this.", 0.0, 1.0,
                                when={"langid": (True,)})
    langid_candidates: list[str] = _f(MAJOR_LANGUAGES, "The languages the identifier chooses among "
                                      "besides the corpus's own two (ISO 639-1 codes).",
                                      when={"langid": (True,)})
    markup: bool = _f(True, "Drop a pair whose sides hold different HTML tags or character entities "
                      "(&nbsp;, &#39;): markup left over from a web page.")
    placeholders: bool = _f(True, "Drop a pair whose sides hold different placeholders (%s, %1$d, "
                            "%(name)s, {name}, ${NAME}, $(name)).")
    urls: bool = _f(False, "Drop a pair whose sides hold different URLs or e-mail addresses. Off: "
                    "translations localise URLs (example.org / beispiel.org); on Debian's pairs it "
                    "dropped 4 clean pairs for each noisy one.")
    numbers: bool = _f(False, "Drop a pair whose sides hold different numbers (digit runs, whatever the "
                       "separators: 1,000.5 = 1.000,5), except a one-digit number on one side of a pair "
                       "whose other side has none (a number written out). Off: it catches misaligned "
                       "pairs (13% of them) at 0.45% of clean pairs; the model-based score does better.")
    truncation: bool = _f(True, "Drop a pair whose target was cut off: the source ends a sentence (. ! ?) "
                          "and the target, under 90% of its length, does not, or ends with a comma; the "
                          "target leaves a bracket or quote open that the source closes, or ends with a "
                          "word no sentence ends with (an article or conjunction: de, en, es, fr, it, pt, "
                          "nl), or is too short (truncation_ratio).")
    truncation_ratio: float = _f(0.6, "Between two languages of one script: drop a pair whose target has "
                                 "less than this share of the source's characters (each plus 5); 0 "
                                 "disables.", 0.0, 1.0, when={"truncation": (True,)})
    examples: int = _f(5, "Dropped pairs kept as examples per reason in the report beside the output.", 0)
    workers: int = _f(0, "Processes that run the filters (0: one per core).", 0)
    score_min: float = _f(0.0, "With `mtkit clean --score-models`: drop the pairs whose dual conditional "
                          "cross-entropy adequacy (0-1, higher is better) is below this.", 0.0, 1.0)
    score_keep: float = _f(0.97, "With `mtkit clean --score-models` and score_min 0: keep this fraction "
                           "of the pairs the rules kept, the best scored (in the noise benchmark, giving "
                           "up the worst 1-2% of clean pairs caught 77-83% of misaligned ones together "
                           "with the rules; docs/cleaning.md).", 0.0, 1.0)


__all__ = ["MAJOR_LANGUAGES", "CleanConfig"]
