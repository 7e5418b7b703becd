"""A whole file of one format translated: which format a path is, and the text of the translated file
with its report, for `mtkit translate --format`, the server's /translate_file and the Python API.

A document is read whole and written whole (the caller writes it to a temporary file and renames it),
so a failure leaves nothing behind; entries or runs that could not be translated safely stay as they
were and come back as report lines ("file:line: why") for the caller to show.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from mtkit.errors import ConfigError
from mtkit.formats.text.charsets import check_encoding
from mtkit.placeholders.strings import ConstrainedFn, Outcome, TranslateFn, placed_by_guess, translate_strings

#: A format name (a key of HANDLERS), or "text" for plain lines
Format = str


@dataclass(frozen=True)
class DocumentJob:
    """What a format's translate function gets besides the file's bytes: the target language, the two
    translation functions of formats.placeholders (``plain`` for whole strings, ``constrained`` for the
    retries; `mtkit.decode.formats_adapter.search_functions` makes both of a Translator), and the
    options some formats read (catalogs: ``retranslate``, ``fuzzy``)."""

    tgt_lang: str
    plain: TranslateFn
    constrained: ConstrainedFn | None = None
    retranslate: bool = False
    fuzzy: bool = True
    encoding: str = ""  # the charset of a file that does not say its own (text, SubRip): --encoding
    src_lang: str = ""  # the language the file is in: its legacy charset is tried (formats/text/charsets.py)
    writable: str = ""  # the legacy charset the file is written back in: translations it cannot write fail
    guessed: list[int] = field(default_factory=list)  # per call of strings: placements guessed

    def strings(self, texts: list[str], **kwargs: object) -> list[Outcome]:
        """``texts`` translated with every placeholder and inline tag kept (formats.placeholders), each
        an Outcome whose ``text`` is None where it could not be (left as it was, with the reason). The
        strings whose placeholders were put by guessed position are counted (``guessed``): the summary
        asks for their review."""
        outcomes = translate_strings(texts, self.plain, self.constrained, **kwargs)  # type: ignore[arg-type]
        if self.writable:
            outcomes = [_writable(o, self.writable) for o in outcomes]
        self.guessed.append(sum(o.text is not None and placed_by_guess(o) for o in outcomes))
        return outcomes


def _writable(outcome: Outcome, codec: str) -> Outcome:
    """The outcome, or a failed one where its translation has a character ``codec`` cannot write."""
    if outcome.text is None:
        return outcome
    try:
        outcome.text.encode(codec)
    except UnicodeEncodeError as exc:
        return Outcome(None, f"the translation has a character the file's charset ({codec}) cannot write: "
                             f"{exc.object[exc.start:exc.end]!r}")
    return outcome


@dataclass
class DocumentResult:
    """A translated document: its bytes (in the input's encoding, line endings and BOM), what could not
    be translated (file:line: why), a summary."""

    data: bytes
    left: list[str] = field(default_factory=list)
    summary: str = ""
    guessed: int = 0  # strings whose placeholders were put by guessed position: to review


Translate = Callable[[bytes, str, DocumentJob], DocumentResult]


@dataclass(frozen=True)
class Handler:
    """One document format: the module and function that translate it (imported on first use, so a
    plain-text run never pays for a zip or XML reader), the extensions it is recognised by, its media
    type (the server's downloads) and what it is, for --help and the docs."""

    module: str
    function: str
    suffixes: tuple[str, ...]
    media_type: str
    title: str

    def load(self) -> Translate:
        return getattr(importlib.import_module(self.module), self.function)


#: Every document format, by the name --format takes. Each function has the signature ``Translate``:
#: (bytes of the file, its name for messages, the job) -> DocumentResult.
HANDLERS: dict[str, Handler] = {
    "text": Handler("mtkit.formats.text.plaintext", "translate_text", (".txt",), "text/plain", "plain text"),
    "po": Handler("mtkit.formats.documents", "translate_catalog", (".po", ".pot"),
                  "text/x-gettext-translation", "gettext catalog"),
    "html": Handler("mtkit.formats.documents", "translate_page", (".html", ".htm", ".xhtml"), "text/html",
                    "HTML/XHTML page"),
    "srt": Handler("mtkit.formats.captions.subtitles", "translate_srt", (".srt",), "application/x-subrip",
                   "SubRip subtitles"),
    "vtt": Handler("mtkit.formats.captions.subtitles", "translate_vtt", (".vtt",), "text/vtt",
                   "WebVTT subtitles"),
    "xliff": Handler("mtkit.formats.interchange.xliff", "translate_xliff", (".xlf", ".xliff"),
                     "application/xliff+xml", "XLIFF 1.2/2.0"),
    "docx": Handler("mtkit.formats.zipped.office", "translate_docx", (".docx",),
                    "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
                    "Word document"),
    "pptx": Handler("mtkit.formats.zipped.office", "translate_pptx", (".pptx",),
                    "application/vnd.openxmlformats-officedocument.presentationml.presentation",
                    "PowerPoint presentation"),
    "xlsx": Handler("mtkit.formats.zipped.office", "translate_xlsx", (".xlsx",),
                    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", "Excel workbook"),
    "odt": Handler("mtkit.formats.zipped.opendocument", "translate_odt", (".odt",),
                   "application/vnd.oasis.opendocument.text", "OpenDocument text"),
    "odp": Handler("mtkit.formats.zipped.opendocument", "translate_odp", (".odp",),
                   "application/vnd.oasis.opendocument.presentation", "OpenDocument presentation"),
    "epub": Handler("mtkit.formats.zipped.epub", "translate_epub", (".epub",), "application/epub+zip",
                    "EPUB book"),
}
#: the formats whose files do not say their charset: --encoding applies to them
ENCODING_FORMATS = ("text", "srt")
#: what --format takes; "text" is translated line by line by `mtkit translate` (mtkit.translate.lines),
#: and as one document by the server and the Python API
FORMATS: tuple[str, ...] = ("auto", *HANDLERS)
_BY_SUFFIX = {suffix: name for name, handler in HANDLERS.items() for suffix in handler.suffixes}


def document_format(path: str, given: str) -> Format:
    """The format of ``path``: ``given``, or by its extension for "auto" (text when it has none that
    names a format, and for stdin)."""
    if given not in FORMATS:
        raise ConfigError(f"--format {given!r}: expected one of {', '.join(FORMATS)}")
    if given != "auto":
        return given
    name = path[:-3] if path.endswith(".gz") else path
    return _BY_SUFFIX.get(Path(name).suffix.lower(), "text")


def translate_document(data: bytes, name: str, fmt: Format, tgt_lang: str, plain: TranslateFn,
                       constrained: ConstrainedFn | None = None, retranslate: bool = False,
                       fuzzy: bool = True, encoding: str = "", src_lang: str = "") -> DocumentResult:
    """``data`` (the bytes of ``name``) translated as a document of format ``fmt`` (a key of HANDLERS)
    with ``plain`` (and ``constrained`` for the retries: formats.placeholders). Bytes in, bytes out:
    what is not translated comes back byte for byte. ``encoding``: the charset of a text or SubRip file
    (the others say their own); ``src_lang``: the language of the file, whose legacy charset is tried
    where such a file is not UTF-8."""
    handler = HANDLERS.get(fmt)
    if handler is None:
        raise ConfigError(f"format {fmt!r} is not a document format ({', '.join(HANDLERS)})")
    if encoding and fmt not in ENCODING_FORMATS:
        raise ConfigError(f"--encoding applies to {' and '.join(ENCODING_FORMATS)} files, which do not say "
                          f"their charset; {fmt} files say their own or are UTF-8 by definition")
    job = DocumentJob(tgt_lang, plain, constrained, retranslate, fuzzy, check_encoding(encoding) if encoding
                      else "", src_lang)
    result = handler.load()(data, name, job)
    guessed = result.guessed or sum(job.guessed)  # a format that translates strings itself counts them
    if guessed:  # the CLI prints the summary, the server returns it: either way the user is told
        result.summary += (f"; {guessed} string{'s' if guessed > 1 else ''} with placeholders put by "
                           "guessed position (marked for review where the format can say so)")
        result.guessed = guessed
    return result


def translate_catalog(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """A gettext catalog (formats/gettext/po.py)."""
    from mtkit.formats.gettext import po  # here: a plain-text run never pays for the catalog reader

    out, report = po.translate_catalog_bytes(data, name, job.plain, job.constrained, job.tgt_lang,
                                             job.retranslate, job.fuzzy)
    summary = (f"{name}: {report.translated} of {report.entries} entries translated"
               f"{' (fuzzy)' if job.fuzzy and report.translated else ''}, {report.already} kept, "
               f"{len(report.left)} left untranslated")
    return DocumentResult(out, report.warnings + report.left, summary, guessed=len(report.guessed))


def translate_page(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """An HTML or XHTML page (formats/xml/html.py)."""
    from mtkit.formats.xml import html

    out, page = html.translate_page_bytes(data, name, job.strings, job.tgt_lang)
    summary = (f"{name}: {page.translated} of {page.runs} text runs translated, "
               f"{len(page.left)} left as they were")
    return DocumentResult(out, page.left, summary)


def translate_html_text(text: str, name: str, tgt_lang: str, plain: TranslateFn,
                        constrained: ConstrainedFn | None = None) -> str:
    """An HTML page or fragment given as text (the server's ``format: html``), translated as
    ``translate_document`` translates a page file; the text out."""
    from mtkit.formats.xml import html

    strings = partial(translate_strings, translate=plain, constrained=constrained)
    return html.translate_page_text(text, name, strings, tgt_lang)[0]
