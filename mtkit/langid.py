"""Language identification: which language a text is in, among all the identifier knows or among a
given few (the source languages a server translates from).

The identifier is py3langid (a naive Bayes classifier over byte n-grams, the model shipped inside
its wheel: nothing is downloaded, numpy is all it needs), an optional dependency of the ``serve``
extra. Its model is slow to load, so it is loaded once per process, on first use, and shared:
classifying reads it and never changes it, so threads may share it.

It is no part of decoding: the server asks it (``/detect``, ``source: auto``), and so can a recipe
(the off-target rate of a multilingual model); hence a base module beside the stages that use it.

What a server asks (`for_server`): which language the text *is*, among all the identifier knows, with
the languages the server knows weighted up. Among its few languages alone, German sent to an en→de
server would be named English and translated as English; among all unweighted, short Spanish is
often named Galician. The weight was chosen by measuring both failures (docs/results.md). ``rank``
among a few renormalises the identifier's probabilities over the few; ``for_server`` reports the
identifier's own.
"""

from __future__ import annotations

import threading
import unicodedata
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from mtkit.decode.segment import clean_line
from mtkit.errors import ConfigError

NEEDS = ("language detection needs py3langid, a dependency of mtkit: reinstall mtkit "
         "(or pip install 'py3langid>=0.4,<0.5')")


#: how much more likely a priori a server's own languages are than the others (`for_server`): chosen
#: on the Debian dev sentences (docs/results.md, language identification)
SERVED_WEIGHT = 3.0


@dataclass(frozen=True)
class Guess:
    """A language (ISO 639-1 code where one exists) and the probability, 0 to 1, that the text is in it."""

    language: str
    probability: float


def load_model() -> Any:
    """A new instance of py3langid's model (probabilities normalised), or one line naming the package.
    The server shares one (`LanguageIdentifier`); corpus cleaning restricts its own to a few languages."""
    try:
        from py3langid.langid import MODEL_FILE
        from py3langid.langid import LanguageIdentifier as Model
    except ImportError:
        raise ConfigError(NEEDS) from None
    return Model.from_model_file(MODEL_FILE, norm_probs=True)


class LanguageIdentifier:
    """py3langid's model, loaded once: ``rank`` and ``best`` over all its languages or a few."""

    _lock = threading.Lock()
    _model: Any = None

    def __init__(self) -> None:
        self.model = self._load()
        self.languages: frozenset[str] = frozenset(self.model.labels)

    @classmethod
    def _load(cls) -> Any:
        with cls._lock:
            if cls._model is None:
                cls._model = load_model()
            return cls._model

    def rank(self, text: str, among: Collection[str] | None = None) -> list[Guess]:
        """Every language (or each of ``among`` the identifier knows), most probable first. A text
        with no letter (digits, punctuation, nothing visible) tells nothing: every probability is 0."""
        cleaned = clean_line(text)
        known = None if among is None else [lang for lang in dict.fromkeys(among) if lang in self.languages]
        if not any(unicodedata.category(c).startswith("L") for c in cleaned):
            return [Guess(lang, 0.0) for lang in sorted(known if known is not None else self.languages)]
        scores = self.model.rank(cleaned)
        if known is not None:
            wanted = set(known)
            scores = [(lang, p) for lang, p in scores if lang in wanted]
        total = sum(p for _, p in scores)
        return [Guess(lang, p / total if total > 0 else 0.0) for lang, p in scores]

    def for_server(self, text: str, served: Collection[str], weight: float = SERVED_WEIGHT) -> list[Guess]:
        """Every language the identifier knows, the likeliest first for a server of ``served``: ranked
        by the identifier's probability, ``weight`` times for a served language (a prior: clients send
        mostly what a server offers, and short Spanish would otherwise go to Galician), each with the
        identifier's own probability. A text with no letter: the served languages it knows, each 0."""
        ranked = self.rank(text)
        if not any(g.probability for g in ranked):
            return [g for g in ranked if g.language in set(served)]
        wanted = set(served)
        return sorted(ranked, key=lambda g: -g.probability * (weight if g.language in wanted else 1.0))

    def best(self, text: str, among: Collection[str] | None = None) -> Guess | None:
        """The most probable language of ``text`` (among ``among``); None when the identifier knows
        none of ``among``."""
        ranked = self.rank(text, among)
        return ranked[0] if ranked else None


__all__ = ["NEEDS", "SERVED_WEIGHT", "Guess", "LanguageIdentifier", "load_model"]
