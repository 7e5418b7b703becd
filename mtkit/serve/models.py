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
from mtkit.decode.langid import Guess, LanguageIdentifier
from mtkit.decode.segment import clean_line, split_sentences
from mtkit.decode.translation import Translation
from mtkit.decode.translator import LoadOptions, SearchOptions, Translator
from mtkit.errors import ConfigError
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


class ModelSet:
    """The server's models, keyed by name (the directory's name) and by (source, target)."""

    def __init__(self, paths: list[Path], load: LoadOptions, max_wait: float, max_sentences: int,
                 capacity: int, max_tokens: int = 0, glossary: Path | None = None,
                 glossary_ignore_case: bool = False):
        if not paths:
            raise ConfigError("mtkit serve needs at least one model (-m DIR)")
        self.models: dict[str, ServedModel] = {}
        self.by_pair: dict[tuple[str, str], ServedModel] = {}
        for path in paths:
            pairs = [tuple(p) for p in stored_languages(path).get("pairs", [])]  # a multilingual model's
            first = Translator(path, load, SearchOptions(max_tokens=max_tokens, glossary=glossary,
                                                         glossary_ignore_case=glossary_ignore_case,
                                                         tgt_lang=pairs[0][1] if pairs else ""))
            base = self._unique_name(Path(path).resolve().name or "model")
            for n, (src, tgt) in enumerate(pairs or [(first.meta.src_lang, first.meta.tgt_lang)]):
                # each direction of a multilingual model: the same weights, its own tag, batcher and name
                translator = first if n == 0 else first.for_target(tgt)
                self._add(ServedModel(f"{base}-{src}-{tgt}" if pairs else base, Path(path), translator,
                                      None, src, tgt, translator.engine,  # type: ignore[arg-type]
                                      translator.decoding.beam_size, multilingual=bool(pairs)),
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
        return tr.translate_chunk(sentences, need_attention=settings.attention, constraints=constraints)

    def languages(self) -> list[dict[str, Any]]:
        """LibreTranslate's /languages: every source language with the targets it reaches."""
        targets: dict[str, list[str]] = {}
        for src, tgt in self.by_pair:
            targets.setdefault(src, []).append(tgt)
        return [{"code": src, "name": LANGUAGE_NAMES.get(src, src), "targets": sorted(tgts)}
                for src, tgts in sorted(targets.items())]

    def source_languages(self) -> list[str]:
        """The languages the models translate from."""
        return sorted({s for s, _ in self.by_pair})

    def sources_into(self, target: str) -> list[str]:
        """The languages some model translates into ``target``: what ``source: auto`` chooses among."""
        sources = sorted(s for s, t in self.by_pair if t == target)
        if not sources:
            raise LookupError(f"{target} is not supported")
        return sources

    def identify(self, text: str, among: list[str]) -> list[Guess]:
        """The languages of ``among`` the text may be in, most probable first. One language is the
        answer without asking the identifier (there is nothing to choose); a language the identifier
        does not know is never the answer. ConfigError when py3langid is missing or knows none."""
        if len(among) == 1:
            return [Guess(among[0], 1.0)]
        if self._identifier is None:
            self._identifier = LanguageIdentifier()
        ranked = self._identifier.rank(text, among)
        if not ranked:
            raise ConfigError(f"the language identifier knows none of the languages served "
                              f"({', '.join(among)}); name the source language")
        return ranked

    def find(self, source: str, target: str) -> ServedModel:
        """The model for source → target; ``source`` "auto" names the one source language that
        reaches ``target``, when there is exactly one (LibreTranslate's /translate identifies the
        language of each text instead: `identify`)."""
        if source == "auto":
            sources = self.sources_into(target)
            if len(sources) == 1:
                return self.by_pair[(sources[0], target)]
            raise LookupError(f"source auto: {len(sources)} models translate into {target}; name the "
                              "source language (POST /detect identifies it)")
        model = self.by_pair.get((source, target))
        if model is None:
            known = {s for s, _ in self.by_pair} | {t for _, t in self.by_pair}
            missing = source if source not in known else target if target not in known else None
            if missing is not None:
                raise LookupError(f"{missing} is not supported")
            raise LookupError(f"no model translates {source} into {target}")
        return model

    def close(self) -> None:
        for model in self.models.values():
            model.batcher.close()


def sentences_of(text: str) -> list[str]:
    """The sentences of one input text (cleaned as `mtkit translate` cleans a line); [] if empty."""
    cleaned = clean_line(text)
    return split_sentences(cleaned) if cleaned else []
