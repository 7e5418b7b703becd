"""HTML and XHTML pages and fragments: the text of each block translated with its inline tags inside
it; bytes in, bytes out: every other byte of the page as it was.

The page is read as it is written (formats/xml/markup.py: its encoding, its tokens with their spans, its
elements), never re-serialized from a parser's tree: a translation replaces the span of its run in the
source, and nothing else changes (whitespace, entities, quoting, comments, the doctype, the XML
declaration, ``<br/>``, the BOM, CRLF), except the language of an ``<html>`` start tag (``lang``,
``xml:lang``, ``dir`` for a right-to-left target), edited in place.

A *run* is what a block holds between its block children: text and inline elements (``<b>``, ``<a>``,
``<span>``, ``<button>``, ``<select>`` …, nested ones too). Each run is one string for the model, so a
sentence split across inline tags is translated as one sentence. Its elements are written into the
string as bare tags, numbered where a name comes more than once (``Click <a1>Save</a1> or
<a2>Undo</a2>``), so that each keeps its own attributes when the translation reorders them; its text
with its whitespace runs one space, ``&``, ``<``, ``>`` escaped and its entities as written
(``&nbsp;`` is a placeholder, never a space). Inline code (``<code>``, ``<kbd>``, ``<samp>``, ``<var>``,
with ``<br>``, ``<img>``, ``<input>``, comments) and elements not to translate travel as one token
(``<code/>``) and come back as they were, once each.

A translation is written back only when it keeps every tag once (placeholders/strings.py), nests them
as the source did, leaves no element that had words without any (a link with no text), and, in
XHTML, leaves the page well-formed XML; else the run stays as it was and is reported. A translation
equal to its source changes nothing.

Left as they are: ``<script>``, ``<style>``, ``<pre>``, ``<textarea>``, ``<svg>``, ``<math>``,
``<template>``, elements with ``translate="no"`` or class ``notranslate``, and every attribute.
"""

from __future__ import annotations

import html as htmllib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from mtkit.errors import DataError
from mtkit.formats.xml import markup
from mtkit.formats.xml.markup import Node, Token
from mtkit.placeholders.strings import Outcome

INLINE = frozenset((
    "a", "abbr", "acronym", "b", "bdi", "bdo", "big", "br", "button", "cite", "code", "data", "datalist",
    "del", "dfn", "em", "font", "i", "img", "input", "ins", "kbd", "label", "mark", "meter", "optgroup",
    "option", "output", "progress", "q", "rp", "rt", "ruby", "s", "samp", "select", "small", "span",
    "strike", "strong", "sub", "sup", "time", "tt", "u", "var", "wbr",
))
#: inline elements kept whole (their content is code, or they have none)
VERBATIM = frozenset(("br", "code", "img", "input", "kbd", "samp", "var", "wbr"))
#: elements whose whole content is left as it is
SKIP = frozenset(("script", "style", "pre", "textarea", "svg", "math", "template"))
#: scripts, and languages written in one where the code names none, that are written right to left
_RTL_SCRIPTS = frozenset(("arab", "hebr", "thaa", "syrc", "nkoo", "adlm", "rohg", "mand", "samr"))
_RTL_LANGS = frozenset(("ar", "arb", "ara", "he", "iw", "heb", "fa", "fas", "pes", "prs", "ur", "urd",
                        "yi", "yid", "ydd", "ps", "pus", "pbt", "sd", "snd", "ug", "uig", "dv", "div",
                        "ckb", "syr", "azb"))
_WS = " \t\n\r\f"
_LABEL = re.compile(r"<(/?)([A-Za-z][\w.-]*)(/?)>")
_ENTITY = re.compile(r"&(?:[A-Za-z][A-Za-z0-9]*|#\d+|#[xX][0-9A-Fa-f]+);")
_BARE_AMP = re.compile(r"&(?!(?:[A-Za-z][A-Za-z0-9]*|#\d+|#[xX][0-9A-Fa-f]+);)")
StringsFn = Callable[[list[str]], list[Outcome]]


@dataclass
class PageReport:
    """What became of a page's runs, for the caller's summary and its report lines."""

    runs: int = 0  # runs with words, translated or not
    translated: int = 0
    left: list[str] = field(default_factory=list)  # "file:line: why"


def translate_page_bytes(data: bytes, name: str, translate: StringsFn, tgt_lang: str
                         ) -> tuple[bytes, PageReport]:
    """The page or fragment ``data`` (the bytes of ``name``) translated (see the module docstring),
    in its own encoding and BOM; what was done."""
    text, encoding = markup.decode(data, name, name.lower().endswith((".xhtml", ".xht")))
    out, report = translate_page_text(text, name, translate, tgt_lang)
    return encoding.encode(out), report


def translate_page_text(text: str, name: str, translate: StringsFn, tgt_lang: str
                        ) -> tuple[str, PageReport]:
    """The page or fragment ``text`` translated (see the module docstring); what was done."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    page = _Page(text[len(bom):], name)
    runs = [run for items in page.runs(page.root) if (run := page.run(items)) is not None]
    outcomes = translate([r.string for r in runs]) if runs else []
    report = PageReport(runs=len(runs))
    splices: dict[int, tuple[int, str]] = {}
    for run, outcome in zip(runs, outcomes, strict=True):
        written, problem = (None, outcome.problem) if outcome.text is None else run.rebuilt(outcome.text)
        if written is None:
            report.left.append(f"{name}:{page.lines(run.start)}: left as it was: {problem}")
            continue
        report.translated += 1
        if outcome.text != run.string:
            splices[run.start] = (run.end, written)
    if page.xml:
        _keep_xml(page, splices, runs, report)
        report.left.sort(key=lambda line: int(line[len(name) + 1:].split(":", 1)[0]))
    html_tag = next((t for t in page.tokens if t.kind == "start" and t.name == "html"), None)
    if html_tag is not None and tgt_lang:
        tag = page.text[html_tag.start:html_tag.end]
        splices[html_tag.start] = (html_tag.end, _with_lang(tag, tgt_lang, page.xml))
    return bom + _spliced(page.text, splices), report


def _spliced(text: str, splices: dict[int, tuple[int, str]]) -> str:
    """``text`` with each span (start: (end, new text)) replaced."""
    parts, at = [], 0
    for start in sorted(splices):
        end, new = splices[start]
        parts += [text[at:start], new]
        at = end
    return "".join(parts) + text[at:]


def _keep_xml(page: _Page, splices: dict[int, tuple[int, str]], runs: list[_Run],
              report: PageReport) -> None:
    """Leave as it was each translated run of an XHTML page that makes it no longer well-formed XML
    (a character XML does not allow, from the model), and report it."""
    if not splices or markup.xml_problem(_spliced(page.text, splices)) is None:
        return
    by_start = {run.start: run for run in runs}
    for start in sorted(splices):
        problem = markup.xml_problem(_spliced(page.text, {start: splices[start]}))
        if problem is not None:
            del splices[start]
            report.translated -= 1
            report.left.append(f"{page.name}:{page.lines(by_start[start].start)}: left as it was: the "
                               f"translation is not well-formed XML ({problem[1]})")


@dataclass
class _Part:
    """An inline element of a run, by its label in the model's string: its start tag's and end tag's
    source (a verbatim one: its whole source, as ``head``), and whether its content has words."""

    whole: bool
    head: str
    tail: str = ""
    words: bool = False


@dataclass
class _Run:
    """A run: its span in the page (the whitespace at its ends left out), its string for the model and
    its elements by label."""

    start: int
    end: int
    string: str
    parts: dict[str, _Part]

    def rebuilt(self, translation: str) -> tuple[str | None, str]:
        """The page's source for ``translation`` (each tag its element's own source again), or None
        and why it cannot be written."""
        out: list[str] = []
        stack: list[tuple[str, int]] = []
        at = 0
        for m in _LABEL.finditer(translation):
            out.append(_for_page(translation[at:m.start()]))
            at = m.end()
            closing, label, empty = m[1], m[2], m[3]
            part = self.parts.get(label)
            if part is None or part.whole != bool(empty):
                return None, f"{m[0]} is not a tag of the source: {translation!r}"
            if closing:
                if not stack or stack[-1][0] != label:
                    return None, f"the translation's tags do not nest: {translation!r}"
                inner = translation[stack.pop()[1]:m.start()]
                if part.words and not _has_words(inner):
                    return None, f"<{label}> lost its words: {translation!r}"
            elif not empty:
                stack.append((label, m.end()))
            out.append(part.tail if closing else part.head)
        if stack:
            return None, f"the translation's tags do not nest: {translation!r}"
        out.append(_for_page(translation[at:]))
        return "".join(out), ""


class _Page:
    """A page's source, tokens and elements, and its runs."""

    def __init__(self, text: str, name: str) -> None:
        self.text, self.name = text, name
        self.lines = markup.Lines(text)
        self.xml = markup.is_xml(text, name)
        if self.xml and (problem := markup.xml_problem(text)) is not None:
            raise DataError(f"{name}:{problem[0]}: not well-formed XML (an XHTML page): {problem[1]}")
        self.tokens: list[Token] = markup.tokenize(text, name, self.xml)
        if not self.xml:
            markup.check_html(text, name)
        self.root: Node = markup.build(self.tokens, text, self.xml, INLINE)

    def span(self, item: Node | int) -> tuple[int, int]:
        if isinstance(item, int):
            return self.tokens[item].start, self.tokens[item].end
        last = item.start if item.end is None else item.end
        return self.tokens[item.start].start, self.tokens[last].end

    def runs(self, node: Node) -> list[list[Node | int]]:
        """Every run below ``node``, in document order, the skipped elements left out."""
        if node.name and _skipped(node):
            return []
        found, current = [], []
        for child in node.children:
            if self.inline(child):
                current.append(child)
                continue
            found.append(current)
            current = []
            if isinstance(child, Node):
                found += self.runs(child)
        found.append(current)
        return [run for run in found if run]

    def inline(self, item: Node | int) -> bool:
        """Text, a comment, or an inline element with nothing but inline content (an inline element
        holding a block, or whose end is only implied, is a block)."""
        if isinstance(item, int):
            return self.tokens[item].kind in ("text", "comment", "pi", "cdata")
        if item.name not in INLINE or (item.end is None and not item.empty):
            return False
        return _verbatim(item) or all(self.inline(c) for c in item.children)

    def run(self, items: list[Node | int]) -> _Run | None:
        """The run of ``items`` with its string for the model; None where it has no words."""
        start, end = self.span(items[0])[0], self.span(items[-1])[1]
        source = self.text[start:end]
        start += len(source) - len(source.lstrip(_WS))
        end -= len(source) - len(source.rstrip(_WS))
        if start >= end:
            return None
        names = Counter(_names(items, self.tokens))
        parts: dict[str, _Part] = {}
        seen: Counter[str] = Counter()
        out: list[str] = []

        def label(name: str) -> str:
            seen[name] += 1
            return name if names[name] == 1 else f"{name}{seen[name]}"

        def emit(item: Node | int) -> None:
            if isinstance(item, int) and self.tokens[item].kind == "text":
                tok = self.tokens[item]
                out.append(_for_model(self.text[max(tok.start, start):min(tok.end, end)]))
            elif isinstance(item, int) or _verbatim(item):
                name = label("x-node" if isinstance(item, int) else item.name)
                item_start, item_end = self.span(item)
                parts[name] = _Part(True, self.text[item_start:item_end])
                out.append(f"<{name}/>")
            else:
                name = label(item.name)
                head, tail = (self.tokens[i] for i in (item.start, item.end))  # type: ignore[arg-type]
                out.append(f"<{name}>")
                at = len(out)
                for child in item.children:
                    emit(child)
                words = _has_words("".join(out[at:]))
                parts[name] = _Part(False, self.text[head.start:head.end], self.text[tail.start:tail.end],
                                    words)
                out.append(f"</{name}>")

        for item in items:
            emit(item)
        string = "".join(out)
        return _Run(start, end, string, parts) if _has_words(string) else None


def _names(items: list[Node | int], tokens: list[Token]) -> list[str]:
    """The names the labels of ``items`` are made of, nested ones too."""
    found = []
    for item in items:
        if isinstance(item, int):
            if tokens[item].kind != "text":
                found.append("x-node")
        else:
            found.append(item.name)
            if not _verbatim(item):
                found += _names(item.children, tokens)
    return found


def _skipped(node: Node) -> bool:
    return (node.name in SKIP or node.attrs.get("translate", "").strip().lower() == "no"
            or "notranslate" in node.attrs.get("class", "").split())


def _verbatim(node: Node) -> bool:
    return node.empty or node.name in VERBATIM or _skipped(node)


def _for_model(source: str) -> str:
    """A run's text as the model sees it: each whitespace run one space, as a browser shows it;
    entities as written; a bare ``&``, ``<`` and ``>`` escaped."""
    text = _BARE_AMP.sub("&amp;", source).replace("<", "&lt;").replace(">", "&gt;")
    return re.sub(f"[{_WS}]+", " ", text)


def _for_page(text: str) -> str:
    """Translated text as page source: its entities as they are, a bare ``&``, ``<``, ``>`` escaped."""
    return htmllib.escape(text, quote=False) if "&" not in text else "".join(
        part if n % 2 else htmllib.escape(part, quote=False)
        for n, part in enumerate(re.split(f"({_ENTITY.pattern})", text)))


def _has_words(source: str) -> bool:
    return bool(re.search(r"[^\W\d_]", re.sub(r"<[^>]*>|&#?\w+;", " ", source)))


def _rtl(lang: str) -> bool:
    """Whether ``lang`` (a BCP 47 or NLLB code: ``ar``, ``fa-IR``, ``arb_Arab``) is written right to
    left."""
    parts = lang.replace("_", "-").lower().split("-")
    script = next((p for p in parts[1:] if len(p) == 4 and p.isalpha()), "")
    return script in _RTL_SCRIPTS if script else parts[0] in _RTL_LANGS


def _with_lang(tag: str, lang: str, xml: bool) -> str:
    """The ``<html>`` start tag ``tag`` with ``lang`` (and ``xml:lang`` where it has one, or in XHTML)
    set to the target language, and ``dir`` to its direction where it has one or the target is
    written right to left; each value edited in place, missing ones added after the name."""
    code = htmllib.escape(lang.replace("_", "-"))
    values = {"lang": code, "xml:lang": code, "dir": "rtl" if _rtl(lang) else "ltr"}
    attrs = markup.attributes(tag)
    have = {a.name for a in attrs}
    edits = []
    for a in attrs:
        if a.name in values:
            start, end = a.span
            quote = tag[start] if start < end and tag[start] in "\"'" else '"'
            edits.append((start, end, f"{'' if start < end else '='}{quote}{values[a.name]}{quote}"))
    added = [f'{n}="{values[n]}"' for n in ("lang", "xml:lang") if n not in have
             and (n == "lang" or xml) and not have & {"lang", "xml:lang"}]
    if "dir" not in have and _rtl(lang):
        added.append('dir="rtl"')
    name_end = re.match(r"<[^\s/>]+", tag).end()  # type: ignore[union-attr]
    if added:
        edits.append((name_end, name_end, "".join(" " + a for a in added)))
    for start, end, new in sorted(edits, reverse=True):
        tag = tag[:start] + new + tag[end:]
    return tag
