"""The cleaning filters: why one parallel pair is not fit to train on, judged from the pair alone.

Each rule names a kind of noise that web-crawled corpora carry and a model learns from (Khayrallah and
Koehn 2018 measured untranslated copies as the most damaging): a copy of the source in place of its
translation, a side in another language or script, text decoded with the wrong charset, numbers, URLs
or placeholders that one side has and the other lacks (a misaligned or truncated pair), markup left over
from a web page, a target cut off before its end, lengths no translation has. Rules that need the
whole corpus (duplicates) and the model-based score live in `mtkit.data.cleaning`, which runs these.

`reject_reason` is a pure function of the pair and the settings (`CleanConfig`): the same pair gets
the same answer in any process, shard or order, which is what lets the cleaner run them on every core
and on many machines. The first rule a pair breaks is its reason, in the order of ``REASONS``
(cheapest and surest first).
"""

from __future__ import annotations

import difflib
import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any

from mtkit.config.clean_section import CleanConfig
from mtkit.languages import primary

#: every reason a pair can be dropped for, in the order the rules are tried (the first one counts);
#: the duplicate and score reasons are the cleaner's (`mtkit.data.cleaning`)
RULE_REASONS = ("empty", "length_ratio", "copy", "charset", "script", "language_src", "language_tgt",
                "markup", "placeholders", "urls", "numbers", "truncated")
REASONS = ("duplicate", "duplicate_source", *RULE_REASONS, "score")

#: the script a language is written in, for the script rule: the first word of the Unicode names of
#: its letters. Languages not listed are not checked (the rule says nothing rather than guess).
SCRIPTS: dict[str, tuple[str, ...]] = {
    **{lang: ("LATIN",) for lang in (
        "af", "ca", "cs", "cy", "da", "de", "en", "eo", "es", "et", "eu", "fi", "fr", "ga", "gl", "hr",
        "hu", "id", "is", "it", "lt", "lv", "ms", "mt", "nl", "no", "nb", "nn", "pl", "pt", "ro", "sk",
        "sl", "sq", "sv", "sw", "tl", "tr", "vi",
    )},
    **{lang: ("CYRILLIC",) for lang in ["be", "bg", "kk", "ky", "mk", "mn", "ru", "uk"]},
    "sr": ("CYRILLIC", "LATIN"), "el": ("GREEK",), "he": ("HEBREW",), "yi": ("HEBREW",),
    "ar": ("ARABIC",), "fa": ("ARABIC",), "ur": ("ARABIC",), "hi": ("DEVANAGARI",), "mr": ("DEVANAGARI",),
    "ne": ("DEVANAGARI",), "bn": ("BENGALI",), "ta": ("TAMIL",), "te": ("TELUGU",), "th": ("THAI",),
    "ka": ("GEORGIAN",), "hy": ("ARMENIAN",), "ko": ("HANGUL", "CJK"),
    "ja": ("HIRAGANA", "KATAKANA", "CJK"), "zh": ("CJK",),
}

# Text written as UTF-8 and read as Windows-1252 or Latin-1: "Ã¤" for "ä", "â€™" for "’", and U+FFFD
# where a decoder gave up. Each pattern is two or three characters no language writes side by side.
_MOJIBAKE = re.compile("\ufffd|Ã[\u0080-\u00bf\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u2013\u2014"
                       "\u2018-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122]|â€|Â[\u00a0-\u00bf]")
_PRINTF = re.compile(r"%(?:\([A-Za-z_]\w*\)|[1-9]\d*\$)?[-+#0]*\d*(?:\.\d+)?(?:l{1,2}|h|z|j|L)?"
                     r"[sdiuxXofeEgGcp]")
_BRACES = re.compile(r"\$\{[^{}\s]+\}|\$\([^()\s]+\)|\{\{?[A-Za-z_][\w.]*\}?\}|\{\d+\}")
_URL = re.compile(r"(?:https?|ftp)://[^\s<>\"']+|www\.[^\s<>\"']+", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_TAG = re.compile(r"</?([A-Za-z][\w:-]*)(?:\s[^<>]*)?/?>")
#: the HTML elements whose tags the markup rule counts (those a page's text carries along)
_HTML = ("a abbr b big blockquote body br center cite code dd div dl dt em font form h1 h2 h3 h4 h5 h6 head "
         "hr html i img input label li link meta nav ol option p pre q s script section select small span "
         "strike strong style sub sup table tbody td th title tr tt u ul")
HTML_ELEMENTS = frozenset(_HTML.split())
_ENTITY = re.compile(r"&(?:[A-Za-z]{2,8}|#\d{2,5}|#[xX][0-9A-Fa-f]{2,4});")
_DIGITS = re.compile(r"\d+")
_NOT_ALNUM = re.compile(r"[\W_]+")
_COMMON_WORD = re.compile(r"\b[^\W\d_A-Z]{3,}\b")  # three letters, none of them an ASCII capital
_TERMINAL = ".!?。！？"
_CLOSERS = "\"'”’»)]}>"


def normalized(text: str) -> str:
    """What two texts that are the "same" share: NFKC, case folded, letters and digits only, single
    spaces. Duplicates and copies are found on this form: "Open the file." and "open the file" are one."""
    return " ".join(_NOT_ALNUM.sub(" ", unicodedata.normalize("NFKC", text).casefold()).split())


@functools.lru_cache(maxsize=65536)
def _script(char: str) -> str:
    """The script of a letter: the first word of its Unicode name (LATIN, CYRILLIC, CJK …)."""
    name = unicodedata.name(char, "")
    return name.split(" ", 1)[0] if name else ""


def script_share(text: str, scripts: Sequence[str]) -> float | None:
    """The share of the letters of ``text`` written in one of ``scripts``; None for a text without letters."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return None
    return sum(_script(c) in scripts for c in letters) / len(letters)


def _multiset(pattern: re.Pattern[str], text: str) -> Counter[str]:
    return Counter(m.group(0) for m in pattern.finditer(text))


def _numbers(text: str) -> Counter[str]:
    """The digit runs of a text, leading zeros dropped: "1,000.50" and "1.000,50" give the same runs, as
    do "5" and "05"; what a translation changes (separators, order) is not counted as a difference."""
    text = unicodedata.normalize("NFKC", text)
    return Counter(m.group(0).lstrip("0") or "0" for m in _DIGITS.finditer(text))


def numbers_differ(src: str, tgt: str) -> bool:
    """The sides hold different numbers, bar one kind of difference translations make: a number of one
    digit on one side only, where the other side has no number (written out: "Part Three" / "Teil 3",
    "2-dimensional" / "zweidimensional"). Measured on Debian's en-de pairs: 0.6% of clean pairs flagged
    (1.0% counting every difference), 14% of misaligned ones (27%)."""
    a, b = _numbers(src), _numbers(tgt)
    only_a, only_b = a - b, b - a
    if not only_a and not only_b:
        return False
    return (bool(a) and bool(b)) or any(len(n) > 1 for n in only_a + only_b)


def _urls(text: str) -> Counter[str]:
    found = [m.group(0).rstrip(".,;:!?)]}'\"").lower() for m in _URL.finditer(text)]
    return Counter(found + [m.group(0).lower() for m in _EMAIL.finditer(text)])


def _markup(text: str) -> Counter[str]:
    """HTML tags by name and kind (opening or closing), and character entities left as text. Only
    HTML's element names count: ``<options>`` in a command's synopsis is text, translated as
    ``<Optionen>`` (0.6% of Debian's clean pairs were dropped when every tag-like word counted)."""
    tags = Counter(("/" if m.group(0).startswith("</") else "") + m.group(1).lower()
                   for m in _TAG.finditer(text) if m.group(1).lower() in HTML_ELEMENTS)
    return tags + Counter(m.group(0) for m in _ENTITY.finditer(text))


def _letters_and_digits(text: str) -> str:
    return " ".join(_NOT_ALNUM.sub(" ", unicodedata.normalize("NFKC", text)).split())


def is_copy(src: str, tgt: str, similarity: float) -> bool:
    """The target is the source, or nearly (``similarity`` of their letters and digits, case kept,
    difflib's ratio, at least this): an untranslated copy. Case counts since German capitalises nouns
    ("Layer A modulation" / "Layer A Modulation" is a translation); a source without a word of three
    lowercase letters (names, codes, "IEEE 1394 / FireWire") is never called copied."""
    a, b = _letters_and_digits(src), _letters_and_digits(tgt)
    if not _COMMON_WORD.search(a):
        return False
    if a == b:
        return True
    if similarity >= 1.0 or min(len(a), len(b)) < similarity * max(len(a), len(b)):
        return False  # the lengths alone rule it out: ratio <= 2·min/(len a + len b)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return (matcher.real_quick_ratio() >= similarity and matcher.quick_ratio() >= similarity
            and matcher.ratio() >= similarity)  # the first two: cheap upper bounds of the third


#: words no sentence of the language ends with (articles, conjunctions, prepositions that are never a
#: verb's particle): a target ending in one was cut off. Measured on Debian's German targets: 0.2% of
#: clean pairs end so (mostly lists cut by their own source). Languages not listed are not checked.
_ENDINGS = {
    "de": "der die das den dem des eine einer eines einem einen und oder sowie dass wenn von vom für zur zum "
          "im am beim bei",
    "en": "the a an and or of that which for with",
    "es": "el la los las un una unos unas y o de del al que con para por en",
    "fr": "le la les un une des et ou de du au aux que avec pour par",
    "it": "il lo la i gli le un una e o di del della che con per",
    "pt": "o a os as um uma e ou de do da dos das que com para por",
    "nl": "de het een en of van voor met dat",
}
OPEN_ENDINGS: dict[str, frozenset[str]] = {lang: frozenset(words.split()) for lang, words in _ENDINGS.items()}
_OPENERS = {"(": ")", "[": "]", "{": "}", "„": "“", "«": "»"}


def is_truncated(src: str, tgt: str, tgt_lang: str = "", same_script: bool = False,
                 ratio: float = 0.0) -> bool:
    """The target was cut off before its end, as crawled pages and database fields of fixed size leave
    text: the source ends a sentence (. ! ?) and the target, shorter than 90% of it, does not, or ends
    with a comma; the target opens a bracket or quote the source closes and never closes it; it ends
    with a word no sentence of ``tgt_lang`` ends with (``OPEN_ENDINGS``); or, between two languages of
    one script (``same_script``), it has less than ``ratio`` of the source's characters. Each part was
    kept for catching cut targets at under 0.15% of Debian's clean pairs (docs/cleaning.md); a missing
    full stop alone flags 0.6% (translators drop them)."""
    def ending(text: str) -> str:
        return text.rstrip().rstrip(_CLOSERS + "“«")[-1:]
    src_end, tgt_end = ending(src), ending(tgt)
    if not tgt_end:
        return False
    if src_end in _TERMINAL and tgt_end not in _TERMINAL + "…:;" and len(tgt) < 0.9 * len(src):
        return True
    if tgt_end == "," and src_end != ",":
        return True
    for opener, closer in _OPENERS.items():
        if tgt.count(opener) > tgt.count(closer) and src.count(opener) <= src.count(closer):
            return True
    words = tgt.split()
    if words and words[-1].lower() in OPEN_ENDINGS.get(primary(tgt_lang), ()):
        return True
    return same_script and ratio > 0 and len(tgt) + 5 < ratio * (len(src) + 5)


def length_ratio(src: str, tgt: str) -> float:
    """Longer over shorter side in characters, each plus 10, so that short strings ("OK" / "Ja") never
    count as uneven: what a translation rarely exceeds, a misaligned pair often does."""
    a, b = len(src.strip()) + 10, len(tgt.strip()) + 10
    return max(a, b) / min(a, b)


@functools.lru_cache(maxsize=8)
def _restricted_model(wanted: tuple[str, ...]) -> Any:
    """py3langid's model over the languages of ``wanted`` it knows, loaded once per process for each
    candidate list (a load takes about 0.6 s; corpora of one language pair share it)."""
    from mtkit.langid import load_model

    model = load_model()
    known = set(model.nb_classes)
    model.set_languages([lang for lang in wanted if lang in known])
    return model


class LanguageCheck:
    """Is a text in the language it should be? py3langid's probabilities over the candidate languages
    only (the corpus's two and ``clean.langid_candidates``): a text is refused when its language gets
    less than ``clean.langid_min_prob``. Among all 140-odd languages the identifier knows, short texts
    often go to a rare neighbour (German to Luxembourgish, Spanish to Galician); among the major
    languages alone such a text stays where it belongs, while a line in another major language is still
    caught (docs/cleaning.md has the measurements). The model is this object's own, restricted to the
    candidates (which also makes it faster), not the one `mtkit.langid` shares with the server."""

    def __init__(self, clean: CleanConfig, languages: Sequence[str]) -> None:
        wanted = [primary(lang) for lang in languages] + list(clean.langid_candidates)
        self.model = _restricted_model(tuple(dict.fromkeys(wanted)))
        self.among = list(self.model.nb_classes)
        self.min_prob = clean.langid_min_prob

    def knows(self, language: str) -> bool:
        return primary(language) in self.among

    def probability(self, text: str, language: str) -> float | None:
        """The probability that ``text`` is in ``language`` among the candidates; None for a text
        without letters, about which the identifier knows nothing."""
        if not any(c.isalpha() for c in text):
            return None
        wanted = primary(language)
        return next((p for lang, p in self.model.rank(text) if lang == wanted), 0.0)

    def wrong(self, text: str, language: str) -> bool:
        p = self.probability(text, language)
        return p is not None and p < self.min_prob


class PairRules:
    """The rules of one corpus (its languages and settings), applied to one pair at a time."""

    def __init__(self, clean: CleanConfig, src_lang: str, tgt_lang: str) -> None:
        self.clean = clean
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.scripts = (SCRIPTS.get(primary(src_lang)), SCRIPTS.get(primary(tgt_lang)))
        self.same_script = self.scripts[0] is not None and self.scripts[0] == self.scripts[1]
        self.langid: LanguageCheck | None = None
        if clean.langid:
            self.langid = LanguageCheck(clean, [src_lang, tgt_lang])
            self.langid_sides = tuple(self.langid.knows(lang) for lang in (src_lang, tgt_lang))

    def reject_reason(self, src: str, tgt: str) -> str | None:
        """The first rule of ``RULE_REASONS`` the pair breaks, or None to keep it."""
        c = self.clean
        if not src.strip() or not tgt.strip():
            return "empty"
        if c.length_ratio and length_ratio(src, tgt) > c.length_ratio:
            return "length_ratio"
        if c.copies and is_copy(src, tgt, c.copy_similarity):
            return "copy"
        if c.charset and (_MOJIBAKE.search(src) or _MOJIBAKE.search(tgt)):
            return "charset"
        if c.script:
            for text, scripts in zip((src, tgt), self.scripts, strict=True):
                share = script_share(text, scripts) if scripts else None
                if share is not None and share < c.script_min_share:
                    return "script"
        if self.langid is not None:
            sides = zip((src, tgt), (self.src_lang, self.tgt_lang), self.langid_sides,
                        ("language_src", "language_tgt"), strict=True)
            for text, lang, known, reason in sides:
                if known and self.langid.wrong(text, lang):
                    return reason
        if c.markup and _markup(src) != _markup(tgt):
            return "markup"
        if c.placeholders and (_multiset(_PRINTF, src) != _multiset(_PRINTF, tgt)
                               or _multiset(_BRACES, src) != _multiset(_BRACES, tgt)):
            return "placeholders"
        if c.urls and _urls(src) != _urls(tgt):
            return "urls"
        if c.numbers and numbers_differ(src, tgt):
            return "numbers"
        if c.truncation and is_truncated(src, tgt, self.tgt_lang, self.same_script, c.truncation_ratio):
            return "truncated"
        return None


__all__ = ["REASONS", "RULE_REASONS", "SCRIPTS", "LanguageCheck", "PairRules", "is_copy", "is_truncated",
           "OPEN_ENDINGS", "length_ratio", "normalized", "numbers_differ", "script_share"]
