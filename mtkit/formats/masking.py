"""The last two ways to translate a string whose placeholders the model will not keep: sentinels, then
position. Neither needs anything from the model but text, so they work with any model (one that never
saw a ``%``, ``<`` or ``{``), either engine, the server and a pivot.

1. **Sentinels.** Each placeholder is replaced by a number the source does not hold (``901``, ``902``
   …): every model writes numbers, and copies them. ``Click <b>Save</b> now`` is translated as ``Click
   901 Save 902 now``; where the translation holds each number exactly once, the placeholders go back in
   their places, glued to the words they were glued to (no space is left where the source had none).
2. **Position.** Where the numbers did not come back (dropped, doubled, rewritten as words), the string
   is translated without its placeholders, and each is put back at the same relative place among the
   words (a diagonal alignment: the k-th of n source words goes with word k·m/n of m in the
   translation), in the source's order, so printf's ordered directives stay in order and tags stay
   nested.

The caller (formats/placeholders.py) checks what comes back exactly as it checks a plain translation,
and uses it only where the check passes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

#: placeholders of a string, in order (a Syntax's finditer)
Finder = Callable[[str], Iterator[re.Match[str]]]
SENTINEL_BASE = 901


@dataclass
class _Slot:
    """One placeholder taken out: its text, and whether it touched the word before / after it."""

    text: str
    glue_left: bool
    glue_right: bool


def _slots(core: str, find: Finder) -> tuple[list[str], list[_Slot]]:
    """``core`` cut into the text between its placeholders (one more piece than placeholders) and the
    placeholders."""
    texts, slots, at = [], [], 0
    for m in find(core):
        texts.append(core[at:m.start()])
        before = core[:m.start()]
        after = core[m.end():]
        slots.append(_Slot(m[0], bool(before) and not before[-1].isspace(),
                           bool(after) and not after[0].isspace()))
        at = m.end()
    texts.append(core[at:])
    return texts, slots


def sentinels(core: str, find: Finder) -> tuple[str, list[tuple[str, _Slot]]]:
    """``core`` with each placeholder a number it does not hold, spaced off; and (number, slot) pairs."""
    texts, slots = _slots(core, find)
    numbers, n = [], SENTINEL_BASE
    for _ in slots:
        while str(n) in core:
            n += 1
        numbers.append(str(n))
        n += 1
    parts = [texts[0]]
    for number, text in zip(numbers, texts[1:], strict=True):
        parts += [f" {number} ", text]
    return re.sub(r"\s+", " ", "".join(parts)).strip(), list(zip(numbers, slots, strict=True))


def unmask(translation: str, pairs: list[tuple[str, _Slot]]) -> str | None:
    """The translation with each sentinel back as its placeholder, or None where one is missing or
    written more than once."""
    out = translation
    for number, slot in pairs:
        found = list(re.finditer(rf"(?<!\d){number}(?!\d)", out))
        if len(found) != 1:
            return None
        start, end = found[0].span()
        if slot.glue_left:
            while start > 0 and out[start - 1] == " ":
                start -= 1
        if slot.glue_right:
            while end < len(out) and out[end] == " ":
                end += 1
        out = out[:start] + slot.text + out[end:]
    return out


def stripped(core: str, find: Finder) -> tuple[str, list[tuple[float, _Slot]]]:
    """``core`` without its placeholders, and each placeholder's relative place among its words."""
    texts, slots = _slots(core, find)
    words_before, placed, count = [], [], 0
    for text in texts[:-1]:
        count += len(text.split())
        words_before.append(count)
    total = count + len(texts[-1].split())
    for before, slot in zip(words_before, slots, strict=True):
        placed.append((before / total if total else 1.0, slot))
    return re.sub(r"\s+", " ", "".join(texts)).strip(), placed


def project(translation: str, placed: list[tuple[float, _Slot]]) -> str:
    """The placeholders put into ``translation`` at their relative places (see the module docstring),
    glued to a neighbouring word where they were glued in the source."""
    words = translation.split()
    at: dict[int, list[_Slot]] = {}
    for relative, slot in placed:
        at.setdefault(int(relative * len(words) + 0.5), []).append(slot)  # half up
    pieces: list[tuple[str, bool, bool]] = []  # text, glued to what is before, to what is after
    for k in range(len(words) + 1):
        pieces += [(slot.text, slot.glue_left, slot.glue_right) for slot in at.get(k, [])]
        if k < len(words):
            pieces.append((words[k], False, False))
    out, glued = "", False
    for text, glue_left, glue_right in pieces:
        if out and not (glue_left or glued):
            out += " "
        out += text
        glued = glue_right
    return out


def rescue(cores: Sequence[str], finders: Sequence[Finder], translate: Callable[[list[str]], Sequence],
           check: Callable[[int, str], bool]) -> list[tuple[str, str] | None]:
    """Per core, a translation made by sentinels or else by position and how ("sentinels",
    "position"), where ``check(k, text)`` accepts it; None where neither gives one."""
    masked = [sentinels(c, f) for c, f in zip(cores, finders, strict=True)]
    found = translate([m for m, _ in masked]) if cores else []
    out: list[tuple[str, str] | None] = [None] * len(cores)
    for k, ((_, pairs), candidates) in enumerate(zip(masked, found, strict=True)):
        for candidate in [candidates] if isinstance(candidates, str) else candidates:
            text = unmask(candidate, pairs)
            if text is not None and check(k, text):
                out[k] = (text, "sentinels")
                break
    left = [k for k in range(len(cores)) if out[k] is None]
    plain = [stripped(cores[k], finders[k]) for k in left]
    again = translate([p for p, _ in plain]) if left else []
    for k, (_, placed), candidates in zip(left, plain, again, strict=True):
        best = candidates if isinstance(candidates, str) else (list(candidates) or [""])[0]
        text = project(best, placed)
        if best.strip() and check(k, text):
            out[k] = (text, "position")
    return out
