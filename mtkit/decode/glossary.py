"""Glossaries: the terms a translation must use (``mtkit translate --glossary terms.tsv``).

A glossary file has one term a line: the source term, a TAB, the target term (UTF-8; blank lines and
lines starting with ``#`` are skipped). A source term occurs in a sentence where it stands as whole
words: not preceded or followed by a letter, digit or underscore ("Save" occurs in "Click Save." and
"Save/Load", not in "Saved" or "unsaved"). Matching is case-sensitive ("Save" is not "save"), or
case-insensitive with ``ignore_case``. Where terms overlap, the longest wins ("Save As" over "Save").
Each target term that a sentence calls for becomes one constraint on its translation: its BPE
subwords, which must appear in the output as a contiguous run (see `mtkit.decode.constrained`).

Refused, with the file and line: a line without exactly one TAB, an empty term, one source term with
two different targets, and a target term the model's BPE cannot encode (it would need an unknown
subword, which the model never outputs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mtkit.data.bpe import Bpe
from mtkit.decode.segment import valid_unicode
from mtkit.errors import DataError
from mtkit.vocab import UNK_ID


@dataclass(frozen=True)
class Term:
    source: str
    target: str
    where: str  # "file:line", for messages


def parse_terms(lines: list[str], name: str) -> list[Term]:
    """The terms of a glossary's lines (see the module docstring for the format and what is refused)."""
    terms: dict[str, Term] = {}
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\r\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        where = f"{name}:{number}"
        fields = line.split("\t")
        if len(fields) != 2:
            raise DataError(f"{where}: expected 'source term<TAB>target term', found "
                            f"{len(fields) - 1} tab(s)")
        source, target = (" ".join(f.split()) for f in fields)
        if not source or not target:
            raise DataError(f"{where}: the {'source' if not source else 'target'} term is empty")
        known = terms.get(source)
        if known is not None and known.target != target:
            raise DataError(f"{where}: {source!r} is translated as {target!r} here but as "
                            f"{known.target!r} at {known.where}")
        terms.setdefault(source, Term(source, target, where))
    return list(terms.values())


class Glossary:
    """Terms, and which of them a sentence contains."""

    def __init__(self, terms: list[Term], ignore_case: bool = False):
        self.terms = terms
        self.ignore_case = ignore_case
        key = (lambda s: s.casefold()) if ignore_case else (lambda s: s)
        self._by_source = {key(t.source): t for t in terms}
        self._key = key
        alternatives = "|".join(re.escape(t.source) for t in sorted(terms, key=lambda t: -len(t.source)))
        flags = re.IGNORECASE if ignore_case else 0
        self._pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", flags) if terms else None
        self._encoded: dict[str, list[int]] = {}

    @classmethod
    def from_file(cls, path: str | Path, ignore_case: bool = False) -> Glossary:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"{path}: not UTF-8 (byte {exc.start + 1})") from None
        except OSError as exc:
            raise DataError(f"--glossary {path}: {exc.strerror or exc}") from None
        terms = parse_terms(text.splitlines(), str(path))
        if not terms:
            raise DataError(f"{path}: holds no term")
        return cls(terms, ignore_case)

    def find(self, sentence: str) -> list[Term]:
        """The terms occurring in ``sentence`` as whole words, each once, in order of occurrence."""
        if self._pattern is None:
            return []
        found: dict[str, Term] = {}
        for match in self._pattern.finditer(sentence):
            term = self._by_source.get(self._key(match.group(0)))
            if term is not None:
                found.setdefault(term.source, term)
        return list(found.values())

    def encode_targets(self, bpe: Bpe) -> None:
        """Encode every target term once with the model's target BPE; refuse one it cannot encode."""
        for term, ids in zip(self.terms, bpe.encode_ids([t.target for t in self.terms]), strict=True):
            if not ids or UNK_ID in ids:
                raise DataError(f"{term.where}: the target term {term.target!r} has characters the "
                                "model's BPE cannot encode (the model could never write it)")
            self._encoded[term.target] = list(ids)

    def constraints(self, sentence: str) -> list[list[int]]:
        """The subword sequences the translation of ``sentence`` must contain (``encode_targets`` first)."""
        return [self._encoded[t.target] for t in self.find(sentence)]


def encode_constraints(targets: list[str], bpe: Bpe, where: str) -> list[list[int]]:
    """Per-line constraints (JSON input's ``"constraints"``): each target string's subwords. A lone
    surrogate becomes U+FFFD (`valid_unicode`), which the BPE cannot encode: an error naming it."""
    targets = [valid_unicode(t) for t in targets]
    out = []
    for target, ids in zip(targets, bpe.encode_ids([" ".join(t.split()) for t in targets]), strict=True):
        if not target.strip():
            raise DataError(f"{where}: an empty constraint")
        if UNK_ID in ids:
            raise DataError(f"{where}: the constraint {target!r} has characters the model's BPE "
                            "cannot encode")
        out.append(list(ids))
    return out
