"""Placeholders, tags and the other parts of a software string that must come out of translation
unchanged: a changed ``%d`` is a crashing program, not a worse translation.

Protected: printf directives (``%s``, ``%-10.3f``, ``%1$s``, ``%(name)s``, ``%%``), brace and dollar
placeholders (``{0}``, ``{name}``, ``{ $name }``, ``${VAR}``, ``$VAR``), inline XML/HTML tags and
entities (``<b>``, ``</a>``, ``<br/>``, ``&amp;``), line breaks and tabs (real ones, and the escapes
``\\n`` ``\\t`` written as two characters), an accelerator mark (``_File``, ``&Open``, ``~Save``) where
the caller names the marks, and the whitespace at a string's ends.

How, so that a written translation keeps every one of them by construction:

1. Structure that need not go through the model is taken out: the ends' whitespace, the line breaks
   and tabs (each line is translated apart and the breaks put back as they were), the accelerator
   mark (put back before the first letter of the translation, the same letter where it has one), and
   a piece made only of placeholders and punctuation (kept as it is).
2. The rest is translated once: as it stands, or, where its placeholders are ones the model cannot
   write (``masking``: "unwritable", the default, asks the translate function's ``can_write``, which
   `mtkit.decode.formats_adapter` answers from the model's target vocabulary; "always" masks every
   string with placeholders; "never" none), with them as numbered sentinels (placeholders/masking.py). A
   translation is kept when it holds the source's placeholders exactly, as a multiset (they may move
   with the target's word order), and the non-positional printf directives in the source's order
   (their arguments come in that order). Where the search gives several candidates (the beam's
   finished hypotheses, best first), the first that keeps them is taken.
3. A piece whose translation lost, added or changed one is translated again with its placeholders as
   hard constraints (the glossary's constrained search; torch engine only) and checked again.
4. A piece still broken is translated with its placeholders out of the model's reach: as numbered
   sentinels (unless step 2 tried them), else without them and put back by the word alignment where
   the translate function gives one (its ``aligned``), else by position (placeholders/masking.py), and
   checked again. A piece without placeholders whose translation has some (invented: ``»%s« nicht
   unterstützt`` for "`e' command not supported") gets them taken out, and is checked again. A string
   with a piece still broken is left untranslated (None), with the reason, for the caller to report.

A translate function is a plain function of lines; one that knows its model may say more, as
attributes (``ModelSearch``): ``can_write(text)``, whether the model's vocabulary can write ``text``,
and ``aligned(lines)``, each line's best translation with its word alignment. Without them, nothing
is masked before the model has tried, and the placement is by position.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from mtkit.errors import DataError
from mtkit.placeholders import icu, masking
from mtkit.placeholders.syntaxes import (  # noqa: F401 (kept, placeholders, syntax_for … are imported from here too)
    GENERIC,
    PLACEHOLDER,
    PRINTF_FLAGS,
    Syntax,
    guarded,
    in_order,
    kept,
    placeholders,
    syntax_for,
)

#: where a string is cut into lines translated apart: line breaks and tabs, real or escaped, with the
#: spaces around them
_BREAKS = re.compile(r"(\s*(?:[\n\r\t\v\f]|\\[ntr])\s*)")
_EDGES = re.compile(r"^(\s*)(.*?)(\s*)$", re.S)
_WORDY = re.compile(r"[^\W\d_]", re.U)  # a letter: a piece with none needs no translation

#: a translation function: lines in, per line its translation or its candidates (best first) out
TranslateFn = Callable[[list[str]], Sequence["str | list[str]"]]
#: the same with, per line, the strings its translation must contain
ConstrainedFn = Callable[[list[str], list[list[str]]], Sequence["str | list[str]"]]
#: which strings are translated with their placeholders as sentinels at once (see the module docstring)
Masking = Literal["unwritable", "always", "never"]


class ModelSearch(Protocol):
    """A translate function that also says what its model can write and where its words went (what
    `mtkit.decode.formats_adapter.search_functions` makes of a Translator)."""

    def __call__(self, lines: list[str]) -> Sequence[str | list[str]]: ...

    def can_write(self, text: str) -> bool: ...

    def aligned(self, lines: list[str]) -> Sequence[tuple[str, list[tuple[int, int]]]]: ...


@dataclass
class _Piece:
    """A run of a string: ``fixed`` text kept as it is, or a ``core`` to translate."""

    fixed: str = ""
    core: str = ""


@dataclass
class _Parsed:
    pieces: list[_Piece]
    syntax: Syntax
    mark: str = ""  # the accelerator mark taken out ('' for none)
    mark_letter: str = ""
    mark_piece: int = -1


def _accelerator(text: str, marks: str, syntax: Syntax) -> re.Match[str] | None:
    """The one accelerator of ``text``, or None where it has none or several (then nothing is moved):
    a mark before a letter or digit (not doubled, which writes the mark itself; not inside a
    placeholder, such as an entity's ``&``), at a word's start (``_Open``) or inside a capitalised word
    (``E_xit``, ``Op&en``; not ``file_name``, ``LC_ALL``, ``AT&T``, which are names)."""
    if not marks:
        return None
    inside = [(p.start(), p.end()) for p in syntax.finditer(text)]
    found = []
    for m in re.finditer(rf"(?<![{re.escape(marks)}])([{re.escape(marks)}])(?=[^\W_])", text):
        if any(a <= m.start() < b for a, b in inside):
            continue
        before = re.search(r"[^\W_]*$", text[:m.start()])[0]  # type: ignore[index]
        after = re.match(r"[^\W_]*", text[m.end():])[0]  # type: ignore[index]
        capitalised = before[:1].isupper() and (len(before) == 1 or before[1:].islower())
        if before and not (capitalised and after.islower() and not re.search(r"\d", before + after)):
            continue
        found.append(m)
    return found[0] if len(found) == 1 else None


def _parse(text: str, marks: str, syntax: Syntax) -> _Parsed:
    parsed = _Parsed([], syntax)
    for n, part in enumerate(_BREAKS.split(text)):
        if n % 2:  # a break
            parsed.pieces.append(_Piece(fixed=part))
            continue
        lead, body, trail = _EDGES.match(part).groups()  # type: ignore[union-attr]
        if lead:
            parsed.pieces.append(_Piece(fixed=lead))
        accel = _accelerator(body, marks, syntax)
        if accel is not None and not parsed.mark:
            parsed.mark, parsed.mark_letter = accel[1], body[accel.end()]
            body = body[:accel.start()] + body[accel.end():]
            parsed.mark_piece = len(parsed.pieces)
        if body and _WORDY.search(syntax.sub("", body)):
            parsed.pieces.append(_Piece(core=body))
        elif body:
            if parsed.mark_piece == len(parsed.pieces):  # nothing to translate: the mark goes back at once
                body = _with_mark(body, parsed.mark, parsed.mark_letter, syntax)
                parsed.mark = ""
            parsed.pieces.append(_Piece(fixed=body))
        if trail:
            parsed.pieces.append(_Piece(fixed=trail))
    return parsed


def _with_mark(text: str, mark: str, letter: str, syntax: Syntax) -> str:
    """``text`` with the accelerator ``mark`` before a letter: the same letter at a word's start if it
    has one, else the first letter at a word's start, else its first letter or digit, else first."""
    if not mark:
        return text
    outside = [m.start() for m in re.finditer(r"\w", text)
               if not any(p.start() <= m.start() < p.end() for p in syntax.finditer(text))]
    starts = [i for i in outside if i == 0 or not text[i - 1].isalnum()]
    same = [i for i in starts if text[i].lower() == letter.lower()]
    at = (same or starts or outside or [0])[0]
    return text[:at] + mark + text[at:]


@dataclass
class Outcome:
    """What became of one string: its translation, or None and why it was left untranslated."""

    text: str | None
    problem: str = ""
    constrained: bool = False  # kept only after the constrained retry
    rescued: str = ""  # kept by "sentinels", "alignment" or "position" (placeholders/masking.py), or
    # "uninvented": a string without placeholders whose translation had some, taken out


def placed_by_guess(outcome: Outcome) -> bool:
    """Whether the placeholders of a translated string were put by guessed position (step 4's last
    resort: neither the model nor the word alignment placed them): a translation to review, which
    catalogs mark fuzzy, XLIFF marks for review and every summary counts."""
    return outcome.rescued == "position"


def translate_strings(strings: Sequence[str], translate: TranslateFn,
                      constrained: ConstrainedFn | None = None, accelerators: str = "",
                      syntaxes: Sequence[Syntax] | None = None, rescue: bool = True,
                      masking: Masking = "unwritable") -> list[Outcome]:
    """Translations of ``strings`` with every placeholder kept, or None with the reason (see the module
    docstring). ``constrained`` (None where the engine has none) retries the broken pieces;
    ``accelerators``: the marks that may stand before an accelerator key (e.g. "_&~" for catalogs);
    ``syntaxes``: each string's placeholders (``syntax_for`` its entry's flags; the generic set where
    None); ``rescue``: whether a piece still broken after the constrained retry is translated by
    sentinels, alignment or position (step 4; off, it is left: what the model does alone);
    ``masking``: which strings go to the model with sentinels at once (step 2). ICU complex arguments
    are translated branch by branch (placeholders/icu.py)."""
    syntaxes = list(syntaxes) if syntaxes is not None else [GENERIC] * len(strings)
    outers, icu_args, branch_outcomes = _icu_branches(strings, translate, constrained, accelerators, syntaxes,
                                                      rescue, masking)
    outcomes = _translate_plain(outers, translate, constrained, accelerators, syntaxes, rescue, masking)
    for i, (args, marks) in icu_args.items():
        outcome = outcomes[i]
        broken = next((o for o in branch_outcomes[i] if o.text is None), None)
        if broken is not None:
            outcomes[i] = Outcome(None, f"a message of {{{args[0].name}, …}}: {broken.problem}")
            continue
        if outcome.text is None:
            continue
        messages = iter(o.text or "" for o in branch_outcomes[i])
        text = outcome.text
        for arg, mark in zip(args, marks, strict=True):
            text = text.replace(mark, arg.rebuilt([next(messages) for _ in arg.branches]), 1)
        outcomes[i] = Outcome(text, constrained=outcome.constrained, rescued=outcome.rescued)
    return outcomes


#: a string's ICU complex arguments and the placeholders that stand for them while it is translated
_IcuArgs = tuple[list[icu.ComplexArg], list[str]]


def _icu_branches(strings: Sequence[str], translate: TranslateFn, constrained: ConstrainedFn | None,
                  accelerators: str, syntaxes: list[Syntax], rescue: bool, policy: Masking
                  ) -> tuple[list[str], dict[int, _IcuArgs], dict[int, list[Outcome]]]:
    """Each string with its ICU complex arguments standing as ``{name}``; per string that had some, the
    arguments and their stand-ins; and the outcomes of their branch messages, translated as strings of
    their own (``#`` a placeholder in plural branches)."""
    outers: list[str] = []
    found: dict[int, _IcuArgs] = {}
    branches: list[tuple[int, str, Syntax]] = []
    for i, text in enumerate(strings):
        args = icu.complex_args(text) if "{" in text else []
        if not args:
            outers.append(text)
            continue
        outer, marks = icu.stand_ins(text, args)
        outers.append(outer)
        found[i] = (args, marks)
        for arg in args:
            syntax = _with_hash(syntaxes[i]) if arg.counts else syntaxes[i]
            branches += [(i, message, syntax) for message in arg.branches]
    done = translate_strings([m for _, m, _ in branches], translate, constrained, accelerators,
                             [s for _, _, s in branches], rescue, policy) if branches else []
    per: dict[int, list[Outcome]] = {i: [] for i in found}
    for (i, _, _), outcome in zip(branches, done, strict=True):
        per[i].append(outcome)
    return outers, found, per


def _with_hash(syntax: Syntax) -> Syntax:
    """``syntax`` with ICU's ``#`` (the number, in a plural branch) as a placeholder too."""
    return Syntax(re.compile(f"(?:#)|{syntax.regex.pattern}"), syntax.printf)


def masks_first(core: str, syntax: Syntax, masking: Masking, can_write: Callable[[str], bool] | None) -> bool:
    """Whether ``core`` goes to the model with its placeholders as sentinels at once: it has some, and
    ``masking`` is "always", or "unwritable" and the model (``can_write``; unknown: it can) cannot
    write one of them."""
    found = placeholders(core, syntax)
    if not found or masking == "never":
        return False
    return masking == "always" or (can_write is not None and not all(can_write(p) for p in found))


def _first_pass(sources: list[str], syntaxes: list[Syntax], translate: TranslateFn, policy: Masking
                ) -> tuple[list[str], list[str], list[bool], dict[int, str]]:
    """Each core translated once (step 2): its text, its problem ('' for none), whether it was masked,
    and how the masked ones that passed were put back. A masked core whose sentinels did not all come
    back is placed from the same translation by its word alignment where the translate function gives
    one (``aligned``), so that most strings are searched once."""
    can_write = getattr(translate, "can_write", None)
    aligned = getattr(translate, "aligned", None)
    masked = [masks_first(c, s, policy, can_write) for c, s in zip(sources, syntaxes, strict=True)]
    finders = [guarded(c, s).finditer for c, s in zip(sources, syntaxes, strict=True)]
    pairs = {k: masking.sentinels(c, finders[k]) for k, c in enumerate(sources) if masked[k]}
    plain = [k for k in range(len(sources)) if not masked[k]]
    texts, problems, how = [""] * len(sources), [""] * len(sources), {}
    found = list(translate([sources[k] for k in plain])) if plain else []
    for k, text, problem in zip(plain, *_choose([sources[k] for k in plain], found,
                                                 [syntaxes[k] for k in plain]), strict=True):
        texts[k], problems[k] = text, problem
    order = list(pairs)
    lines = [pairs[k][0] for k in order]
    if aligned is not None:
        results: list = list(aligned(lines)) if lines else []
    else:
        results = [(None, c) for c in (translate(lines) if lines else [])]
    for k, (best, other) in zip(order, results, strict=True):  # (text, links) or (None, candidates)
        def passes(text: str, k: int = k) -> bool:
            return not kept(sources[k], text, syntaxes[k])

        candidates = [best] if best is not None else ([other] if isinstance(other, str) else list(other))
        good = next((t for t in masking.masked_candidates(candidates, pairs[k][1]) if passes(t)), None)
        got = (good, "sentinels") if good is not None else None
        if got is None and best is not None:
            masked_source, back = pairs[k]
            got = masking.settle(sources[k], finders[k], masked_source, back, best, other, passes)
        if got is None:
            texts[k], problems[k] = sources[k], "its sentinels did not come back"
        else:
            (texts[k], how[k]) = got
    return texts, problems, masked, how


def _translate_plain(strings: Sequence[str], translate: TranslateFn, constrained: ConstrainedFn | None,
                     accelerators: str, syntaxes: list[Syntax], rescue: bool, policy: Masking
                     ) -> list[Outcome]:
    """``translate_strings`` for strings without ICU complex arguments."""
    parsed = [_parse(s, accelerators, syntax) for s, syntax in zip(strings, syntaxes, strict=True)]
    cores = [(i, n, piece.core) for i, p in enumerate(parsed)
             for n, piece in enumerate(p.pieces) if piece.core]
    sources = [c for _, _, c in cores]
    core_syntax = [parsed[i].syntax for i, _, _ in cores]
    texts, problems, masked, rescued = _first_pass(sources, core_syntax, translate, policy)
    retried: set[int] = set()
    broken = [k for k, problem in enumerate(problems) if problem and not masked[k]]
    if broken and constrained is not None:
        redo = [k for k in broken if placeholders(cores[k][2], core_syntax[k])]
        again = _constrained(constrained, [cores[k][2] for k in redo], [core_syntax[k] for k in redo])
        for k, out in zip(redo, again, strict=True):
            if out is None:
                problems[k] += " (and the model cannot write them as constraints)"
            elif not kept(cores[k][2], out, core_syntax[k]):
                texts[k], problems[k] = out, ""
                retried.add(k)
            else:
                problems[k] += f"; with them as constraints {out!r}: {kept(cores[k][2], out, core_syntax[k])}"
    lost = [k for k, problem in enumerate(problems)
            if rescue and problem and placeholders(cores[k][2], core_syntax[k])]
    if lost:  # the model will not keep them: sentinels, then alignment or position
        def keeps(j: int, text: str) -> bool:
            return not kept(cores[lost[j]][2], text, core_syntax[lost[j]])

        found = masking.rescue([cores[k][2] for k in lost], [guarded(cores[k][2], core_syntax[k]).finditer
                                                                for k in lost],
                               translate, keeps, getattr(translate, "aligned", None),
                               [masked[k] for k in lost])
        for k, got in zip(lost, found, strict=True):
            if got is not None:
                texts[k], problems[k] = got[0], ""
                rescued[k] = got[1]
    for k, problem in enumerate(problems):  # a string with none: what the model wrote is invented
        core, syntax = cores[k][2], core_syntax[k]
        if rescue and problem and not placeholders(core, syntax):
            text = masking.without_invented(texts[k], guarded(core, syntax).finditer)
            if _WORDY.search(text) and not kept(core, text, syntax):
                texts[k], problems[k], rescued[k] = text, "", "uninvented"
    translated: dict[tuple[int, int], str] = {}
    failed: dict[int, str] = {}
    for k, (i, n, core) in enumerate(cores):
        if problems[k]:
            failed.setdefault(i, f"{core!r} → {texts[k]!r}: {problems[k]}")
        translated[(i, n)] = texts[k]
    retried_strings = {cores[k][0] for k in retried}
    rescued_strings: dict[int, str] = {}
    for k, how in rescued.items():
        rescued_strings.setdefault(cores[k][0], how)
    outcomes = []
    for i, p in enumerate(parsed):
        if i in failed:
            outcomes.append(Outcome(None, failed[i]))
            continue
        parts = []
        for n, piece in enumerate(p.pieces):
            text = translated.get((i, n), piece.fixed)
            at_mark = n == p.mark_piece and piece.core
            parts.append(_with_mark(text, p.mark, p.mark_letter, p.syntax) if at_mark else text)
        outcomes.append(Outcome("".join(parts), constrained=i in retried_strings,
                                rescued=rescued_strings.get(i, "")))
    return outcomes


def _choose(cores: list[str], found: Sequence[str | list[str]], syntaxes: Sequence[Syntax]
            ) -> tuple[list[str], list[str]]:
    """Per core, the first candidate that keeps its placeholders ('' for its problem), or the best
    candidate and what is wrong with it."""
    texts, problems = [], []
    for core, candidates, syntax in zip(cores, found, syntaxes, strict=True):
        options = [candidates] if isinstance(candidates, str) else list(candidates) or [""]
        good = next((c for c in options if not kept(core, c, syntax)), None)
        texts.append(options[0] if good is None else good)
        problems.append("" if good is not None else kept(core, options[0], syntax))
    return texts, problems


def _constrained(constrained: ConstrainedFn, cores: list[str], syntaxes: list[Syntax]
                 ) -> list[str | None]:
    """Each core translated with its placeholders as constraints (its first candidate that keeps
    them, else its best); None for one whose placeholders the model cannot write at all (a subword it
    does not know)."""
    if not cores:
        return []
    try:
        found = constrained(cores, [placeholders(c, s) for c, s in zip(cores, syntaxes, strict=True)])
        return list(_choose(cores, found, syntaxes)[0])
    except DataError:
        pass  # one of them cannot be encoded: find which, one by one
    out: list[str | None] = []
    for core, syntax in zip(cores, syntaxes, strict=True):
        try:
            out.append(_choose([core], constrained([core], [placeholders(core, syntax)]), [syntax])[0][0])
        except DataError:
            out.append(None)
    return out


def __getattr__(name: str) -> Any:
    """``search_functions`` lived here once (formats.md showed it): it is `mtkit.decode.formats_adapter`'s
    now, found by name, with a DeprecationWarning, so that formats imports no decoding module."""
    if name != "search_functions":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib
    import warnings

    warnings.warn(f"{__name__}.search_functions is now mtkit.decode.formats_adapter.search_functions",
                  DeprecationWarning, stacklevel=2)
    return importlib.import_module("mtkit.decode.formats_adapter").search_functions
