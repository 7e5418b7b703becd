"""Pivot translation: source → pivot language → target, two `Translator`s chained.

Why: a multilingual model asked for a direction it was never trained on (zero-shot) is measured far
worse than the same model going through English (docs/results.md: de→es 19.90 BLEU direct, 28.58
through English), and two bilingual models (es→en, en→de) translate es→de only chained. The chain
here is exactly what two `mtkit translate` commands piped into each other do: the first leg writes
each line's translation (one line, `one_line`), the second leg reads that line as its input, cleans
and cuts it into sentences again. So a pivoted line equals the two-command pivot, line for line.

- **Legs.** ``first`` translates into the pivot language, ``second`` from it into the target: two
  directions of one multilingual model (sharing its weights: `Translator.for_target`), two model
  directories or exports (torch or ct2 engines alike), or one of each.
- **Confidence** of a pivoted line: the product of the two legs' confidences (each the geometric mean
  of its subwords' probabilities); its log form, ``mean_log_prob``, is the sum of the legs' mean
  log-probabilities, and ``log_prob`` the sum of their log-probabilities. A line is as trustworthy as
  its weaker leg and less than either: an error in either leg reaches the output.
- **Glossary** (``SearchOptions.glossary`` of the pair, source terms in the *source* language):
  the terms are found in the input line and their target terms forced on the last leg, as
  constraints of that line (a line with constraints is translated as one sentence, as a
  ``--json-input`` line is). JSON-input constraints go to the last leg too.
- **Refused** (one line each): n-best lists (the second leg's n-best of the first leg's best is not
  an n-best of the pair) and attention or alignments (the last leg attends to the pivot text, not to
  the source).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mtkit.decode.engine import stored_languages
from mtkit.decode.glossary import Glossary
from mtkit.decode.translation import Candidate, Translation, one_line
from mtkit.decode.translator import LoadOptions, SearchOptions, Translator, options_from
from mtkit.errors import ConfigError, MtkitError

NO_NBEST = ("--nbest: a pivoted translation has one candidate per line (the second leg's n-best of the "
            "first leg's best is no n-best of the pair); translate without --pivot for n-best lists")
NO_ATTENTION = ("attention and alignments do not apply through a pivot (the last leg attends to the "
                "pivot text, not to the source); translate without --pivot for them")


@dataclasses.dataclass
class PivotCandidate(Candidate):
    """The last leg's candidate with the first leg's folded into its scores: ``log_prob`` the sum of
    both legs', ``confidence`` the product of both legs' (`mean_log_prob` the sum of their logs).
    ``pivot`` is the first leg's text, what the last leg translated."""

    pivot: str = ""
    first_log_prob: float = 0.0
    first_mean_log_prob: float = 0.0

    @property
    def mean_log_prob(self) -> float:
        """log(confidence): the first leg's mean log-probability plus the last leg's."""
        last = self.log_prob - self.first_log_prob
        return self.first_mean_log_prob + last / (len(self.token_ids) + 1)


def chain(first: Translation, last: Translation) -> Translation:
    """One line's pivoted translation: the last leg's text and tokens, the source and source tokens of
    the first, scores of both (`PivotCandidate`)."""
    out = Translation(first.index, first.source, first.source_tokens)
    if not first.hypotheses:  # an empty line: nothing was translated
        return out
    a = first.hypotheses[0]
    if last.hypotheses:
        b = last.hypotheses[0]
        out.hypotheses = [PivotCandidate(b.text, a.score + b.score, a.log_prob + b.log_prob, b.tokens,
                                         b.token_ids, pivot=a.text, first_mean_log_prob=a.mean_log_prob,
                                         first_log_prob=a.log_prob)]
    else:  # the first leg wrote nothing: so does the last, as certain of it as the first leg was
        out.hypotheses = [PivotCandidate("", a.score, a.log_prob, [], [], pivot=a.text,
                                         first_mean_log_prob=a.mean_log_prob, first_log_prob=a.log_prob)]
    return out


def leg_confidence(candidates: Sequence[Candidate]) -> float:
    """The confidence of a text translated sentence by sentence, as `Translator` scores a line of
    several sentences: exp(the sentences' log-probabilities over their subwords + one end)."""
    if not candidates:
        return 1.0
    subwords = sum(len(c.token_ids) for c in candidates) + 1
    return math.exp(sum(c.log_prob for c in candidates) / subwords)


class PivotTranslator:
    """Two translators chained through ``pivot`` (see the module docstring). The methods a caller of
    `Translator` uses (``translate``, ``translate_hypotheses``, ``translate_stream``,
    ``translate_chunk``) work the same way, one translation per input line.

    >>> tr = PivotTranslator.open("runs/multi", pivot="en", tgt_lang="es")     # doctest: +SKIP
    >>> tr.translate(["Die Datei ist voll."])                                   # doctest: +SKIP
    """

    def __init__(self, first: Translator, second: Translator, pivot: str, glossary: Glossary | None = None):
        if second.nbest > 1 or first.nbest > 1:
            raise ConfigError(NO_NBEST)
        self.first, self.second, self.pivot, self.glossary = first, second, pivot, glossary
        self.chunk_lines = min(first.chunk_lines, second.chunk_lines)
        self.max_tokens = min(first.max_tokens, second.max_tokens)
        self.rows_per_sentence = max(first.rows_per_sentence, second.rows_per_sentence)
        self.search_options = second.search_options

    @classmethod
    def open(cls, model: str | Path, pivot: str = "", then: str | Path | None = None,
             load: LoadOptions | None = None, search_options: SearchOptions | None = None,
             **options: Any) -> PivotTranslator:
        """``model`` into ``pivot``, then into ``search_options.tgt_lang`` (or ``tgt_lang=``) with
        ``then`` (another model directory or export), or with ``model`` itself where it is a
        multilingual model trained pivot → target. ``pivot`` may be left out where the first leg's
        model has one target language. Options as `Translator`'s; the glossary goes to the pair."""
        load, search = options_from(options, load, search_options)
        if search.nbest > 1:
            raise ConfigError(NO_NBEST)
        if load.ensemble:
            raise ConfigError("--ensemble does not combine with --pivot: ensemble the legs' models apart")
        if then is not None and load.checkpoint not in ("best", "last"):
            raise ConfigError(f"--checkpoint {load.checkpoint}: with --pivot-model each model's best or "
                              "last checkpoint is used (name best or last)")
        target = search.tgt_lang
        targets = stored_languages(model).get("tgt", [])
        if not pivot and len(targets) > 1:
            raise ConfigError(f"{model} translates into {', '.join(targets)}: name the pivot language "
                              "with --pivot")
        bare = dataclasses.replace(search, glossary=None, tgt_lang=pivot)
        try:
            first = Translator(model, load, bare)
        except ConfigError as exc:  # the first leg translates into the pivot: say it in those words
            raise ConfigError(str(exc).replace("--tgt-lang", "--pivot")) from None
        pivot = pivot or first.meta.tgt_lang
        if pivot == target:
            raise ConfigError(f"--pivot {pivot} is the language translated into: nothing to pivot through")
        if then is None:
            pairs = [tuple(p) for p in first.meta.languages.get("pairs", [])]
            if not pairs:
                raise ConfigError(f"--pivot {pivot}: {model} translates {first.meta.src_lang} into "
                                  f"{first.meta.tgt_lang} only; give the second leg's model with "
                                  "--pivot-model DIR")
            if (pivot, target) not in pairs:
                trained = ", ".join(f"{s}→{t}" for s, t in pairs)
                raise ConfigError(f"--pivot {pivot} --tgt-lang {target or '?'}: {model} was not trained "
                                  f"{pivot}→{target or '?'} (it was: {trained})")
            second = first.for_target(target)
        else:
            sources = stored_languages(then).get("src")
            second = Translator(then, load, dataclasses.replace(bare, tgt_lang=target))
            sources = sources or [second.meta.src_lang]
            if pivot not in sources:
                raise ConfigError(f"--pivot-model {then} translates from {', '.join(sources)}, not from "
                                  f"the pivot language {pivot}")
        glossary = None
        if search.glossary is not None:
            second._check_constrainable("--glossary")
            glossary = Glossary.from_file(search.glossary, search.glossary_ignore_case)
        return cls(first, second, pivot, glossary)

    @property
    def route(self) -> str:
        """The chain in words, for messages: ``runs/es-en → en → runs/en-de``."""
        return f"{self.first.model_dir} → {self.pivot} → {self.second.model_dir}"

    def translate(self, lines: list[str]) -> list[str]:
        """One pivoted translation per line, in order."""
        return [t.text for t in self.translate_chunk(list(lines))]

    def translate_hypotheses(self, lines: list[str], need_attention: bool = False) -> list[Translation]:
        return self.translate_chunk(list(lines), need_attention=need_attention)

    # chunk by chunk, each chunk through both legs: Translator's own loop over ``translate_chunk``
    translate_stream = Translator.translate_stream

    def translate_chunk(self, lines: list[str], start: int = 0, need_attention: bool = False,
                        name: str = "<input>", constraints: Sequence[Sequence[str]] | None = None
                        ) -> list[Translation]:
        """``lines`` through both legs: the first leg's one-line outputs are the last leg's input
        lines; the glossary's terms found in each input line (and ``constraints``) constrain the
        last leg."""
        if need_attention:
            raise MtkitError(NO_ATTENTION)
        firsts = self.first.translate_chunk(lines, start, False, name)
        forced: list[list[str]] | None = None
        if self.glossary is not None or constraints is not None:
            given = constraints if constraints is not None else [[] for _ in lines]
            forced = [[t.target for t in (self.glossary.find(line) if self.glossary is not None else [])]
                      for line in lines]
            forced = [f + [c for c in g if c not in f] for f, g in zip(forced, given, strict=True)]
        lasts = self.second.translate_chunk([one_line(t.text) for t in firsts], start, False,
                                            f"{name} (through {self.pivot})", forced)
        return [chain(a, b) for a, b in zip(firsts, lasts, strict=True)]


def open_translator(model: str | Path, load: LoadOptions, search: SearchOptions, pivot: str = "",
                    then: str | Path | None = None) -> Translator | PivotTranslator:
    """What `mtkit translate` runs: the model's Translator, or a chain where ``pivot`` or ``then``
    (the second leg's model) is given."""
    if not pivot and then is None:
        return Translator(model, load, search)
    return PivotTranslator.open(model, pivot, then, load, search)


__all__ = ["NO_ATTENTION", "NO_NBEST", "PivotCandidate", "PivotTranslator", "chain", "leg_confidence",
           "open_translator"]
