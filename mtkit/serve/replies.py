"""The JSON answers of `mtkit serve`: LibreTranslate's shape and mtkit's own (see docs/serve.md)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mtkit.decode.pivot import leg_confidence
from mtkit.decode.translation import Candidate, Translation
from mtkit.langid import Guess
from mtkit.serve.models import Route

#: one text's sentences with their translations, as the server's `translate` returns them
Done = list[tuple[str, Translation]]


def _alternatives(pairs: Done, count: int) -> list[str]:
    """Up to ``count`` other translations of a text, different from the best and from each other:
    the k-th alternative joins each sentence's k-th best (its last, where it has fewer)."""
    best = " ".join(t.text for _, t in pairs)
    found: list[str] = []
    depth = max((len(t.hypotheses) for _, t in pairs), default=0)
    for k in range(1, depth):
        text = " ".join(t.hypotheses[min(k, len(t.hypotheses) - 1)].text for _, t in pairs if t.hypotheses)
        if text != best and text not in found:
            found.append(text)
        if len(found) == count:
            break
    return found


def detected(guess: Guess) -> dict[str, Any]:
    """LibreTranslate's form of a detection: the language and a confidence from 0 to 100."""
    return {"confidence": round(100 * guess.probability, 1), "language": guess.language}


def detections(ranked: list[Guess]) -> list[dict[str, Any]]:
    """LibreTranslate's /detect answer: the languages, most probable first."""
    return [detected(g) for g in ranked]


def libre_reply(q: str | list[str], done: list[Done], alternatives: int,
                languages: list[Guess] | None, pages: list[str] | None = None) -> dict[str, Any]:
    """LibreTranslate's answer: ``translatedText`` (a string, or a list for a list ``q``), with
    ``alternatives`` and ``detectedLanguage`` (``languages``, each text's, for ``source: auto``).
    ``pages``: the translated texts of ``format: html``, whole (``done`` is then unused)."""
    texts = pages if pages is not None else [" ".join(t.text for _, t in pairs) for pairs in done]
    single = isinstance(q, str)
    reply: dict[str, Any] = {"translatedText": texts[0] if single else texts}
    if alternatives > 0:
        alts = [_alternatives(pairs, alternatives) for pairs in done]
        reply["alternatives"] = alts[0] if single else alts
    if languages is not None:
        found = [detected(g) for g in languages]
        reply["detectedLanguage"] = found[0] if single else found
    return reply


def _attention_rows(candidate: Candidate) -> list[list[float]] | None:
    """The attention of a translation averaged over heads: a row per target subword and one for EOS,
    a column per source subword, rounded to 4 places."""
    if candidate.attention is None:
        return None
    att = candidate.attention
    values = np.asarray(att.float().cpu() if hasattr(att, "cpu") else att, dtype=np.float32)
    return np.round(values.mean(axis=0).astype(np.float64), 4).tolist()  # float64: 0.8242, not 0.82419997


def _sentence(source: str, tr: Translation, nbest: int, attention: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {"source": source, "text": tr.text, "source_tokens": tr.source_tokens}
    if not tr.hypotheses:
        return entry
    best = tr.hypotheses[0]
    entry.update({"confidence": round(best.confidence, 4), "log_prob": round(best.log_prob, 4),
                  "score": round(best.score, 4), "target_tokens": best.tokens})
    if nbest > 1:
        entry["nbest"] = [{"text": c.text, "score": round(c.score, 4), "confidence": round(c.confidence, 4)}
                          for c in tr.hypotheses]
    if attention:
        entry["attention"] = _attention_rows(best)
    return entry


def _text(pairs: Done) -> str:
    return " ".join(t.text for _, t in pairs)


def _confidence(pairs: Done) -> float:
    """A text's confidence as `mtkit translate` scores a line of several sentences (`leg_confidence`)."""
    return leg_confidence([t.hypotheses[0] for _, t in pairs if t.hypotheses])


def v1_reply(text: str | list[str], done: list[Done], route: Route | None, beam: int, nbest: int,
             attention: bool, firsts: list[Done] | None = None, detected_as: Guess | None = None,
             target: str = "") -> dict[str, Any]:
    """mtkit's answer: per text its joined translation and its sentences with scores (and attention);
    the route taken (None: the text is in the target language already, answered as it is); through a
    pivot, each text's first-leg translation and the confidence of both legs (their product)."""
    translations = [{"text": _text(pairs), "sentences": [_sentence(s, t, nbest, attention) for s, t in pairs]}
                    for pairs in done]
    for entry, first, last in zip(translations, firsts or [], done, strict=False):
        entry["pivot"] = {"text": _text(first), "sentences": [_sentence(s, t, 1, False) for s, t in first]}
        entry["confidence"] = round(_confidence(first) * _confidence(last), 4)
    names = [m.name for m in route.legs] if route is not None else []
    reply: dict[str, Any] = {
        "model": " → ".join(names), "source": route.source if route is not None else target,
        "target": route.target if route is not None else target, "beam_size": beam,
        "route": route.report() if route is not None else {"kind": "unchanged", "via": None, "models": []},
        "translations": translations}
    if detected_as is not None:
        reply["detectedLanguage"] = detected(detected_as)
    return reply
