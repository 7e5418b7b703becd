"""The last two ways to translate a string whose placeholders the model will not keep: sentinels, then
position. Neither needs anything from the model but text, so they work with any model (one that never
saw a ``%``, ``<`` or ``{``), either engine, the server and a pivot.

1. **Sentinels.** Each placeholder is replaced by a number the source does not hold (``901``, ``902``
   …): every model writes numbers, and copies them. ``Click <b>Save</b> now`` is translated as ``Click
   901 Save 902 now``; where the translation holds each number exactly once, the placeholders go back in
   their places, glued to the words they were glued to (no space is left where the source had none)
   where what they touch is what they touched (``_fits``: gluing must not make another placeholder).
2. **Alignment, else position.** Where the numbers did not come back (dropped, doubled, rewritten as
   words), the string is translated without its placeholders, and each is put back next to the target
   word that the model's attention aligns with its neighbouring source word (``project_aligned``): a
   tag pair around the target words aligned with the words it enclosed; a closing tag, or a
   placeholder glued to the word before it, after the word it followed; anything else before the word
   it preceded (``%d files``: the count goes with its noun, wherever the noun went), after the word
   it followed at a sentence's end. Where the search gives no alignment, or the aligned placement
   breaks the check (printf's order, nesting), each goes back at the same relative place among the
   words (``project``: a diagonal alignment, the k-th of n source words goes with word k·m/n of m in
   the translation), in the source's order, so printf's ordered directives stay in order and tags
   stay nested. A placeholder the model wrote into a translation of a string given without its
   placeholders (or with them masked) is invented, and taken out before they are placed.

The caller (placeholders/strings.py) checks what comes back exactly as it checks a plain translation,
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
    """One placeholder taken out: its text, whether it touched the word before / after it, and the
    characters it touched ('' at an end)."""

    text: str
    glue_left: bool
    glue_right: bool
    before: str = ""
    after: str = ""


def _fits(char: str, touched: str) -> bool:
    """Whether a placeholder that touched ``touched`` in the source may be glued to ``char`` in a
    translation: the same character, or a letter or digit for a letter or digit. Else it is spaced
    off, so that gluing makes no other placeholder: ``%l,`` glued to ``Sie`` would read ``%lS``, and
    ``%k,`` glued to ``%m`` Symfony's ``%k%``."""
    return bool(char) and (char == touched or (char.isalnum() and touched.isalnum()))


def _slots(core: str, find: Finder) -> tuple[list[str], list[_Slot]]:
    """``core`` cut into the text between its placeholders (one more piece than placeholders) and the
    placeholders."""
    texts, slots, at = [], [], 0
    for m in find(core):
        texts.append(core[at:m.start()])
        before = core[:m.start()]
        after = core[m.end():]
        slots.append(_Slot(m[0], bool(before) and not before[-1].isspace(),
                           bool(after) and not after[0].isspace(), before[-1:], after[:1]))
        at = m.end()
    texts.append(core[at:])
    return texts, slots


def sentinels(core: str, find: Finder) -> tuple[str, list[tuple[str, _Slot]]]:
    """``core`` with each placeholder a number it does not hold, spaced off (with the pair of marks it
    stood alone in: ``"%s"`` is one number, so that the words are those ``stripped`` gives); and
    (number, slot) pairs."""
    texts, slots = _enclosed(*_slots(core, find))
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
    written more than once. All are found before any is put back, and put back from the last, so that
    a placeholder ending in a digit (``%1``) glued to the next sentinel does not hide it."""
    spans = []
    for number, slot in pairs:
        found = list(re.finditer(rf"(?<!\d){number}(?!\d)", translation))
        if len(found) != 1:
            return None
        spans.append((found[0].start(), found[0].end(), slot))
    out = translation
    for start, end, slot in sorted(spans, key=lambda span: span[0], reverse=True):
        if slot.glue_left:
            left = len(out[:start].rstrip(" "))
            start = left if _fits(out[left - 1:left], slot.before) else start
        if slot.glue_right:
            right = len(out) - len(out[end:].lstrip(" "))
            end = right if _fits(out[right:right + 1], slot.after) else end
        out = out[:start] + slot.text + out[end:]
    return out


@dataclass
class Placed:
    """A placeholder taken out of a string translated without it: the slot, and how many of the
    string's ``total`` words come before it."""

    slot: _Slot
    before: int
    total: int

    @property
    def relative(self) -> float:
        return self.before / self.total if self.total else 1.0


#: a pair of marks that a placeholder alone may stand in (``"%s"``, ``(%d)``, ``»{0}«``): given without
#: the placeholder, the model would see an empty pair, which means nothing to it
_PAIRS = dict(zip("\"'`‘“„»«([", "\"''’”“«»)]", strict=True))


def _enclosed(texts: list[str], slots: list[_Slot]) -> tuple[list[str], list[_Slot]]:
    """``_slots``'s pieces with each placeholder that stands alone in a pair of marks taking the pair
    with it (``column "%s" is`` → ``column``, ``"%s"``, ``is``)."""
    texts = list(texts)
    slots = list(slots)
    for n, slot in enumerate(slots):
        before, after = texts[n], texts[n + 1]
        alone = (len(before) < 2 or not before[-2].isalnum()) and (len(after) < 2 or not after[1].isalnum())
        if before and after and before[-1] in _PAIRS and after[0] in _PAIRS[before[-1]] and alone:
            texts[n], texts[n + 1] = before[:-1], after[1:]
            slots[n] = _Slot(before[-1] + slot.text + after[0], bool(texts[n]) and not texts[n][-1].isspace(),
                             bool(texts[n + 1]) and not texts[n + 1][0].isspace(), texts[n][-1:],
                             texts[n + 1][:1])
    return texts, slots


def stripped(core: str, find: Finder) -> tuple[str, list[Placed]]:
    """``core`` without its placeholders (each with the pair of marks it stood alone in), and where each
    placeholder stood among its words: counted in the text as the model is given it, where a
    placeholder glued to words on both sides (``file%sname``) leaves a space, not one word made of two."""
    texts, slots = _enclosed(*_slots(core, find))
    parts, words_before = [texts[0]], []
    for slot, text in zip(slots, texts[1:], strict=True):
        words_before.append(len("".join(parts).split()))
        parts += [" " if slot.glue_left and slot.glue_right else "", text]
    bare = re.sub(r"\s+", " ", "".join(parts)).strip()
    total = len(bare.split())
    placed = [Placed(slot, before, total) for before, slot in zip(words_before, slots, strict=True)]
    return bare, placed


def project(translation: str, placed: list[Placed]) -> str:
    """The placeholders put into ``translation`` at their relative places (see the module docstring),
    glued to a neighbouring word where they were glued in the source."""
    words = translation.split()
    return _joined(words, [(int(p.relative * len(words) + 0.5), 0) for p in placed], placed)  # half up


#: an opening and a closing tag, with their name
_OPEN = re.compile(r"<([A-Za-z][\w:.-]*)(?:\s[^>]*)?>$")
_CLOSE = re.compile(r"</([A-Za-z][\w:.-]*)\s*>$")


def project_aligned(translation: str, placed: list[Placed], links: list[tuple[int, int]]) -> str | None:
    """The placeholders put into ``translation`` by the word alignment ``links`` ((source word, target
    word) pairs, the source without its placeholders), as the module docstring says; None where a
    placeholder's neighbours are aligned with no word (then ``project`` places them)."""
    words = translation.split()
    targets: dict[int, list[int]] = {}
    for i, j in links:
        if 0 <= j < len(words):
            targets.setdefault(i, []).append(j)
    gaps: list[tuple[int, int] | None] = [None] * len(placed)  # (gap, 0: after its word, 1: before)
    for a, b in _tag_pairs(placed):  # a pair around the words aligned with those it enclosed
        inside = [j for i in range(placed[a].before, placed[b].before) for j in targets.get(i, [])]
        if inside:
            gaps[a], gaps[b] = (min(inside), 1), (max(inside) + 1, 0)
    for n, p in enumerate(placed):
        if gaps[n] is not None:
            continue
        previous = targets.get(p.before - 1) if p.before > 0 else None
        following = targets.get(p.before) if p.before < p.total else None
        closing = _CLOSE.match(p.slot.text) or p.slot.text == "%>"
        with_previous = closing or (p.slot.glue_left and not p.slot.glue_right)
        if previous and (with_previous or not following):
            gaps[n] = (max(previous) + 1, 0)
        elif following:
            gaps[n] = (min(following), 1)
        else:
            return None
    return _joined(words, [g for g in gaps if g is not None], placed)


def _tag_pairs(placed: list[Placed]) -> list[tuple[int, int]]:
    """(opening, closing) indices of the tag pairs among ``placed``, matched by nesting (gcc's quotes
    ``%<`` … ``%>`` a pair too)."""
    pairs, stack = [], []
    for n, p in enumerate(placed):
        if p.slot.text == "%<" or (m := _OPEN.match(p.slot.text)) and not p.slot.text.endswith("/>"):
            stack.append(("%<" if p.slot.text == "%<" else m[1], n))
        elif p.slot.text == "%>" and stack and stack[-1][0] == "%<" or \
                (m := _CLOSE.match(p.slot.text)) and stack and stack[-1][0] == m[1]:
            pairs.append((stack.pop()[1], n))
    return pairs


def _joined(words: list[str], gaps: list[tuple[int, int]], placed: list[Placed]) -> str:
    """``words`` with each placeholder in its gap (0: before the first word, len(words): after the
    last; in one gap, those that follow the word before ahead of those that precede the word after,
    else in the source's order), glued where the source had them glued."""
    at: dict[int, list[_Slot]] = {}
    for (gap, _), p in sorted(zip(gaps, placed, strict=True), key=lambda x: x[0]):
        at.setdefault(min(max(gap, 0), len(words)), []).append(p.slot)
    pieces: list[tuple[str, _Slot | None]] = []  # a word, or a placeholder with its slot
    for k in range(len(words) + 1):
        pieces += [(slot.text, slot) for slot in at.get(k, [])]
        if k < len(words):
            pieces.append((words[k], None))
    out, previous = "", None
    for text, slot in pieces:
        after_previous = previous is not None and previous.glue_right and _fits(text[:1], previous.after)
        before_this = slot is not None and slot.glue_left and _fits(out[-1:], slot.before)
        glued = (after_previous and before_this) if previous is not None and slot is not None \
            else after_previous or before_this
        out += text if glued or not out else " " + text
        previous = slot
    return out


#: per line, its best translation and the word alignment of it to the line ((source word, target
#: word) pairs), as the search's attention gives it
AlignedFn = Callable[[list[str]], Sequence[tuple[str, list[tuple[int, int]]]]]


def _uninvented(word: str, find: Finder) -> str:
    """``word`` of a translation without the placeholders in it: where the model was given none (they
    were taken out or masked), every one it wrote is invented, and would fail the check."""
    pieces, at = [], 0
    for m in find(word):
        start, end = m.start(), m.end()
        if start > at and end < len(word) and word[end] in _PAIRS.get(word[start - 1], ""):
            start, end = start - 1, end + 1  # with the quotes it stood in: »%s« goes whole
        pieces.append(word[at:start])
        at = end
    return "".join(pieces) + word[at:]


def _without_invented(translation: str, links: list[tuple[int, int]] | None, find: Finder
                      ) -> tuple[str, list[tuple[int, int]] | None]:
    """A translation of a string given without its placeholders, with those the model invented taken
    out (a word made of one alone goes), and its alignment renumbered to the words that stay."""
    words = [_uninvented(w, find) for w in translation.split()]
    kept = [j for j, w in enumerate(words) if w]
    at = {j: n for n, j in enumerate(kept)}
    text = " ".join(words[j] for j in kept)
    if links is None:
        return text, None
    return text, [(i, at[j]) for i, j in links if j in at]


def without_invented(translation: str, find: Finder) -> str:
    """A translation of a string that holds no placeholder, with those the model wrote taken out: each
    is invented (``<b>D-Datei``, ``»%s« nicht unterstützt`` for strings with none)."""
    return _without_invented(translation, None, find)[0]


def masked_candidates(candidates: str | Sequence[str], pairs: list[tuple[str, _Slot]]) -> list[str]:
    """The candidates of a masked string with their sentinels back as placeholders (those that
    have each exactly once), best first."""
    found = [unmask(c, pairs) for c in ([candidates] if isinstance(candidates, str) else candidates)]
    return [text for text in found if text is not None]


def _unsentinelled(word: str, numbers: set[str], core: str) -> str:
    """``word`` without a run of digits and dots the model made of a sentinel (``90101-Tabelle``,
    ``9.01.01``: 901 written wrong), where the source does not hold that run."""
    def mangled(m: re.Match[str]) -> str:
        digits = m[0].replace(".", "")
        return "" if m[0] not in core and any(n in digits for n in numbers) else m[0]

    return re.sub(r"\d[\d.]*\d", mangled, word).strip("-")


def settle(core: str, find: Finder, masked: str, pairs: list[tuple[str, _Slot]], translation: str,
           links: list[tuple[int, int]] | None, check: Callable[[str], bool]) -> tuple[str, str] | None:
    """A translation of ``core`` from the one translation of its ``masked`` form (``sentinels``) and its
    word alignment: the sentinels put back where they came back each once, else the translation
    without them and the placeholders placed by the alignment of the masked source's other words,
    else by position; with how, or None where ``check`` accepts none (then the string is translated
    again without its placeholders: ``rescue``)."""
    back = unmask(translation, pairs)
    if back is not None and check(back):
        return back, "sentinels"
    numbers = {number for number, _ in pairs}
    bare, placed = stripped(core, find)
    source_words = [i for i, w in enumerate(masked.split()) if w not in numbers]
    words = [_unsentinelled(_uninvented(w, find), numbers, core) for w in translation.split()]
    target_words = [j for j, w in enumerate(words) if w.strip(".,;:!?()") not in numbers and w]
    text = " ".join(words[j] for j in target_words)
    if not text.strip() or len(source_words) != len(bare.split()):
        return None
    if links is not None:
        src_at = {i: n for n, i in enumerate(source_words)}
        tgt_at = {j: n for n, j in enumerate(target_words)}
        aligned = project_aligned(text, placed, [(src_at[i], tgt_at[j]) for i, j in links
                                                 if i in src_at and j in tgt_at])
        if aligned is not None and check(aligned):
            return aligned, "alignment"
    by_position = project(text, placed)
    return (by_position, "position") if check(by_position) else None


def rescue(cores: Sequence[str], finders: Sequence[Finder], translate: Callable[[list[str]], Sequence],
           check: Callable[[int, str], bool], aligned: AlignedFn | None = None,
           masked_already: Sequence[bool] | None = None) -> list[tuple[str, str] | None]:
    """Per core, a translation made by sentinels, else by alignment or position, and how
    ("sentinels", "alignment", "position"), where ``check(k, text)`` accepts it; None where none gives
    one. ``aligned``: the search with its word alignments (None: position only); then the masked core
    is searched once with them and placed from that translation where its sentinels did not all come
    back (``settle``), as the first pass does, and only a core still broken is searched again without
    its placeholders. ``masked_already``: the cores whose sentinels were tried already (their first
    translation), which go straight on."""
    masked_already = masked_already or [False] * len(cores)
    out: list[tuple[str, str] | None] = [None] * len(cores)
    first = [k for k in range(len(cores)) if not masked_already[k]]
    masked = [sentinels(cores[k], finders[k]) for k in first]
    if aligned is not None and first:  # one search with attention: sentinels, else placed from it
        found_aligned = aligned([m for m, _ in masked])
        for k, (line, pairs), (best, links) in zip(first, masked, found_aligned, strict=True):
            out[k] = settle(cores[k], finders[k], line, pairs, best, links, lambda t, k=k: check(k, t))
    else:
        found = translate([m for m, _ in masked]) if first else []
        for k, (_, pairs), candidates in zip(first, masked, found, strict=True):
            text = next((t for t in masked_candidates(candidates, pairs) if check(k, t)), None)
            if text is not None:
                out[k] = (text, "sentinels")
    left = [k for k in range(len(cores)) if out[k] is None]
    plain = [stripped(cores[k], finders[k]) for k in left]
    lines = [p for p, _ in plain]
    if aligned is not None and left:
        again = list(aligned(lines))
    else:
        again = [(c if isinstance(c, str) else (list(c) or [""])[0], None)
                 for c in (translate(lines) if left else [])]
    for k, (_, placed), (found_best, found_links) in zip(left, plain, again, strict=True):
        best, links = _without_invented(found_best, found_links, finders[k])
        if not best.strip():
            continue
        by_alignment = project_aligned(best, placed, links) if links is not None else None
        if by_alignment is not None and check(k, by_alignment):
            out[k] = (by_alignment, "alignment")
        elif check(k, text := project(best, placed)):
            out[k] = (text, "position")
    return out
