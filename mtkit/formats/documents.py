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
#: the accelerator marks of gettext catalogs: GTK's _, Qt's and KDE's &, LibreOffice's ~
CATALOG_ACCELERATORS = "_&~"


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
    """A translated document: its text, what could not be translated (file:line: why), a summary."""

    text: str
    left: list[str] = field(default_factory=list)
    summary: str = ""


def translate_document(text: str, name: str, fmt: Format, tgt_lang: str, plain: TranslateFn,
                       constrained: ConstrainedFn | None = None, retranslate: bool = False,
                       fuzzy: bool = True) -> DocumentResult:
    """``text`` (the contents of ``name``) translated as a catalog or an HTML page with ``plain`` (and
    ``constrained`` for the retries: formats.placeholders; ``search_functions`` makes both of a
    Translator)."""
    from mtkit.formats import html, po  # here: lxml and the catalog reader cost a plain-text run ~40 ms

    if fmt == "po":
        catalog = po.read_catalog(text, name)
        strings = partial(translate_strings, translate=plain, constrained=constrained,
                          accelerators=CATALOG_ACCELERATORS)
        report = po.translate_catalog(catalog, name, strings, tgt_lang, retranslate, fuzzy)
        summary = (f"{name}: {report.translated} of {report.entries} entries translated"
                   f"{' (fuzzy)' if fuzzy and report.translated else ''}, {report.already} kept, "
                   f"{len(report.left)} left untranslated")
        return DocumentResult(po.write_catalog(catalog, text, report), report.left, summary)
    if fmt == "html":
        root, whole = html.parse_page(text, name)
        strings = partial(translate_strings, translate=plain, constrained=constrained)
        page = html.translate_page(root, name, strings)
        summary = (f"{name}: {page.translated} of {page.runs} text runs translated, "
                   f"{len(page.left)} left as they were")
        return DocumentResult(html.page_text(root, whole, text), page.left, summary)
    raise ConfigError(f"format {fmt!r} is not a document format (po, html)")
