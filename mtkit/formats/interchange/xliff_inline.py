"""The content of an XLIFF ``<source>`` as a string for the model, and its translation written back as
the content of a ``<target>``, with every inline code as it was in the source (its id, its attributes,
its original data).

Codes that hold translatable text are pairs of labels around it: XLIFF 1.2's ``<g>`` and ``<mrk>``,
2.0's ``<pc>`` and ``<mrk>``, and a ``<bpt>``/``<ept>`` (1.2), ``<bx/>``/``<ex/>`` (1.2) or
``<sc/>``/``<ec/>`` (2.0) that open and close in the same content. Every other code travels as one
empty label kept whole: ``<x/>``, ``<ph>``, ``<it>``, ``<cp/>``, a lone ``<bpt>`` or ``<sc/>``, a
``<mrk>`` not to translate (1.2 ``mtype="protected"``, 2.0 ``translate="no"``), comments, CDATA.
Labels are the codes' names, numbered where one comes more than once (``<g1>…</g1> <g2>…</g2>``);
text goes as written, entities as they are (placeholders the translation keeps). Labels go back
through formats/captions/subtitle_text.py's ``check`` and ``written`` (nesting, words, bare ``&`` and ``<``
escaped).
"""

from __future__ import annotations

from collections import Counter

from mtkit.formats.captions.subtitle_text import Labelled, Segment, Tag, label_pieces
from mtkit.formats.xml.markup import Node, Token

#: codes whose content is text to translate (1.2 and 2.0)
_PAIRED = frozenset(("g", "mrk", "pc"))
#: the start and end codes of a pair written as two elements, by the start's name
_SPLIT_PAIRS = {"bpt": "ept", "bx": "ex", "sc": "ec"}


def _untranslatable(node: Node) -> bool:
    return (node.attrs.get("mtype") == "protected" or node.attrs.get("translate") == "no"
            or node.name not in _PAIRED or node.empty)


def _pair_key(node: Node, start: bool) -> str:
    """What ties a split pair's end to its start: 1.2's ``rid`` (else ``id``), 2.0's ``startRef``."""
    if node.name in ("sc", "ec"):
        return node.attrs.get("id" if start else "startref", "")
    return node.attrs.get("rid") or node.attrs.get("id", "")


class _Writer:
    """Builds the labelled string of one content element."""

    def __init__(self, text: str, tokens: list[Token]) -> None:
        self.text, self.tokens = text, tokens
        self.out: list[str] = []
        self.items: list[tuple[str, str, str]] = []  # (kind "open" "close" "empty" "text", name, source)

    def source(self, item: Node | int) -> str:
        if isinstance(item, int):
            return self.text[self.tokens[item].start:self.tokens[item].end]
        last = item.start if item.end is None else item.end
        return self.text[self.tokens[item.start].start:self.tokens[last].end]

    def walk(self, children: list[Node | int]) -> None:
        ends = _split_pair_ends(children)
        pending: dict[int, str] = {}  # index of a split pair's end → its name
        for n, child in enumerate(children):
            if isinstance(child, int):
                kind = self.tokens[child].kind
                self.items.append(("text", "", self.source(child)) if kind == "text"
                                  else ("empty", "x-node", self.source(child)))
            elif n in ends:
                self.items.append(("open", child.name, self.source(child)))
                pending[ends[n]] = child.name
            elif n in pending:
                self.items.append(("close", pending.pop(n), self.source(child)))
            elif _untranslatable(child):
                self.items.append(("empty", child.name, self.source(child)))
            else:
                head = self.text[self.tokens[child.start].start:self.tokens[child.start].end]
                self.items.append(("open", child.name, head))
                self.walk(child.children)
                assert child.end is not None
                tail = self.text[self.tokens[child.end].start:self.tokens[child.end].end]
                self.items.append(("close", child.name, tail))


def _split_pair_ends(children: list[Node | int]) -> dict[int, int]:
    """The split pairs among ``children``: the index of each start whose end follows among them (none
    between that would cross another pair's), to its end's index."""
    found: dict[int, int] = {}
    stack: list[tuple[int, str, str]] = []  # open starts: index, end name, key
    for n, child in enumerate(children):
        if not isinstance(child, Node):
            continue
        if child.name in _SPLIT_PAIRS:
            stack.append((n, _SPLIT_PAIRS[child.name], _pair_key(child, True)))
        elif child.name in _SPLIT_PAIRS.values():
            key = _pair_key(child, False)
            k = next((k for k in range(len(stack) - 1, -1, -1)
                      if stack[k][1] == child.name and stack[k][2] == key), None)
            if k is not None:
                found[stack[k][0]] = n
                del stack[k:]  # starts opened inside and not ended stay lone codes
    return found


def labelled_content(children: list[Node | int], text: str, tokens: list[Token]) -> Labelled:
    """The content ``children`` (of a ``<source>`` or a segment's ``<mrk>``) as one labelled string."""
    writer = _Writer(text, tokens)
    writer.walk(children)
    names = Counter(name for kind, name, _ in writer.items if kind in ("open", "empty"))
    tags: dict[str, Tag] = {}
    string, _ = label_pieces(writer.items, names, Counter(), tags)
    return Labelled([Segment("", string, "")], tags)
