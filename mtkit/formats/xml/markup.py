"""The source of an HTML or XHTML page as it is written: its encoding, its tokens with their exact
spans, and the elements they make. formats/xml/html.py translates a page by splicing translations into
these spans, so that everything it does not translate comes back byte for byte (a parser's tree,
written out again, would change quoting, entities, ``<br/>``, the doctype and the XML declaration).

Markup that leaves the page's structure unknown is refused in one line naming the file and line: an
attribute quote never closed, a comment never ended, a tag that does not end; in HTML a mismatched end
tag (``<b>x</i>``, found by libxml2's HTML parser, as browsers would misread it); in XHTML anything
that is not well-formed XML (libxml2's XML parser). Implied ends in HTML (``<p>a<p>b``, ``<li>``
without ``</li>``) are no mistakes: the elements are built as browsers build them.
"""

from __future__ import annotations

import codecs
import re
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

from lxml import etree
from lxml import html as lxml_html

from mtkit.errors import DataError

#: elements that never have content in HTML
VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "keygen", "link", "meta",
                  "param", "source", "track", "wbr", "basefont", "frame", "command"))
#: HTML elements whose content is text up to their end tag, never markup
RAW_TEXT = frozenset(("script", "style", "textarea", "title", "xmp", "iframe", "noembed", "noframes"))
#: an attribute (after a space, or right after a quoted one): its name and its value as written
_ATTR = r"""(?:\s+|(?<=["']))([^\s"'>/=]+)(?:\s*=\s*("[^"]*"|'[^']*'|[^\s"'=<>`]+))?"""
_ATTR_ONE = re.compile(_ATTR)
_ATTRS = _ATTR.replace("(", "(?:").replace("(?:?", "(?")  # the same without groups
_START = re.compile(rf"<([A-Za-z][^\s/>]*)((?:{_ATTRS})*)\s*(/?)>")
_START_PART = re.compile(rf"<[A-Za-z][^\s/>]*(?:{_ATTRS})*\s*")
_END = re.compile(r"</([A-Za-z][^\s/>]*)\s*>")
_XHTML_NS = re.compile(r"""<html\b[^>]*\sxmlns\s*=\s*["']http://www\.w3\.org/1999/xhtml["']""", re.I)
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))
_XML_ENCODING = re.compile(rb"""^\s*<\?xml[^>]*?\sencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']""")
_META_CHARSET = re.compile(rb"""<meta\s[^>]*?charset\s*=\s*["']?([A-Za-z0-9._:-]+)""", re.I)
#: labels browsers read as windows-1252 (WHATWG Encoding): a page labelled so is read, and written, so
_AS_1252 = frozenset(("iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "ascii", "us-ascii"))


@dataclass
class Encoding:
    """How a page's bytes are text: its codec and its byte order mark (b"" for none)."""

    codec: str = "utf-8"
    bom: bytes = b""

    def encode(self, text: str) -> bytes:
        """``text`` in this encoding, the BOM first; a character it cannot hold as a character
        reference (``&#8364;``), which HTML and XML read as that character."""
        return self.bom + text.encode(self.codec, errors="xmlcharrefreplace")


def decode(data: bytes, name: str, xml: bool | None = None) -> tuple[str, Encoding]:
    """The text of ``data`` and its encoding: its BOM's, else its XML declaration's, else its
    ``<meta charset>`` (or ``http-equiv`` content's), else UTF-8. Undecodable bytes are refused."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return _decoded(data, len(bom), codec, name), Encoding(codec, bom)
    head = data[:2048]
    found = _XML_ENCODING.match(head) or _META_CHARSET.search(head)
    label = found[1].decode("ascii").lower() if found else "utf-8"
    if not _XML_ENCODING.match(head) and label in _AS_1252 and not xml:
        label = "cp1252"
    if label.startswith(("utf-16", "utf-32")):
        label = "utf-8"  # a page whose label could be read as ASCII is not UTF-16 (its BOM would say so)
    try:
        codec = codecs.lookup(label).name
    except LookupError:
        line = head.count(b"\n", 0, found.start(1)) + 1 if found else 1
        raise DataError(f"{name}:{line}: unknown encoding {label!r}") from None
    return _decoded(data, 0, codec, name), Encoding(codec)


def _decoded(data: bytes, at: int, codec: str, name: str) -> str:
    try:
        return data[at:].decode(codec)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, at + exc.start) + 1
        raise DataError(f"{name}:{line}: not {codec} text (byte {exc.object[exc.start]:#04x}: "
                        f"{exc.reason}); convert it, or declare its encoding") from None


def is_xml(text: str, name: str) -> bool:
    """Whether the page is XHTML (XML): an XML declaration, the XHTML namespace on ``<html>``, or an
    .xhtml name."""
    return (text.lstrip("\ufeff \t\r\n").startswith("<?xml") or bool(_XHTML_NS.search(text))
            or name.lower().endswith((".xhtml", ".xht")))


class Lines:
    """Line numbers of offsets in a text (1-based)."""

    def __init__(self, text: str) -> None:
        self._breaks = [m.start() for m in re.finditer("\n", text)]

    def __call__(self, at: int) -> int:
        return bisect_right(self._breaks, at - 1) + 1


@dataclass
class Token:
    """A piece of the source: ``kind`` text, raw (a script's or style's content), start, end,
    comment, pi, doctype (any ``<!…>``) or cdata, over ``text[start:end]``."""

    kind: str
    start: int
    end: int
    name: str = ""  # a tag's local name, lower case
    closed: bool = False  # a start tag written self-closed (<br/>)


def tokenize(text: str, name: str, xml: bool) -> list[Token]:
    """Every piece of ``text`` in order, spans adjacent and covering it all (see the module docstring
    for what is refused)."""
    lines = Lines(text)
    tokens: list[Token] = []
    at = 0
    while at < len(text):
        lt = text.find("<", at)
        if lt < 0:
            lt = len(text)
        if lt > at:
            _add_text(tokens, at, lt)
        if lt == len(text):
            break
        tok = _markup(text, lt, xml, lambda pos, why: DataError(f"{name}:{lines(pos)}: {why}"))
        if tok is None:  # a "<" that starts no markup is text in HTML ("a < b")
            _add_text(tokens, lt, lt + 1)
            at = lt + 1
            continue
        tokens.append(tok)
        at = tok.end
        if tok.kind == "start" and not xml and tok.name in RAW_TEXT and not tok.closed:
            close = re.compile(rf"</{re.escape(tok.name)}\s*>", re.I).search(text, at)
            stop = close.start() if close else len(text)
            if stop > at:
                tokens.append(Token("text" if tok.name == "title" else "raw", at, stop))
            at = stop
    return tokens


def _add_text(tokens: list[Token], start: int, end: int) -> None:
    if tokens and tokens[-1].kind == "text" and tokens[-1].end == start:
        tokens[-1].end = end
    else:
        tokens.append(Token("text", start, end))


def _markup(text: str, lt: int, xml: bool, error: Callable[[int, str], DataError]) -> Token | None:
    """The markup token at ``text[lt] == "<"``, None where it starts none."""
    for opener, closer, kind in (("<!--", "-->", "comment"), ("<![CDATA[", "]]>", "cdata"),
                                 ("<!", ">", "doctype"), ("<?", "?>" if xml else ">", "pi")):
        if text.startswith(opener, lt):
            stop = text.find(closer, lt + len(opener))
            if stop < 0:
                raise error(lt, f"{kind if kind != 'doctype' else 'declaration'} never ended: "
                                f"{text[lt:lt + 30]!r}")
            return Token(kind, lt, stop + len(closer))
    if text.startswith("</", lt):
        m = _END.match(text, lt)
        if m:
            return Token("end", lt, m.end(), _local(m[1]))
        if re.match(r"</[A-Za-z]", text[lt:lt + 3]):
            raise error(lt, f"an end tag that does not end: {text[lt:lt + 30]!r}")
        return None
    if not re.match(r"<[A-Za-z]", text[lt:lt + 2]):
        return None
    m = _START.match(text, lt)
    if m is None:
        raise error(lt, _bad_start(text, lt))
    if not xml:
        for a in _ATTR_ONE.finditer(m[2]):
            if a[2] and a[2][0] in "\"'" and re.search(r"<[A-Za-z/!]", a[2]):
                raise error(lt, f"the value of {a[1]} holds markup, so its quote is never closed where "
                                f"meant: {text[lt:lt + 40]!r}")
    return Token("start", lt, m.end(), _local(m[1]), bool(m[3]))


def _bad_start(text: str, lt: int) -> str:
    """Why the start tag at ``lt`` is no tag, in a few words."""
    part = _START_PART.match(text, lt)
    rest = text[part.end():] if part else ""
    if re.match(r"""(?:[^\s"'>/=]+)?\s*=\s*["']|["']""", rest):
        return f"an attribute's quote is never closed: {text[lt:lt + 40]!r}"
    return f"a tag that does not end: {text[lt:lt + 40]!r}"


def _local(name: str) -> str:
    return name.rsplit(":", 1)[-1].lower()


class Attr(NamedTuple):
    """An attribute of a start tag's source: its name (lower case), its value as written (quotes
    off), and the value's span in the tag, quotes included (an empty span after the name for an
    attribute written without a value)."""

    name: str
    value: str
    span: tuple[int, int]


def attributes(tag: str) -> list[Attr]:
    """The attributes of a start tag's source, in order."""
    m = _START.match(tag)
    if m is None:
        return []
    found = []
    for a in _ATTR_ONE.finditer(tag, m.start(2), m.end(2)):
        value = a[2] or ""
        span = a.span(2) if a[2] else (a.end(1), a.end(1))
        found.append(Attr(a[1].lower(), value[1:-1] if value[:1] in "\"'" else value, span))
    return found


def with_attributes(tag: str, attrs: dict[str, str]) -> str:
    """The start tag ``tag`` with each attribute of ``attrs`` set: its value replaced in place (its
    quotes kept), or added before the tag's end: an edit of the tag's source that keeps every other
    byte, whatever the attributes' order and quotes (a regex over the tag would match one order)."""
    found = {a.name: a for a in attributes(tag)}
    edits = []
    added = []
    for name, value in attrs.items():
        a = found.get(name.lower())
        if a is not None and a.span[0] < a.span[1]:
            quote = tag[a.span[0]] if tag[a.span[0]] in "\"'" else '"'
            edits.append((a.span[0], a.span[1], f"{quote}{value}{quote}"))
        elif a is None:
            added.append(f' {name}="{value}"')
    end = re.search(r"\s*/?>$", tag).start()  # type: ignore[union-attr]
    if added:
        edits.append((end, end, "".join(added)))
    for start, stop, new in sorted(edits, reverse=True):
        tag = tag[:start] + new + tag[stop:]
    return tag


@dataclass
class Node:
    """An element: its start token's index, its end tag's (None where it has none: void, self-closed,
    or ended by implication), its attributes (name to value as written) and its children in order
    (elements, and the indices of the other tokens)."""

    name: str
    start: int
    end: int | None = None
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | int] = field(default_factory=list)
    empty: bool = False  # void or self-closed: it has no content


#: implied ends (HTML's tree construction, simplified): a start tag of the key closes an open element
#: of the first set, searched from the innermost, up to one of the second set
_IMPLIES = {
    "li": ({"li"}, {"ul", "ol", "menu"}),
    "dt": ({"dt", "dd"}, {"dl"}), "dd": ({"dt", "dd"}, {"dl"}),
    "tr": ({"tr", "td", "th"}, {"table", "thead", "tbody", "tfoot"}),
    "td": ({"td", "th"}, {"tr", "table"}), "th": ({"td", "th"}, {"tr", "table"}),
    "thead": ({"thead", "tbody", "tfoot", "tr", "td", "th"}, {"table"}),
    "tbody": ({"thead", "tbody", "tfoot", "tr", "td", "th"}, {"table"}),
    "tfoot": ({"thead", "tbody", "tfoot", "tr", "td", "th"}, {"table"}),
    "option": ({"option"}, {"select", "datalist", "optgroup"}),
    "optgroup": ({"option", "optgroup"}, {"select"}),
    "body": ({"head"}, {"html"}),
}
#: start tags that end an open <p>
_CLOSES_P = frozenset((
    "address", "article", "aside", "blockquote", "details", "dialog", "div", "dl", "dd", "dt", "fieldset",
    "figcaption", "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hgroup", "hr",
    "li", "main", "menu", "nav", "ol", "p", "pre", "section", "table", "ul",
))


def build(tokens: list[Token], text: str, xml: bool, phrasing: frozenset[str]) -> Node:
    """The elements of the page below a root made here (name ""); ``phrasing``: the inline elements an
    implied ``</p>`` may be searched through."""
    root = Node("", -1)
    stack = [root]
    for i, tok in enumerate(tokens):
        if tok.kind == "start":
            if not xml:
                _imply_ends(stack, tok.name, phrasing)
            source = text[tok.start:tok.end]
            node = Node(tok.name, i, attrs={a.name: a.value for a in attributes(source)},
                        empty=tok.closed or (not xml and tok.name in VOID))
            stack[-1].children.append(node)
            if not node.empty:
                stack.append(node)
        elif tok.kind == "end":
            k = next((k for k in range(len(stack) - 1, 0, -1) if stack[k].name == tok.name), 0)
            if k:
                stack[k].end = i
                del stack[k:]
            else:
                stack[-1].children.append(i)  # a stray end tag: left where it is
        else:
            stack[-1].children.append(i)
    return root


def _imply_ends(stack: list[Node], name: str, phrasing: frozenset[str]) -> None:
    if name in _CLOSES_P:
        for k in range(len(stack) - 1, 0, -1):
            if stack[k].name == "p":
                del stack[k:]
                break
            if stack[k].name not in phrasing:
                break
    if name in _IMPLIES:
        closes, scope = _IMPLIES[name]
        for k in range(len(stack) - 1, 0, -1):
            if stack[k].name in closes:
                del stack[k:]
                break
            if stack[k].name in scope:
                break


def check_html(text: str, name: str) -> None:
    """Refuse a mismatched end tag (``<b>x</i>``, ``<p>a <b>x</p>``) in one line naming its line:
    libxml2's HTML parser finds them as browsers would misread them."""
    parser = lxml_html.HTMLParser(recover=True)
    whole = bool(re.match(r"\s*(?:<!--.*?-->\s*)*<(?:!doctype|html)\b", text, re.I | re.S))
    try:
        if whole:
            lxml_html.document_fromstring(text, parser=parser)
        else:
            lxml_html.fragment_fromstring(text, create_parent="div", parser=parser)
    except (etree.ParserError, ValueError):
        return  # nothing but whitespace or comments: nothing mismatched either
    for error in parser.error_log:
        if error.type_name == "ERR_TAG_NAME_MISMATCH":
            raise DataError(f"{name}:{error.line}: {error.message.strip()}")


def xml_problem(text: str) -> tuple[int, str] | None:
    """Where and why ``text`` is not well-formed XML (a fragment of several elements is read inside a
    root of its own), None where it is. Entities are not resolved and no DTD is read."""
    body = text.lstrip("\ufeff")
    whole = bool(re.match(r"\s*<\?xml", body)) or "<!DOCTYPE" in body
    parser = etree.XMLParser(encoding="utf-8", resolve_entities=False, no_network=True, load_dtd=False,
                             huge_tree=True)
    source = body if whole else f"<x-root>{body}</x-root>"
    try:
        etree.fromstring(source.encode("utf-8"), parser)
    except etree.XMLSyntaxError as exc:
        return exc.lineno or 1, exc.msg.rsplit(", line", 1)[0]
    return None

