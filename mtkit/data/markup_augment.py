"""Training pairs that carry markup, so that a model learns to copy placeholders and inline tags
(``data.markup_augmentation``): a share of the training pairs get, on both sides at aligned places, a
placeholder (``%s``, ``%d``, ``%1$s``, ``%(name)s``, ``{name}``, ``${NAME}``) or a pair of inline tags
(``<b>…</b>``, ``<a href="…">…</a>``), as OpusTrainer's inline-tag augmentation and Hanneman & Dinu
(2020) do. A model trained on text without markup cannot write ``%``, ``<`` or ``{`` at all; one
trained on such pairs carries them the way the strings of a program need.

Where the two sides correspond is known without an aligner in two kinds of place:

- a **copied token**: a word or number written identically, once, on both sides (a package name, a
  number, a command, a proper noun: Debian's text has many). A placeholder replaces it (where a
  program's string has a ``%s`` a name stood), and a tag pair wraps it, or wraps the words from one
  copied token to another where the two come in the same order on both sides;
- the **sentence edges**: a placeholder before the first word or after the last (``%s: …``,
  ``…: %s``), a tag pair around the whole sentence (its final punctuation left outside).

A pair that already holds a placeholder or tag is left as it is (its markup is the data's own, and an
insertion could break its nesting). Which pairs are augmented is spread evenly (pair i is augmented
when ⌊(i+1)·f⌋ > ⌊i·f⌋, so exactly the fraction f of them), and what is inserted is drawn from a
generator seeded by the caller: the same seed gives the same training text.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mtkit.placeholders.syntaxes import PLACEHOLDER
from mtkit.textio import read_lines

#: a whitespace token split into leading punctuation, its core and trailing punctuation
_TOKEN = re.compile(r"^([\"'(\[]*)(.*?)([\"'.,;:!?)\]]*)$", re.S)
#: a core that can anchor: letters/digits (dots, dashes, slashes, underscores, plus inside), no markup
_ANCHOR = re.compile(r"^[\w][\w.+/-]*$")
_MARKUP_CHARS = re.compile(r"[<>%{}$&]")
_NAMES = ("name", "file", "count", "user", "path", "value", "package", "n")
_TAGS = ("b", "i", "em", "strong", "code", "span")


@dataclass(frozen=True)
class _Anchor:
    """A copied token: its index among the whitespace tokens of the source and of the target."""

    src: int
    tgt: int
    core: str


def _core(token: str) -> tuple[str, str, str]:
    return _TOKEN.match(token).groups()  # type: ignore[union-attr]


def _anchors(src: list[str], tgt: list[str]) -> list[_Anchor]:
    """The tokens whose core is written once on each side, identically, and could be a name or number
    (two characters or more, or a digit)."""
    def once(tokens: list[str]) -> dict[str, int]:
        seen: dict[str, list[int]] = {}
        for n, token in enumerate(tokens):
            core = _core(token)[1]
            if _ANCHOR.match(core) and (len(core) > 1 or core.isdigit()):
                seen.setdefault(core, []).append(n)
        return {core: at[0] for core, at in seen.items() if len(at) == 1}

    in_src, in_tgt = once(src), once(tgt)
    return [_Anchor(n, in_tgt[core], core) for core, n in in_src.items() if core in in_tgt]


def _placeholder(rng: random.Random, number: bool) -> str:
    name = rng.choice(_NAMES)
    if number:
        return rng.choice(("%d", "%u", "{count}", "%1$d", "{0}"))
    return rng.choice(("%s", "%s", "%1$s", f"%({name})s", f"{{{name}}}", f"${{{name.upper()}}}", "{0}"))


def _tag_pair(rng: random.Random) -> tuple[str, str]:
    if rng.random() < 0.25:
        return f'<a href="https://example.org/{rng.choice(_NAMES)}">', "</a>"
    tag = rng.choice(_TAGS)
    return f"<{tag}>", f"</{tag}>"


def _replace(tokens: list[str], at: int, text: str) -> None:
    lead, _, trail = _core(tokens[at])
    tokens[at] = lead + text + trail


def _wrap(tokens: list[str], first: int, last: int, tags: tuple[str, str]) -> None:
    """Tags around tokens ``first``..``last`` (inclusive), inside their outer punctuation."""
    lead, core, trail = _core(tokens[first])
    tokens[first] = lead + tags[0] + core + (trail if first != last else "")
    if first == last:
        tokens[first] += tags[1] + trail
        return
    lead, core, trail = _core(tokens[last])
    tokens[last] = lead + core + tags[1] + trail


def _edge_wrap(tokens: list[str], tags: tuple[str, str]) -> None:
    """Tags around the whole sentence, its final punctuation left outside."""
    _wrap(tokens, 0, len(tokens) - 1, tags)


def augment_pair(src: str, tgt: str, rng: random.Random) -> tuple[str, str]:
    """``src`` and ``tgt`` with one placeholder or tag pair inserted at aligned places (see the module
    docstring), or unchanged where either side is empty or already holds markup."""
    if not src.strip() or not tgt.strip() or PLACEHOLDER.search(src) or PLACEHOLDER.search(tgt) \
            or _MARKUP_CHARS.search(src + tgt):
        return src, tgt
    s, t = src.split(), tgt.split()
    anchors = _anchors(s, t)
    kind = rng.random()
    if anchors and kind < 0.5:  # at a copied token
        a = rng.choice(anchors)
        if rng.random() < 0.5:
            text = _placeholder(rng, a.core.isdigit())
            _replace(s, a.src, text)
            _replace(t, a.tgt, text)
        else:
            tags = _tag_pair(rng)
            same_order = [b for b in anchors if b != a and (b.src - a.src) * (b.tgt - a.tgt) > 0]
            b = rng.choice(same_order) if same_order and rng.random() < 0.5 else a
            (first, last) = sorted((a, b), key=lambda x: x.src)
            _wrap(s, first.src, last.src, tags)
            _wrap(t, first.tgt, last.tgt, tags)
    elif kind < 0.8:  # a placeholder at an edge
        text = _placeholder(rng, False)
        if rng.random() < 0.5:
            s, t = [text + ":", *s], [text + ":", *t]
        else:
            s, t = _appended(s, text), _appended(t, text)
    else:  # the whole sentence in a tag pair
        tags = _tag_pair(rng)
        _edge_wrap(s, tags)
        _edge_wrap(t, tags)
    return " ".join(s), " ".join(t)


def _appended(tokens: list[str], text: str) -> list[str]:
    """``…: %s``: the placeholder after the last word, before its final stop where it has one."""
    lead, core, trail = _core(tokens[-1])
    stop = trail if trail in (".", "!", "?") else ""
    last = lead + core + trail[:len(trail) - len(stop)]
    return [*tokens[:-1], last + ("" if last.endswith(":") else ":"), text + stop]


def chosen(index: int, fraction: float) -> bool:
    """Whether pair ``index`` is augmented: evenly spread, exactly ``fraction`` of the pairs."""
    return int((index + 1) * fraction) > int(index * fraction)


def augment_pairs(pairs: Iterable[tuple[str, str]], fraction: float, seed: int
                  ) -> Iterator[tuple[str, str]]:
    """The pairs with ``fraction`` of them augmented (``augment_pair``), the same for the same seed."""
    rng = random.Random(f"markup-augmentation-{seed}")
    for n, (src, tgt) in enumerate(pairs):
        yield augment_pair(src, tgt, rng) if chosen(n, fraction) else (src, tgt)


def write_augmented(src: str | Path, tgt: str | Path, out_dir: Path, fraction: float, seed: int
                    ) -> tuple[Path, Path]:
    """The training pair of files ``src``/``tgt`` augmented into ``out_dir`` (train.src, train.tgt);
    prepare reads these in their place, for BPE and for the shards."""
    paths = out_dir / "train.src", out_dir / "train.tgt"
    with open(paths[0], "w", encoding="utf-8", newline="\n") as fs, \
            open(paths[1], "w", encoding="utf-8", newline="\n") as ft:
        for s, t in augment_pairs(zip(read_lines(src), read_lines(tgt), strict=True), fraction, seed):
            fs.write(s + "\n")
            ft.write(t + "\n")
    return paths
