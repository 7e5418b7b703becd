"""A paragraph of an XML document part as the items it is made of (text with its formatting, breaks,
and what is no text) and as one string for the model with its formatting as inline tags; see
formats/xml/xml_runs.py, which reads the paragraphs of a part and writes their translations back.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from mtkit.formats.xml.xml_dialects import Run

#: a run's language and spelling marks: no formatting, so runs that differ only in them are one
_MARKS = re.compile(r'<w:lang\b[^>]*/>|<w:noProof\s*/>|\s(?:lang|altLang|dirty|err|noProof)="[^"]*"')


@dataclass(frozen=True)
class Wrap:
    """An element around runs (a hyperlink, an insertion, an ODF span): its start tag (with any
    properties that lead its content), its end tag, and whether it is a link."""

    head: str
    tail: str
    link: bool


@dataclass(frozen=True)
class Key:
    """The formatting of an item: the wrappers around it, outermost first, and its run."""

    chain: tuple[Wrap, ...]
    run: Run | None

    def label_key(self) -> tuple[tuple[str, ...], str, bool]:
        """What tells formatting apart: the wrappers and the run's properties, less its language and
        spelling marks (set to the target when written) and rsid-like bookkeeping."""
        props = _MARKS.sub("", self.run.props) if self.run else ""
        props = re.sub(r"^<(\w+:)?rPr\s*(?:/>|>\s*</(\w+:)?rPr>)$", "", props)
        return tuple(w.head for w in self.chain), props, self.run is None


@dataclass
class TextItem:
    """Text of a paragraph as the model sees it (entities as written)."""

    text: str
    key: Key


@dataclass
class BreakItem:
    """A tab or line break: ``\\t`` or ``\\n`` in the string; its element's span in the part."""

    char: str
    key: Key
    start: int = 0
    end: int = 0


@dataclass
class OpaqueItem:
    """What is no text (a field, a drawing, a bookmark, a note): its span in the part, kept whole;
    ``in_run``: written inside a run of the same properties; ``dropped``: left out once translated."""

    start: int
    end: int
    key: Key
    in_run: bool
    dropped: bool = False
    ordered: bool = False  # a piece of a field: the pieces keep their order


Item = TextItem | BreakItem | OpaqueItem


@dataclass
class Paragraph:
    """A paragraph: the span of its content, its items before its first text, from it to its last,
    and after; its string for the model, the labels in it, its bare formatting, the labels with
    words."""

    start: int  # the content's span (inside the paragraph's tags)
    end: int
    prefix: list[Item]
    middle: list[Item]
    suffix: list[Item]
    depth: int = 0  # how many translated paragraphs hold it
    string: str = ""
    labels: dict[str, Key | list[OpaqueItem]] = field(default_factory=dict)
    base: Key | None = None
    worded: set[str] = field(default_factory=set)
    ordered: list[str] = field(default_factory=list)  # labels that must come in this order


def label_paragraph(paragraph: Paragraph) -> None:
    """The paragraph's string for the model and the labels in it (see the module docstring)."""
    middle = [i for i in paragraph.middle if not (isinstance(i, OpaqueItem) and i.dropped)]
    chars: Counter[tuple] = Counter()
    keys: dict[tuple, Key] = {}
    for item in middle:
        if isinstance(item, TextItem):
            keys.setdefault(item.key.label_key(), item.key)
            if not any(w.link for w in item.key.chain):
                chars[item.key.label_key()] += len(item.text.strip())
    # the formatting of the most text, a link's never (a tie: the plainer)
    base = max(chars, key=lambda k: (chars[k], -len(k[0]), -len(k[1]))) if chars else None
    paragraph.base = keys[base] if base is not None else None
    names = {k: label_name(key) for k, key in keys.items() if k != base}
    counts = Counter(names.values())
    seen: Counter[str] = Counter()
    label_of: dict[tuple, str] = {}
    for k, name in names.items():
        seen[name] += 1
        label_of[k] = name if counts[name] == 1 else f"{name}{seen[name]}"
        paragraph.labels[label_of[k]] = keys[k]
    groups: list[list[OpaqueItem]] = []
    for n, item in enumerate(middle):
        if isinstance(item, OpaqueItem):
            if n and isinstance(middle[n - 1], OpaqueItem):
                groups[-1].append(item)
            else:
                groups.append([item])
    opaque_label = {id(g[0]): (f"x{n + 1}" if len(groups) > 1 else "x") for n, g in enumerate(groups)}
    for g in groups:
        paragraph.labels[opaque_label[id(g[0])]] = g
        if any(item.ordered for item in g):
            paragraph.ordered.append(opaque_label[id(g[0])])
    out: list[str] = []
    current: str | None = None
    for item in middle:
        if isinstance(item, OpaqueItem):
            if id(item) in opaque_label:
                if current:
                    out.append(f"</{current}>")
                    current = None
                out.append(f"<{opaque_label[id(item)]}/>")
            continue
        if isinstance(item, BreakItem):
            keep = label_of.get(item.key.label_key()) == current  # a break inside the formatting
            if current and not keep:
                out.append(f"</{current}>")
                current = None
            out.append(item.char)
            continue
        label = label_of.get(item.key.label_key())
        if label != current:
            if current:
                out.append(f"</{current}>")
            if label:
                out.append(f"<{label}>")
            current = label
        if label and has_words(item.text):
            paragraph.worded.add(label)
        out.append(item.text)
    if current:
        out.append(f"</{current}>")
    paragraph.string = "".join(out)


def label_name(key: Key) -> str:
    """A text label's name: ``a`` for a link, ``b``, ``i``, ``u`` for bold, italic, underlined runs,
    else ``span``."""
    if any(w.link for w in key.chain) or "hlinkClick" in (key.run.props if key.run else ""):
        return "a"
    props = key.run.props if key.run else ""
    for name in ("b", "i", "u"):
        on = (rf'<(?:\w+:)?{name}(?:\s+(?:\w+:)?val="(?:1|true|on|single|double)")?\s*/>'
              rf'|\s{name}="(?:1|sng|dbl)"')
        if re.search(on, props):
            return name
    return "span"


def has_words(source: str) -> bool:
    return bool(re.search(r"[^\W\d_]", re.sub(r"<[^>]*>|&#?\w+;", " ", source)))
