"""The paragraphs of an XML document part (Office Open XML, OpenDocument, an EPUB's NCX) as strings for
the model, with their formatting as numbered inline tags, and the translations written back in place.

A paragraph (``<w:p>``, ``<a:p>``, ``<text:p>``, a spreadsheet's ``<si>``) is a sequence of text runs,
each with its formatting (a run's properties, ``<w:rPr>``, and the elements around it: a hyperlink, a
tracked insertion, an ODF ``<text:span>``), of breaks (tabs, line breaks) and of things that are no
text (a field, a drawing, a bookmark, a note). The model gets one string per paragraph:

- the text of the formatting that covers the most of the paragraph (a link's never) bare, every other
  formatting a tag of its own (``<b>``, ``<i>``, ``<u>``, ``<a>`` for a link, ``<span>``; numbered
  where a name comes more than once: ``<b1>``, ``<b2>``), adjacent runs of one formatting (language
  and spelling marks aside) merged into one tag;
- each stretch of things that are no text as one self-closing tag (``<x1/>``), written back as it was,
  once; those before the first text and after the last stay outside the string, in place;
- tabs and line breaks as ``\\t`` and ``\\n`` (translated apart and put back by formats/placeholders);
- spell-check marks (``<w:proofErr>``) and where a page broke when the file was last laid out
  (``<w:lastRenderedPageBreak/>``, ``<text:soft-page-break/>``) left out: they are wrong once the text
  is another language, and the application finds them again.

A translation is written back only where its tags are the source's (each ``<xN/>`` once, every
formatting tag at least once, with words, properly nested), as runs with their own properties in the
translation's order; else the paragraph stays as it was and is reported. The part is changed only by
splicing the new content of each translated paragraph into its span, so every byte outside the
translated paragraphs stays as it was; a paragraph inside another's non-text (a text box in a drawing,
an ODF note) is translated too, and written inside it.
"""

from __future__ import annotations

import html
import re
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from mtkit.errors import DataError
from mtkit.formats.xml import markup
from mtkit.formats.xml.markup import Node
from mtkit.formats.xml.xml_dialects import Dialect, Run, for_xml, write_text
from mtkit.formats.xml.xml_paragraph import (
    BreakItem,
    Item,
    Key,
    OpaqueItem,
    Paragraph,
    TextItem,
    Wrap,
    has_words,
    label_paragraph,
)
from mtkit.placeholders.strings import Outcome

StringsFn = Callable[[list[str]], list[Outcome]]
_LABEL = re.compile(r"<(/?)([A-Za-z][\w.-]*)(/?)>")
_QNAME = re.compile(r"</?([^\s/>]+)")


@dataclass
class PartReport:
    """What became of a part's paragraphs (those with words)."""

    runs: int = 0
    translated: int = 0
    left: list[str] = field(default_factory=list)


class Part:
    """One XML part: its paragraphs read (``strings`` for the model), then written back (``finish``)."""

    def __init__(self, text: str, name: str, dialect: Dialect, keep: frozenset[str] = frozenset()) -> None:
        """``keep``: texts a paragraph is left as it is for (e.g. a workbook's table column names,
        which its cells must repeat)."""
        self.text, self.name, self.dialect, self.keep = text, name, dialect, keep
        if (problem := markup.xml_problem(text)) is not None:
            raise DataError(f"{name}:{problem[0]}: not well-formed XML: {problem[1]}")
        self.tokens = markup.tokenize(text, name, True)
        self.lines = markup.Lines(text)
        root = markup.build(self.tokens, text, True, frozenset())
        self.paragraphs: list[Paragraph] = []
        self.text_tag = dialect.text_tag
        self._find(root, not dialect.within, 0)
        self._splices: dict[int, tuple[int, str]] = {}
        self._starts: list[int] = []  # the splices' starts, in order
        self.strings = [p.string for p in self.paragraphs]

    def qname(self, node: Node) -> str:
        tok = self.tokens[node.start]
        return _QNAME.match(self.text, tok.start)[1]  # type: ignore[index]

    def source(self, node: Node) -> str:
        end = self.tokens[node.start if node.end is None else node.end]
        return self.text[self.tokens[node.start].start:end.end]

    def _find(self, node: Node, inside: bool, depth: int) -> None:
        for child in node.children:
            if not isinstance(child, Node):
                continue
            name = self.qname(child)
            here = inside or name in self.dialect.within
            if here and name in self.dialect.paragraphs and child.end is not None:
                paragraph = self._paragraph(child)
                if paragraph is not None and self.keep and _plain(paragraph.string) in self.keep:
                    paragraph = None
                if paragraph is not None:
                    paragraph.depth = depth
                    self.paragraphs.append(paragraph)
                    self._find(child, here, depth + 1)
                    continue
            self._find(child, here, depth)

    def _paragraph(self, node: Node) -> Paragraph | None:
        items: list[Item] = []
        self._collect(node, Key((), None), items)
        if self.dialect.kind == "word":
            items = self._fields(items)
        if not any(isinstance(item, TextItem) and has_words(item.text) for item in items):
            return None
        texts = [i for i, item in enumerate(items) if isinstance(item, TextItem) and item.text.strip()]
        first, last = texts[0], texts[-1]
        start, end = self.tokens[node.start].end, self.tokens[node.end].start  # type: ignore[index]
        paragraph = Paragraph(start, end, items[:first], items[first:last + 1], items[last + 1:])
        label_paragraph(paragraph)
        return paragraph

    def _collect(self, node: Node, key: Key, items: list[Item]) -> None:
        """The items of ``node``'s content, in order."""
        d = self.dialect
        for child in node.children:
            if not isinstance(child, Node):
                tok = self.tokens[child]
                if tok.kind == "text" and not d.texts and key.run is None:
                    items.append(TextItem(re.sub(r"[ \t\r\n]+", " ", self.text[tok.start:tok.end]), key))
                elif tok.kind != "text":
                    items.append(OpaqueItem(tok.start, tok.end, key, key.run is not None))
                continue
            name = self.qname(child)
            src_start = self.tokens[child.start].start
            src_end = self.tokens[child.start if child.end is None else child.end].end
            if name in d.texts:
                self.text_tag = name
                if child.end is not None:
                    inner = self.text[self.tokens[child.start].end:self.tokens[child.end].start]
                    items.append(TextItem(inner, key))
            elif (char := dict(d.breaks).get(name)) and not re.search(r'type="(?:page|column)"',
                                                                       self.text[src_start:src_end]):
                items.append(BreakItem(char, key, src_start, src_end))
            elif name == d.spaces:
                count = child.attrs.get("text:c", "1")
                items.append(TextItem(" " * (int(count) if count.isdigit() else 1), key))
            elif name in d.dropped:
                items.append(OpaqueItem(src_start, src_end, key, key.run is not None, dropped=True))
            elif name in d.runs and child.end is not None and key.run is None:
                props = next((c for c in child.children
                              if isinstance(c, Node) and self.qname(c) in d.run_props), None)
                props_src = self.source(props) if props is not None else ""
                head_end = (self.tokens[props.start if props.end is None else props.end].end if props
                            else self.tokens[child.start].end)
                run = Run(self.text[src_start:head_end], self.text[self.tokens[child.end].start:src_end],
                           props_src)
                inner_items: list[Item] = []
                self._collect_run(child, props, Key(key.chain, run), inner_items)
                items += inner_items
            elif name in d.wrappers and child.end is not None:
                head_end = self.tokens[child.start].end
                content = []
                for c in child.children:
                    if isinstance(c, Node) and not content and self.qname(c).endswith("Pr"):
                        head_end = self.tokens[c.start if c.end is None else c.end].end
                    elif isinstance(c, Node) or self.tokens[c].kind != "text" or not d.texts:
                        content.append(c)
                wrap = Wrap(self.text[src_start:head_end], self.text[self.tokens[child.end].start:src_end],
                             name in d.links)
                sub = Node(child.name, child.start, child.end, child.attrs, content)
                self._collect(sub, Key((*key.chain, wrap), key.run), items)
            else:
                items.append(OpaqueItem(src_start, src_end, key, key.run is not None))

    def _fields(self, items: list[Item]) -> list[Item]:
        """Each field begun and ended inside the paragraph (``<w:fldChar>`` begin … end, in the same
        wrappers) as one non-text item from its begin to its end: its code and its result come back as
        they were; but a hyperlink field's result (the link's words) is translated, its code before
        and its end after as two items that must keep their order. A field across paragraphs (a table
        of contents) keeps its text translated."""
        out: list[Item] = []
        open_at: list[int] = []
        separate_at = -1
        for item in items:
            kind = (re.search(r'w:fldCharType="(begin|separate|end)"', self.text[item.start:item.end])
                    if isinstance(item, OpaqueItem) and item.in_run else None)
            if kind and kind[1] == "begin":
                open_at.append(len(out))
            if kind and kind[1] == "separate" and len(open_at) == 1:
                separate_at = len(out)
            out.append(item)
            if not (kind and kind[1] == "end" and open_at):
                continue
            at = open_at.pop()
            begin = out[at]
            assert isinstance(begin, OpaqueItem) and begin.key.run and item.key.run  # noqa: S101
            if begin.key.chain != item.key.chain or open_at:
                continue
            separate = out[separate_at] if separate_at > at else None
            result = out[separate_at + 1:-1] if separate is not None else []
            hyperlink = isinstance(separate, OpaqueItem) and re.search(
                r"<w:instrText\b[^>]*>\s*HYPERLINK\b", self.text[begin.start:separate.start])
            if (hyperlink and isinstance(separate, OpaqueItem) and separate.key.run
                    and separate.key.chain == begin.key.chain
                    and any(isinstance(i, TextItem) and has_words(i.text) for i in result)
                    and not any(isinstance(i, OpaqueItem) and "w:fldChar" in self.text[i.start:i.end]
                                for i in result)):
                head = Run(begin.key.run.head, separate.key.run.tail, begin.key.run.props)
                code = OpaqueItem(begin.start, separate.end, Key(begin.key.chain, head), True, ordered=True)
                out[at:] = [code, *result, replace(item, ordered=True)]
            else:
                run = Run(begin.key.run.head, item.key.run.tail, begin.key.run.props)
                out[at:] = [OpaqueItem(begin.start, item.end, Key(begin.key.chain, run), True)]
            separate_at = -1
        return out

    def _collect_run(self, run: Node, props: Node | None, key: Key, items: list[Item]) -> None:
        """The items of a run: its properties left out (they are the run's head)."""
        rest = [c for c in run.children if c is not props]
        self._collect(Node(run.name, run.start, run.end, run.attrs, rest), key, items)

    def finish(self, outcomes: Sequence[Outcome], tgt_lang: str) -> tuple[str, PartReport]:
        """The part with each translated paragraph written back (see the module docstring)."""
        report = PartReport(runs=len(self.paragraphs))
        order = sorted(range(len(self.paragraphs)), key=lambda i: -self.paragraphs[i].depth)
        for i in order:
            paragraph, outcome = self.paragraphs[i], outcomes[i]
            if outcome.text is None:
                problem = outcome.problem
            elif outcome.text == paragraph.string:
                report.translated += 1
                continue
            else:
                written, problem = self._rebuilt(paragraph, outcome.text, tgt_lang)
                if written is not None:
                    self._splices[paragraph.start] = (paragraph.end, written)
                    insort(self._starts, paragraph.start)
                    report.translated += 1
                    continue
            report.left.append(f"{self.name}:{self.lines(paragraph.start)}: left as it was: {problem}")
        out = self.render(0, len(self.text))
        if self._splices and (problem := markup.xml_problem(out)) is not None:
            raise DataError(f"{self.name}: the translated part is not well-formed XML ({problem[1]})")
        report.left.sort(key=lambda line: int(line[len(self.name) + 1:].split(":", 1)[0]))
        return out, report

    def render(self, start: int, end: int) -> str:
        """``text[start:end]`` with the translated paragraphs inside it written in."""
        parts, at = [], start
        for s in self._starts[bisect_left(self._starts, start):bisect_left(self._starts, end)]:
            stop, new = self._splices[s]
            if s < at or stop > end:
                continue
            parts += [self.text[at:s], new]
            at = stop
        return "".join(parts) + self.text[at:end]

    def _rebuilt(self, paragraph: Paragraph, translation: str, tgt_lang: str) -> tuple[str | None, str]:
        """The new content of ``paragraph`` for ``translation``, or None and why it cannot be written."""
        pieces: list[tuple[Key, str] | OpaqueItem] = []
        stack: list[str] = []
        used: Counter[str] = Counter()
        worded: set[str] = set()
        at = 0
        base = paragraph.base or next(i.key for i in paragraph.middle if isinstance(i, TextItem))

        def text(chunk: str) -> None:
            if chunk:
                pieces.append((paragraph.labels[stack[-1]] if stack else base, chunk))  # type: ignore[arg-type]
                if stack and has_words(chunk):
                    worded.update(stack)

        for m in _LABEL.finditer(translation):
            text(translation[at:m.start()])
            at = m.end()
            closing, label, empty = m[1], m[2], m[3]
            found = paragraph.labels.get(label)
            if found is None or isinstance(found, list) != bool(empty):
                return None, f"{m[0]} is not a tag of the source: {translation!r}"
            used[label] += 1
            if empty:
                pieces += found  # type: ignore[arg-type]
            elif closing:
                if not stack or stack[-1] != label:
                    return None, f"the translation's tags do not nest: {translation!r}"
                stack.pop()
            else:
                stack.append(label)
        text(translation[at:])
        if stack:
            return None, f"the translation's tags do not nest: {translation!r}"
        where = [translation.find(f"<{label}/>") for label in paragraph.ordered]
        if where != sorted(where):
            return None, f"a field's end is moved before its start: {translation!r}"
        for label, found in paragraph.labels.items():
            if isinstance(found, list) and used[label] != 1:
                return None, f"<{label}/> is {'lost' if not used[label] else 'repeated'}: {translation!r}"
            if label in paragraph.worded and label not in worded:
                return None, f"<{label}> lost its words: {translation!r}"
        return self._write(paragraph, pieces, tgt_lang), ""

    def _write(self, paragraph: Paragraph, pieces: list[tuple[Key, str] | OpaqueItem], tgt_lang: str) -> str:
        """The paragraph's content: its prefix, the pieces, its suffix, each in its wrappers."""
        units: list[tuple[tuple[Wrap, ...], str]] = []
        for item in paragraph.prefix:
            units.append(self._unit(item, ""))
        first = True
        for piece in pieces:
            if isinstance(piece, OpaqueItem):
                units.append(self._unit(piece, ""))
            else:
                key, chunk = piece
                written = for_xml(chunk, paragraph.string)
                units.append((key.chain, write_text(self.dialect, key.run, written, tgt_lang,
                                                     first and not paragraph.prefix, self.text_tag)))
                first = False
        for item in paragraph.suffix:
            units.append(self._unit(item, ""))
        out: list[str] = []
        open_chain: tuple[Wrap, ...] = ()
        for chain, content in units:
            common = 0
            while common < min(len(chain), len(open_chain)) and chain[common] == open_chain[common]:
                common += 1
            out += [w.tail for w in reversed(open_chain[common:])] + [w.head for w in chain[common:]]
            out.append(content)
            open_chain = chain
        out += [w.tail for w in reversed(open_chain)]
        return "".join(out)

    def _unit(self, item: Item, tgt_lang: str) -> tuple[tuple[Wrap, ...], str]:
        """An item of the source written as it was (a non-text one with the paragraphs inside it
        translated)."""
        if isinstance(item, TextItem):
            return item.key.chain, write_text(self.dialect, item.key.run, item.text, tgt_lang, False,
                                               self.text_tag)
        if isinstance(item, BreakItem):
            run, source = item.key.run, self.text[item.start:item.end]
            return item.key.chain, (run.head + source + run.tail if run else source)
        if item.dropped:
            return item.key.chain, ""
        source = self.render(item.start, item.end)
        run = item.key.run
        return item.key.chain, (run.head + source + run.tail if item.in_run and run else source)


def translate_parts(parts: list[Part], strings: StringsFn, tgt_lang: str) -> list[tuple[str, PartReport]]:
    """Every part's paragraphs translated in one call of ``strings`` (one batch for the model), each
    part written back."""
    flat = [s for part in parts for s in part.strings]
    outcomes = strings(flat) if flat else []
    out, at = [], 0
    for part in parts:
        out.append(part.finish(outcomes[at:at + len(part.strings)], tgt_lang))
        at += len(part.strings)
    return out


def translate_package_parts(read: Callable[[str], bytes], name: str, chosen: Sequence[tuple[str, Dialect]],
                            strings: StringsFn, tgt_lang: str, keep: frozenset[str] = frozenset()
                            ) -> tuple[dict[str, bytes], PartReport]:
    """The ``chosen`` parts of a package (their bytes from ``read``), each in its own encoding,
    translated in one batch (a paragraph whose text is in ``keep`` left as it is): the new bytes of
    those that changed, and what became of them all."""
    parts, encodings = [], []
    for part_name, dialect in chosen:
        text, encoding = markup.decode(read(part_name), f"{name}:{part_name}", True)
        parts.append(Part(text, f"{name}:{part_name}", dialect, keep))
        encodings.append(encoding)
    changed: dict[str, bytes] = {}
    total = PartReport()
    for (part_name, _), part, encoding, (out, report) in zip(
            chosen, parts, encodings, translate_parts(parts, strings, tgt_lang), strict=True):
        if out != part.text:
            changed[part_name] = encoding.encode(out)
        total.runs += report.runs
        total.translated += report.translated
        total.left += report.left
    return changed, total


def _plain(string: str) -> str:
    """A paragraph's string as its text: tags out, XML's entities read."""
    return html.unescape(_LABEL.sub("", string))
