"""The models a server holds: one `Translator` and one `Batcher` per model directory (trained or
exported), found by language pair or by name.

A request's text is cut into sentences here (`mtkit.decode.segment`, the same rules as `mtkit translate`)
and each sentence is one line for the Translator, so the answer can say how sure the model is of
each sentence and show its attention; the sentences of a paragraph are joined with a space, which is
what `mtkit translate` writes for the same paragraph.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mtkit.decode.engine import stored_languages
from mtkit.decode.segment import clean_line, split_sentences
from mtkit.decode.translation import Translation
from mtkit.decode.translator import LoadOptions, SearchOptions, Translator
from mtkit.errors import ConfigError
from mtkit.langid import Guess, LanguageIdentifier
from mtkit.serve.batcher import Batcher, Settings

#: names of the language codes a model's meta.json may carry (others are shown as their code)
LANGUAGE_NAMES = {
    "ar": "Arabic", "ca": "Catalan", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek",
    "en": "English", "es": "Spanish", "et": "Estonian", "eu": "Basque", "fi": "Finnish", "fr": "French",
    "ga": "Irish", "gl": "Galician", "he": "Hebrew", "hi": "Hindi", "hu": "Hungarian", "it": "Italian",
    "ja": "Japanese", "ko": "Korean", "lt": "Lithuanian", "lv": "Latvian", "nb": "Norwegian Bokmål",
    "nl": "Dutch", "pl": "Polish", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sk": "Slovak",
    "sl": "Slovenian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian", "zh": "Chinese",
}


@dataclass
class ServedModel:
    name: str
    path: Path
    translator: Translator
    batcher: Batcher
    source: str
    target: str
    engine: str
    default_beam: int
    info: dict[str, Any] = field(default_factory=dict)
    multilingual: bool = False  # one direction of a model that knows several
    sources: tuple[str, ...] = ()  # a multilingual model's source languages (its zero-shot directions)


@dataclass
class Route:
    """How a pair is answered: one served direction (``direct``: trained; ``zero-shot``: a multilingual
    model's untrained direction, only when asked for), or two chained through ``via`` (``pivot``)."""

    source: str
    target: str
    legs: tuple[ServedModel, ...]
    kind: str  # "direct", "zero-shot" or "pivot"

    @property
    def via(self) -> str | None:
        return self.legs[0].target if len(self.legs) == 2 else None

    def report(self) -> dict[str, Any]:
        """What mtkit's API answers of the route: its kind, the pivot language, the models in order."""
        return {"kind": self.kind, "via": self.via, "models": [m.name for m in self.legs]}


class ModelSet:
    """The server's models, keyed by name (the directory's name) and by (source, target)."""

    def __init__(self, paths: list[Path], load: LoadOptions, max_wait: float, max_sentences: int,
                 capacity: int, max_tokens: int = 0, glossary: Path | None = None,
                 glossary_ignore_case: bool = False, pivot: str | None = "en"):
        if not paths:
            raise ConfigError("mtkit serve needs at least one model (-m DIR)")
        self.pivot = pivot or None  # the language pairs without a model are chained through (None: none)
        self.models: dict[str, ServedModel] = {}
        self.by_pair: dict[tuple[str, str], ServedModel] = {}
        for path in paths:
            stored = stored_languages(path)
            pairs = [tuple(p) for p in stored.get("pairs", [])]  # a multilingual model's
            first = Translator(path, load, SearchOptions(max_tokens=max_tokens, glossary=glossary,
                                                         glossary_ignore_case=glossary_ignore_case,
                                                         tgt_lang=pairs[0][1] if pairs else ""))
            base = self._unique_name(Path(path).resolve().name or "model")
            for n, (src, tgt) in enumerate(pairs or [(first.meta.src_lang, first.meta.tgt_lang)]):
                # each direction of a multilingual model: the same weights, its own tag, batcher and name
                translator = first if n == 0 else first.for_target(tgt)
                self._add(ServedModel(f"{base}-{src}-{tgt}" if pairs else base, Path(path), translator,
                                      None, src, tgt, translator.engine,  # type: ignore[arg-type]
                                      translator.decoding.beam_size, multilingual=bool(pairs),
                                      sources=tuple(stored.get("src", []))),
                          max_wait, max_sentences, capacity)
        self._identifier: LanguageIdentifier | None = None  # loaded when a language is first identified

    def _add(self, served: ServedModel, max_wait: float, max_sentences: int, capacity: int) -> None:
        """Serve one direction. Where two models cover a pair, a bilingual model answers it rather than
        a multilingual one, and of two multilingual ones the first given; the other stays reachable
        by name. Two bilingual models of one pair are refused."""
        pair = (served.source, served.target)
        held = self.by_pair.get(pair)
        if held is not None and not held.multilingual and not served.multilingual:
            raise ConfigError(f"-m {served.path}: {held.path} serves {pair[0]}→{pair[1]} already (one "
                              "bilingual model per language pair)")
        served.batcher = Batcher(lambda s, st, c, m=served: self._translate(m, s, st, c), max_wait,
                                 max_sentences, capacity, served.name)
        self.models[served.name] = served
        if held is None or (held.multilingual and not served.multilingual):
            self.by_pair[pair] = served

    def _unique_name(self, name: str) -> str:
        candidate, i = name, 2
        while candidate in self.models:
            candidate, i = f"{name}-{i}", i + 1
        return candidate

    @staticmethod
    def _translate(model: ServedModel, sentences: list[str], settings: Settings,
                   constraints: list[list[str]] | None = None) -> list[Translation]:
        """Run in the model's worker thread: the settings apply to this batch alone."""
        tr = model.translator
        tr.nbest = settings.nbest
        tr.decoding.beam_size = max(settings.beam_size, settings.nbest)
        glossary = tr.glossary
        if not settings.glossary:  # this worker alone uses this translator: set back below
            tr.glossary = None
        try:
            return tr.translate_chunk(sentences, need_attention=settings.attention, constraints=constraints)
        finally:
            tr.glossary = glossary

    def languages(self) -> list[dict[str, Any]]:
        """LibreTranslate's /languages: every source language with the targets it reaches, directly
        or through the pivot language."""
        return [{"code": src, "name": LANGUAGE_NAMES.get(src, src), "targets": self.targets_of(src)}
                for src in self.source_languages()]

    def source_languages(self) -> list[str]:
        """The languages the models translate from."""
        return sorted({s for s, _ in self.by_pair})

    def known_languages(self) -> list[str]:
        """Every language some model translates from or into."""
        return sorted({lang for pair in self.by_pair for lang in pair})

    def targets_of(self, source: str) -> list[str]:
        """The languages ``source`` reaches: by a trained direction, or two chained through the pivot."""
        direct = {t for s, t in self.by_pair if s == source}
        via = {t for s, t in self.by_pair if s == self.pivot} if self.pivot in direct else set()
        return sorted((direct | via) - {source})

    def route(self, source: str, target: str, way: str = "auto") -> Route:
        """How ``source`` → ``target`` is answered. ``way`` "auto": a trained direction, else two
        through the pivot language; "direct": a trained direction, else a multilingual model's
        zero-shot one (measured worse than pivoting: docs/results.md, so only on request); "pivot":
        through the pivot language even where a direct model exists. LookupError (one line) where
        there is no such route."""
        known = self.known_languages()
        for lang in (source, target):
            if lang not in known:
                raise LookupError(f"{lang} is not supported")
        direct = self.by_pair.get((source, target))
        if direct is not None and way != "pivot":
            return Route(source, target, (direct,), "direct")
        if way == "direct":
            zero = next((m for m in self.models.values() if m.multilingual and m.target == target
                         and source in m.sources and source != target), None)
            if zero is None:
                raise LookupError(f"no model translates {source} → {target} directly")
            return Route(source, target, (zero,), "zero-shot")
        p = self.pivot
        first, second = self.by_pair.get((source, p or "")), self.by_pair.get((p or "", target))
        if first is not None and second is not None:
            return Route(source, target, (first, second), "pivot")
        if way == "pivot":
            raise LookupError(f"no route from {source} to {target} through "
                              f"{p if p else 'a pivot language (the server has none: --pivot none)'}")
        raise LookupError(self.no_route(source, target))

    def no_route(self, source: str, target: str) -> str:
        """The one line saying that nothing served translates ``source`` into ``target``."""
        through = f" (nor through {self.pivot})" if self.pivot else ""
        return f"no model translates {source} → {target}{through}"

    def identify(self, text: str) -> list[Guess]:
        """The languages the text may be in, likeliest first for this server (all the identifier
        knows, the languages served weighted up: `LanguageIdentifier.for_server`), each with the
        identifier's own probability. ConfigError when py3langid is missing."""
        if self._identifier is None:
            self._identifier = LanguageIdentifier()
        return self._identifier.for_server(text, self.known_languages())

    def route_detected(self, ranked: list[Guess], target: str, way: str = "auto"
                       ) -> tuple[Guess, Route | None]:
        """``source: auto``: the detected language (the first of ``ranked``, `identify`) and its route
        to ``target``; None where the text is in ``target`` already, or has no letter (the same in
        every language: confidence 0), and is answered unchanged. LookupError naming the detected
        language and its probability where nothing translates it into ``target``."""
        if target not in self.known_languages():
            raise LookupError(f"{target} is not supported")
        if not ranked or not any(g.probability for g in ranked):
            return Guess(target, 0.0), None
        guess = ranked[0]
        if guess.language == target:
            return guess, None
        try:
            if guess.language not in self.known_languages():
                raise LookupError(self.no_route(guess.language, target))
            return guess, self.route(guess.language, target, way)
        except LookupError as exc:
            raise LookupError(f"detected {guess.language} ({guess.probability:.2f}): {exc}") from None

    def find(self, source: str, target: str) -> ServedModel:
        """The model of the trained direction source → target (LookupError: one line)."""
        route = self.route(source, target)
        if route.kind != "direct":
            raise LookupError(f"no model translates {source} → {target} directly")
        return route.legs[0]

    def close(self) -> None:
        for model in self.models.values():
            model.batcher.close()


def sentences_of(text: str) -> list[str]:
    """The sentences of one input text (cleaned as `mtkit translate` cleans a line); [] if empty."""
    cleaned = clean_line(text)
    return split_sentences(cleaned) if cleaned else []
