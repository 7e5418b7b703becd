"""HTML pages and fragments: the text of each block translated with its inline tags inside it, every
other part of the page as it was.

lxml (libxml2's HTML parser) reads the page; a mismatched end tag (``<b>x</i>``) is refused in one line
naming the line, since the page's intended structure is then unknown. Implied ends (``<p>a<p>b``) are
not mistakes in HTML and are read as browsers read them.

A *run* is what a block holds between its block children: text and inline elements (``<b>``, ``<a>``,
``<span>`` …, nested ones too). Each run is one string for the model, so a sentence split across inline
tags is translated as one sentence: its tags are written into the string as bare tags (``<b>``,
``</b>``, attributes left out) and its text with ``& < >`` escaped, and the translation must keep them
all (formats/placeholders.py: they may move within it, as the target's word order needs; a translation
that loses one, or does not nest them, leaves the run as it was and is reported). Back in the tree, the
k-th ``<b>`` of the translation is the k-th ``<b>`` element of the source, with its attributes.

Left as they are: ``<script>``, ``<style>``, ``<pre>``, ``<textarea>``, ``<svg>``, ``<math>``,
``<template>``, elements with ``translate="no"`` or class ``notranslate``, every attribute, and inline
code (``<code>``, ``<kbd>``, ``<samp>``, ``<var>``, with ``<br>``, ``<img>`` …), which travels inside its
sentence as one token (``<code/>``).
"""

from __future__ import annotations

import html as htmllib
import re
from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass, field

from lxml import etree
from lxml import html as lxml_html

from mtkit.errors import DataError
from mtkit.formats.placeholders import Outcome

INLINE = frozenset((
    "a", "abbr", "acronym", "b", "bdi", "bdo", "big", "br", "cite", "code", "data", "del", "dfn", "em",
    "font", "i", "img", "ins", "kbd", "label", "mark", "q", "s", "samp", "small", "span", "strike",
    "strong", "sub", "sup", "time", "tt", "u", "var", "wbr",
))
#: inline elements kept whole (their content is code, or they have none)
VERBATIM = frozenset(("br", "code", "img", "kbd", "samp", "var", "wbr"))
#: elements whose whole content is left as it is
SKIP = frozenset(("script", "style", "pre", "textarea", "svg", "math", "template"))
_TOKEN = re.compile(r"<(/?)([A-Za-z][\w:.-]*)(/?)>")
StringsFn = Callable[[list[str]], list[Outcome]]


@dataclass
class PageReport:
    runs: int = 0  # runs with words, translated or not
    translated: int = 0
    left: list[str] = field(default_factory=list)  # "file:line: why"


def _skipped(el: etree._Element) -> bool:
    return (not isinstance(el.tag, str) or el.tag in SKIP or el.get("translate", "").lower() == "no"
            or "notranslate" in el.get("class", "").split())


def _is_inline(el: etree._Element) -> bool:
    """Inline, with nothing but inline elements below it (an inline element holding a block is a block)."""
    if not isinstance(el.tag, str):
        return True  # a comment or processing instruction travels as it is
    if el.tag not in INLINE:
        return False
    return el.tag in VERBATIM or _skipped(el) or all(_is_inline(c) for c in el)


@dataclass
class _Run:
    """A block's run: the slot of its first text (the parent's ``text`` or a block child's ``tail``),
    and the inline children after it."""

    parent: etree._Element
    after: etree._Element | None  # the block child whose tail starts the run; None: parent.text
    children: list[etree._Element]

    @property
    def lead(self) -> str:
        return (self.parent.text if self.after is None else self.after.tail) or ""

    def source(self) -> tuple[str, list[etree._Element]]:
        """The run as the model's string, and its inline elements in document order."""
        elements: list[etree._Element] = []
        parts = [_escape(self.lead)]
        for child in self.children:
            parts.append(_serialize(child, elements))
        return "".join(parts), elements


def _escape(text: str) -> str:
    """Text as the model sees it: ``& < >`` escaped, each run of whitespace (line breaks and indents
    of the page's source among them) one space, as a browser shows it."""
    return re.sub(r"\s+", " ", htmllib.escape(text, quote=False))


def _has_words(source: str) -> bool:
    return bool(re.search(r"[^\W\d_]", re.sub(r"<[^>]*>|&#?\w+;", " ", source)))


def _serialize(el: etree._Element, elements: list[etree._Element]) -> str:
    if not isinstance(el.tag, str) or el.tag in VERBATIM or _skipped(el):
        elements.append(el)
        name = el.tag if isinstance(el.tag, str) else "x-node"
        return f"<{name}/>" + _escape(el.tail or "")
    elements.append(el)
    inner = _escape(el.text or "") + "".join(_serialize(c, elements) for c in el)
    return f"<{el.tag}>{inner}</{el.tag}>" + _escape(el.tail or "")


def _runs(el: etree._Element) -> list[_Run]:
    """Every run of the page below ``el``, in document order, the skipped elements left out."""
    if _skipped(el):
        return []
    runs = []
    current = _Run(el, None, [])
    for child in el:
        if _is_inline(child):
            current.children.append(child)
            continue
        runs.append(current)
        runs += _runs(child)
        current = _Run(el, child, [])
    runs.append(current)
    return runs


def _rebuild(run: _Run, text: str, elements: list[etree._Element]) -> None:
    """Put the translation ``text`` of ``run`` in its place (see the module docstring)."""
    by_name: dict[str, list[etree._Element]] = {}
    for el in elements:
        by_name.setdefault(el.tag if isinstance(el.tag, str) else "x-node", []).append(el)
    used: dict[str, int] = {}
    top: list[etree._Element] = []
    stack: list[etree._Element] = []
    lead: list[str] = []

    def add_text(s: str) -> None:
        s = htmllib.unescape(s)
        holder = stack[-1] if stack else None
        siblings = list(holder) if holder is not None else top
        if siblings:
            siblings[-1].tail = (siblings[-1].tail or "") + s
        elif holder is not None:
            holder.text = (holder.text or "") + s
        else:
            lead.append(s)

    def place(node: etree._Element) -> None:
        if stack:
            stack[-1].append(node)
        else:
            top.append(node)

    at = 0
    for m in _TOKEN.finditer(text):
        add_text(text[at:m.start()])
        at = m.end()
        closing, name, empty = m[1], m[2], m[3]
        if closing:
            stack.pop()
            continue
        original = by_name[name][used.get(name, 0)]
        used[name] = used.get(name, 0) + 1
        if empty:
            node = deepcopy(original)
            node.tail = None
            place(node)
        else:
            node = etree.Element(original.tag, attrib=dict(original.attrib))
            place(node)
            stack.append(node)
    add_text(text[at:])
    for child in run.children:
        run.parent.remove(child)
    position = 0 if run.after is None else run.parent.index(run.after) + 1
    for n, node in enumerate(top):
        run.parent.insert(position + n, node)
    if run.after is None:
        run.parent.text = "".join(lead)
    else:
        run.after.tail = "".join(lead)


def _nests(text: str, elements: list[etree._Element]) -> bool:
    """The translation's tags open and close in a well-nested order, each closing the last one open."""
    stack: list[str] = []
    for m in _TOKEN.finditer(text):
        if m[1]:
            if not stack or stack.pop() != m[2]:
                return False
        elif not m[3]:
            stack.append(m[2])
    return not stack


def parse_page(text: str, name: str) -> tuple[etree._Element, bool]:
    """The page's tree and whether it is a whole document (else a fragment, in a <div> made here)."""
    parser = lxml_html.HTMLParser(recover=True)
    whole = bool(re.match(r"\s*(?:<!--.*?-->\s*)*<(?:!doctype|html)\b", text, re.I | re.S))
    try:
        root = (lxml_html.document_fromstring(text, parser=parser) if whole
                else lxml_html.fragment_fromstring(text, create_parent="div", parser=parser))
    except (etree.ParserError, ValueError) as exc:
        raise DataError(f"{name}: not an HTML page ({exc})") from None
    for error in parser.error_log:
        if error.type_name == "ERR_TAG_NAME_MISMATCH":
            raise DataError(f"{name}:{error.line}: {error.message.strip()}")
    return root, whole


def page_text(root: etree._Element, whole: bool, original: str) -> str:
    """The tree as HTML again: a document with its doctype, a fragment as its contents."""
    if whole:
        doctype = root.getroottree().docinfo.doctype
        return lxml_html.tostring(root, encoding="unicode", doctype=doctype or None) + "\n"
    inner = (htmllib.escape(root.text or "", quote=False)
             + "".join(lxml_html.tostring(c, encoding="unicode") for c in root))
    return inner + ("\n" if original.endswith("\n") and not inner.endswith("\n") else "")


def translate_page(root: etree._Element, name: str, translate: StringsFn) -> PageReport:
    """Translate every run below ``root`` in place (see the module docstring); what was done."""
    runs, sources = [], []
    for run in _runs(root):
        source = run.source()
        if _has_words(source[0]):
            runs.append(run)
            sources.append(source)
    outcomes = translate([s for s, _ in sources]) if runs else []
    report = PageReport(runs=len(runs))
    for run, (_, elements), outcome in zip(runs, sources, outcomes, strict=True):
        line = run.parent.sourceline if run.after is None else run.after.sourceline
        if outcome.text is None:
            report.left.append(f"{name}:{line}: left as it was: {outcome.problem}")
        elif not _nests(outcome.text, elements):
            report.left.append(f"{name}:{line}: left as it was: the translation's tags do not nest: "
                               f"{outcome.text!r}")
        else:
            _rebuild(run, outcome.text, elements)
            report.translated += 1
    return report
