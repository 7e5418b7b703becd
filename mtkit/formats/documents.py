"""A whole file of one format translated: which format a path is, and the text of the translated file
with its report, for `mtkit translate --format`, the server's /translate_file and the Python API.

A document is read whole and written whole (the caller writes it to a temporary file and renames it),
so a failure leaves nothing behind; entries or runs that could not be translated safely stay as they
were and come back as report lines ("file:line: why") for the caller to show.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal

from mtkit.errors import ConfigError
from mtkit.formats.placeholders import ConstrainedFn, TranslateFn, translate_strings

Format = Literal["text", "po", "html"]
FORMATS: tuple[str, ...] = ("auto", "text", "po", "html")
_BY_SUFFIX = {".po": "po", ".pot": "po", ".html": "html", ".htm": "html", ".xhtml": "html"}


def document_format(path: str, given: str) -> Format:
    """The format of ``path``: ``given``, or by its extension for "auto" (text when it has none that
    names a format, and for stdin)."""
    if given not in FORMATS:
        raise ConfigError(f"--format {given!r}: expected one of {', '.join(FORMATS)}")
    if given != "auto":
        return given  # type: ignore[return-value]
    name = path[:-3] if path.endswith(".gz") else path
    return _BY_SUFFIX.get(Path(name).suffix.lower(), "text")  # type: ignore[return-value]


@dataclass
class DocumentResult:
    """A translated document: its bytes (in the input's encoding, line endings and BOM), what could not
    be translated (file:line: why), a summary."""

    data: bytes
    left: list[str] = field(default_factory=list)
    summary: str = ""


def translate_document(data: bytes, name: str, fmt: Format, tgt_lang: str, plain: TranslateFn,
                       constrained: ConstrainedFn | None = None, retranslate: bool = False,
                       fuzzy: bool = True) -> DocumentResult:
    """``data`` (the bytes of ``name``) translated as a catalog or an HTML/XHTML page with ``plain`` (and
    ``constrained`` for the retries: formats.placeholders; `mtkit.decode.formats_adapter` makes both of
    a Translator). Bytes in, bytes out: what is not translated comes back byte for byte."""
    from mtkit.formats import html, po  # here: a plain-text run never pays for lxml and the catalog reader

    if fmt == "po":
        out, report = po.translate_catalog_bytes(data, name, plain, constrained, tgt_lang, retranslate, fuzzy)
        summary = (f"{name}: {report.translated} of {report.entries} entries translated"
                   f"{' (fuzzy)' if fuzzy and report.translated else ''}, {report.already} kept, "
                   f"{len(report.left)} left untranslated")
        return DocumentResult(out, report.warnings + report.left, summary)
    if fmt == "html":
        strings = partial(translate_strings, translate=plain, constrained=constrained)
        out, page = html.translate_page_bytes(data, name, strings, tgt_lang)
        summary = (f"{name}: {page.translated} of {page.runs} text runs translated, "
                   f"{len(page.left)} left as they were")
        return DocumentResult(out, page.left, summary)
    raise ConfigError(f"format {fmt!r} is not a document format (po, html)")


def translate_html_text(text: str, name: str, tgt_lang: str, plain: TranslateFn,
                        constrained: ConstrainedFn | None = None) -> str:
    """An HTML page or fragment given as text (the server's ``format: html``), translated as
    ``translate_document`` translates a page file; the text out."""
    from mtkit.formats import html

    strings = partial(translate_strings, translate=plain, constrained=constrained)
    return html.translate_page_text(text, name, strings, tgt_lang)[0]
