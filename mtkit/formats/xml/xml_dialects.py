"""How each XML vocabulary of the office formats writes the text of a run (formats/xml/xml_runs.py reads
the paragraphs and rebuilds them; this is the part that differs by vocabulary): WordprocessingML's
``<w:t xml:space="preserve">`` with ``<w:tab/>`` and ``<w:br/>``, DrawingML's ``<a:t>`` with ``<a:br>``
between runs, SpreadsheetML's ``<t>``, OpenDocument's character data with ``<text:s/>``,
``<text:tab/>`` and ``<text:line-break/>``, and plain character data (an NCX title); and the language
marks of a run set to the target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_XML_ENTITY = re.compile(r"&(?:amp|lt|gt|quot|apos|#\d+|#[xX][0-9A-Fa-f]+);")
_ANY_ENTITY = re.compile(r"&(?:[A-Za-z_][\w.-]*|#\d+|#[xX][0-9A-Fa-f]+);")
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\r]")


@dataclass(frozen=True)
class Dialect:
    """How one XML vocabulary writes a paragraph: the qualified names of its elements and how text and
    breaks are written (``kind``: "word", "drawing", "sheet", "odf", or "plain" for an element of
    character data only)."""

    kind: str
    paragraphs: frozenset[str]
    runs: frozenset[str] = frozenset()
    run_props: frozenset[str] = frozenset()
    texts: frozenset[str] = frozenset()  # empty: text is the paragraph's character data (ODF)
    wrappers: frozenset[str] = frozenset()
    links: frozenset[str] = frozenset()
    dropped: frozenset[str] = frozenset()
    breaks: tuple[tuple[str, str], ...] = ()  # element -> "\t" or "\n"
    spaces: str = ""  # ODF's <text:s text:c="n"/>
    within: frozenset[str] = frozenset()  # where set: only paragraphs inside one of these
    text_tag: str = ""  # the element written around text ("w:t")


@dataclass(frozen=True)
class Run:
    """A run's source around its text: its start tag with its properties, its end tag, and the
    properties alone."""

    head: str  # the run's start tag and its properties
    tail: str
    props: str


def write_text(d: Dialect, run: Run | None, text: str, tgt_lang: str, paragraph_start: bool,
                text_tag: str) -> str:
    """``text`` (XML-escaped, with ``\\t`` and ``\\n`` for breaks) as the dialect writes it in ``run``."""
    if d.kind == "odf":
        return odf_text(text, paragraph_start)
    if d.kind == "plain":
        return text
    head, tail = (run.head, run.tail) if run else ("", "")
    if run and tgt_lang:
        head = head.replace(run.props, with_lang(d, run.props, tgt_lang), 1)
    preserve = "" if d.kind == "drawing" else ' xml:space="preserve"'
    open_t, close_t = f"<{text_tag}{preserve}>", f"</{text_tag}>"
    if d.kind == "word":
        parts = re.split(r"([\t\n])", text)
        inner = "".join({"\t": "<w:tab/>", "\n": "<w:br/>"}.get(p, f"{open_t}{p}{close_t}" if p else "")
                        for p in parts)
        return f"{head or '<w:r>'}{inner}{tail or '</w:r>'}"
    if d.kind == "drawing":
        props = run.props if run else ""
        brk = f"<a:br>{with_lang(d, props, tgt_lang)}</a:br>" if props else "<a:br/>"
        return brk.join(f"{head or '<a:r>'}{open_t}{p}{close_t}{tail or '</a:r>'}" if p else ""
                        for p in text.split("\n"))
    return f"{head}{open_t}{text}{close_t}{tail}"


def odf_text(text: str, paragraph_start: bool) -> str:
    """Text as ODF writes it: spaces beyond the first (and one at the paragraph's start) as
    ``<text:s/>``, tabs and line breaks as elements."""
    def spaces(m: re.Match[str]) -> str:
        n = len(m[0]) - (0 if m.start() == 0 and paragraph_start else 1)
        lead = "" if m.start() == 0 and paragraph_start else " "
        return lead + ("<text:s/>" if n == 1 else f'<text:s text:c="{n}"/>' if n else "")

    text = re.sub(r"  +|^ ", spaces, text)
    return text.replace("\t", "<text:tab/>").replace("\n", "<text:line-break/>")


def with_lang(d: Dialect, props: str, tgt_lang: str) -> str:
    """Run properties with the language they name set to the target (the text is in it now)."""
    if not tgt_lang:
        return props
    lang = tgt_lang.replace("_", "-")
    if d.kind == "word":
        return re.sub(r'(<w:lang\b[^>]*?\sw:val=")[^"]*(")', rf"\g<1>{lang}\g<2>", props)
    if d.kind == "drawing":
        return re.sub(r'(\slang=")[^"]*(")', rf"\g<1>{lang}\g<2>", props)
    return props


def for_xml(text: str, source: str) -> str:
    """The model's text as XML character data: XML's own entities and those of the ``source`` string
    (declared by the part's DTD) as written, any other ``&``, ``<``, ``>`` escaped, characters XML
    does not allow left out."""
    text = _NOT_XML.sub("", text)
    known = set(_ANY_ENTITY.findall(source))
    parts = re.split(f"({_ANY_ENTITY.pattern})", text)
    return "".join(p if n % 2 and (_XML_ENTITY.fullmatch(p) or p in known)
                   else p.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
                   for n, p in enumerate(parts))
