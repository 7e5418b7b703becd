"""EPUB books (.epub): each XHTML content document translated as an XHTML page (formats/xml/html.py, the
path `translate_page` takes), the navigation titles of the NCX (EPUB 2's table of contents), the
package's ``<dc:language>`` set to the target; every other file of the book byte for byte
(formats/zipped/ziparts.py), the ``mimetype`` entry first and stored, as the OCF container requires.

The content documents are the manifest's ``application/xhtml+xml`` items, the navigation document
(EPUB 3's table of contents) among them. Kept: the book's title and other metadata, stylesheets,
images, fonts, SVG, and any content document listed in META-INF/encryption.xml (protected by DRM, so
its bytes are no XHTML; refused with a line naming it).
"""

from __future__ import annotations

import posixpath
import re
from urllib.parse import unquote

from lxml import etree

from mtkit.errors import DataError
from mtkit.formats.documents import DocumentJob, DocumentResult
from mtkit.formats.xml import html, markup
from mtkit.formats.xml.xml_dialects import Dialect
from mtkit.formats.xml.xml_runs import Part, translate_parts
from mtkit.formats.zipped.ziparts import Package, open_package

#: an NCX's titles: the text of each navigation label and of the book's title there
NCX = Dialect("plain", paragraphs=frozenset({"text", "ncx:text"}),
              within=frozenset({"navLabel", "docTitle", "ncx:navLabel", "ncx:docTitle"}))
_SAFE = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
_OPF = "{http://www.idpf.org/2007/opf}"


def translate_epub(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """An EPUB book (see the module docstring)."""
    package = open_package(data, name, "EPUB book (.epub)", "META-INF/container.xml")
    media = package.read("mimetype").decode("ascii", "replace").strip() if "mimetype" in package.names else ""
    if media != "application/epub+zip":
        raise DataError(f"{name}: not an EPUB book (.epub): its mimetype is {media or 'missing'!r}")
    opf_path = _rootfile(package, name)
    items = _manifest(package, name, opf_path)
    encrypted = package.read("META-INF/encryption.xml").decode("utf-8", "replace") \
        if "META-INF/encryption.xml" in package.names else ""
    changed: dict[str, bytes] = {}
    runs = translated = 0
    left: list[str] = []
    for path, media_type in items:
        if media_type != "application/xhtml+xml":
            continue
        if path in encrypted:
            raise DataError(f"{name}:{path}: encrypted (META-INF/encryption.xml): a book with DRM")
        raw = package.read(path)
        out, page = html.translate_page_bytes(raw, f"{name}:{path}", job.strings, job.tgt_lang)
        runs, translated, left = runs + page.runs, translated + page.translated, left + page.left
        if out != raw:
            changed[path] = out
    for path, media_type in items:
        if media_type == "application/x-dtbncx+xml":
            text, encoding = markup.decode(package.read(path), f"{name}:{path}", True)
            [(out, report)] = translate_parts([Part(text, f"{name}:{path}", NCX)], job.strings, job.tgt_lang)
            runs, translated, left = runs + report.runs, translated + report.translated, left + report.left
            if out != text:
                changed[path] = encoding.encode(out)
    if job.tgt_lang:
        text, encoding = markup.decode(package.read(opf_path), f"{name}:{opf_path}", True)
        lang = job.tgt_lang.replace("_", "-")
        new = re.sub(r"(<dc:language\b[^>]*>)[^<]*(</dc:language>)", rf"\g<1>{lang}\g<2>", text)
        if new != text:
            changed[opf_path] = encoding.encode(new)
    summary = (f"{name}: {translated} of {runs} text runs translated, {len(left)} left as they were")
    return DocumentResult(package.rewritten(changed, first_stored="mimetype"), left, summary)


def _rootfile(package: Package, name: str) -> str:
    """The package document's path, from META-INF/container.xml."""
    try:
        root = etree.fromstring(package.read("META-INF/container.xml"), _SAFE)
    except etree.XMLSyntaxError as exc:
        raise DataError(f"{name}:META-INF/container.xml: not well-formed XML: {exc.msg}") from None
    found = root.find(".//{urn:oasis:names:tc:opendocument:xmlns:container}rootfile")
    path = found.get("full-path", "") if found is not None else ""
    if path not in package.names:
        raise DataError(f"{name}: not an EPUB book (.epub): its container names no package document "
                        f"it holds ({path or 'none'})")
    return path


def _manifest(package: Package, name: str, opf_path: str) -> list[tuple[str, str]]:
    """The manifest's items that the book holds: (path in the archive, media type), in order."""
    try:
        root = etree.fromstring(package.read(opf_path), _SAFE)
    except etree.XMLSyntaxError as exc:
        raise DataError(f"{name}:{opf_path}: not well-formed XML: {exc.msg}") from None
    base = posixpath.dirname(opf_path)
    items = []
    for item in root.iter(f"{_OPF}item"):
        href = unquote(item.get("href", "").split("#", 1)[0])
        path = posixpath.normpath(posixpath.join(base, href)) if href else ""
        if path in package.names:
            items.append((path, item.get("media-type", "")))
    return items
