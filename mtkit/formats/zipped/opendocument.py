"""OpenDocument text and presentations (.odt, .odp): the text of their paragraphs translated with the
formatting of their spans kept (formats/xml/xml_runs.py), every other part of the package byte for byte
(formats/zipped/ziparts.py).

Translated: every ``<text:p>`` and ``<text:h>`` of content.xml (the body, tables, lists, text boxes
and frames, a presentation's slides and notes) with its ``<text:span>`` and ``<text:a>`` kept as tags,
``<text:s/>`` as spaces, ``<text:tab/>`` and ``<text:line-break/>`` as breaks; the paragraphs of notes
(``<text:note>``) and comments (``<office:annotation>``) inside a paragraph translated as paragraphs of
their own, their place in it kept. In a text document, also the headers and footers of styles.xml. A
presentation's master pages are kept (their text is the prompts of empty placeholders, never shown).
The document's default language (``fo:language``/``fo:country`` of the default styles in styles.xml)
and meta.xml's ``<dc:language>`` are set to the target.
"""

from __future__ import annotations

import re
from dataclasses import replace

from mtkit.errors import DataError
from mtkit.formats.documents import DocumentJob, DocumentResult
from mtkit.formats.xml import markup
from mtkit.formats.xml.xml_dialects import Dialect
from mtkit.formats.xml.xml_runs import translate_package_parts
from mtkit.formats.zipped.ziparts import Package, open_package

ODF = Dialect("odf", paragraphs=frozenset({"text:p", "text:h"}),
              wrappers=frozenset({"text:span", "text:a", "text:meta", "text:ruby-base"}),
              links=frozenset({"text:a"}), dropped=frozenset({"text:soft-page-break"}),
              breaks=(("text:tab", "\t"), ("text:line-break", "\n")),
              spaces="text:s")
#: styles.xml: the paragraphs of headers and footers, nothing else (its master pages' other text is
#: a presentation's placeholder prompts)
ODF_HEADERS = replace(ODF, within=frozenset(
    {"style:header", "style:footer", "style:header-left", "style:footer-left", "style:header-first",
     "style:footer-first"}))
_MEDIA = {"odt": "application/vnd.oasis.opendocument.text",
          "odp": "application/vnd.oasis.opendocument.presentation"}


def translate_odt(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """An OpenDocument text (see the module docstring)."""
    return _translate(data, name, job, "odt", "OpenDocument text (.odt)")


def translate_odp(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """An OpenDocument presentation (see the module docstring)."""
    return _translate(data, name, job, "odp", "OpenDocument presentation (.odp)")


def _translate(data: bytes, name: str, job: DocumentJob, kind: str, what: str) -> DocumentResult:
    package = open_package(data, name, what, "content.xml")
    media = package.read("mimetype").decode("ascii", "replace").strip() if "mimetype" in package.names else ""
    if media != _MEDIA[kind]:
        raise DataError(f"{name}: not an {what}: its mimetype is {media or 'missing'!r}")
    chosen = [("content.xml", ODF)]
    if kind == "odt" and "styles.xml" in package.names:
        chosen.append(("styles.xml", ODF_HEADERS))
    changed, total = translate_package_parts(package.read, name, chosen, job.strings, job.tgt_lang)
    if changed and job.tgt_lang:
        _set_language(package, name, job.tgt_lang, changed)
    summary = (f"{name}: {total.translated} of {total.runs} paragraphs translated, "
               f"{len(total.left)} left as they were")
    return DocumentResult(package.rewritten(changed), total.left, summary)


def _set_language(package: Package, name: str, tgt_lang: str, changed: dict[str, bytes]) -> None:
    """The default styles' language and meta.xml's ``<dc:language>`` set to the target."""
    parts = tgt_lang.replace("_", "-").split("-")
    language = parts[0]
    country = next((p for p in parts[1:] if len(p) == 2 and p.isalpha()), "")
    for part_name in ("styles.xml", "meta.xml"):
        if part_name not in package.names:
            continue
        raw = changed.get(part_name, package.read(part_name))
        text, encoding = markup.decode(raw, f"{name}:{part_name}", True)
        if part_name == "styles.xml":
            def default(m: re.Match[str]) -> str:
                out = re.sub(r'(\sfo:language=")[^"]*(")', rf"\g<1>{language}\g<2>", m[0])
                return re.sub(r'(\sfo:country=")[^"]*(")', rf"\g<1>{country.upper() or 'none'}\g<2>", out)

            new = re.sub(r"<style:default-style\b.*?</style:default-style>", default, text, flags=re.S)
        else:
            new = re.sub(r"(<dc:language>)[^<]*(</dc:language>)", rf"\g<1>{'-'.join(parts)}\g<2>", text)
        if new != text:
            changed[part_name] = encoding.encode(new)
