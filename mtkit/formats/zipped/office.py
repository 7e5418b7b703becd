"""Office Open XML documents (.docx, .pptx, .xlsx): the text of their paragraphs translated with each
run's formatting kept (formats/xml/xml_runs.py), every other part of the package byte for byte
(formats/zipped/ziparts.py).

Translated parts:

- Word: the body (``word/document.xml``, text boxes and tables in it), headers, footers, footnotes,
  endnotes, comments, and SmartArt text (``word/diagrams``). The language marks of translated runs
  (``<w:lang w:val>``) and the document's default language (``<w:docDefaults>`` in styles.xml) are set
  to the target, so that a spelling checker reads the text as the target language.
- PowerPoint: slides, speaker notes and SmartArt text; the ``lang`` of translated runs set to the
  target. Slide layouts and masters are kept: their text is the prompts a slide's empty placeholders
  show while editing ("Click to add title"), never shown in the presentation, and a layout is shared by
  every slide made from it.
- Excel: the shared strings (``xl/sharedStrings.xml``, plain and rich text), inline strings in the
  sheets and cell comments. Never formulas, numbers, sheet names, defined names or the column names of
  tables (and the strings equal to one, which the header cells must repeat): a formula is code, and a
  sheet's or column's name is what formulas, charts and other workbooks refer to it by, so renaming it
  breaks them.

Chart text (titles and the categories cached from their workbook) is kept: a chart's categories come
from its embedded workbook, and translating its titles alone would leave it half in each language.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from lxml import etree

from mtkit.errors import DataError
from mtkit.formats.documents import DocumentJob, DocumentResult
from mtkit.formats.xml import markup
from mtkit.formats.xml.xml_dialects import Dialect
from mtkit.formats.xml.xml_runs import translate_package_parts
from mtkit.formats.zipped.ziparts import Package, open_package

WORD = Dialect(
    "word", paragraphs=frozenset({"w:p"}), runs=frozenset({"w:r"}), run_props=frozenset({"w:rPr"}),
    texts=frozenset({"w:t"}),
    wrappers=frozenset({"w:hyperlink", "w:ins", "w:moveTo", "w:smartTag", "w:customXml", "w:sdt",
                        "w:sdtContent", "w:dir", "w:bdo"}),
    links=frozenset({"w:hyperlink"}), dropped=frozenset({"w:proofErr", "w:lastRenderedPageBreak"}),
    breaks=(("w:tab", "\t"), ("w:br", "\n"), ("w:cr", "\n")), text_tag="w:t")
DRAWING = Dialect("drawing", paragraphs=frozenset({"a:p"}), runs=frozenset({"a:r"}),
                  run_props=frozenset({"a:rPr"}), texts=frozenset({"a:t"}), breaks=(("a:br", "\n"),),
                  text_tag="a:t")
_SHEET = {"runs": frozenset({"r", "x:r"}), "run_props": frozenset({"rPr", "x:rPr"}),
          "texts": frozenset({"t", "x:t"}), "text_tag": "t"}
SHARED_STRINGS = Dialect("sheet", paragraphs=frozenset({"si", "x:si"}), **_SHEET)  # type: ignore[arg-type]
INLINE_STRINGS = Dialect("sheet", paragraphs=frozenset({"is", "x:is"}), **_SHEET)  # type: ignore[arg-type]
CELL_COMMENTS = Dialect("sheet", paragraphs=frozenset({"text", "x:text"}), **_SHEET)  # type: ignore[arg-type]

_WORD_PARTS = re.compile(r"word/(?:header\d*|footer\d*|footnotes|endnotes|comments)\.xml")
_DIAGRAMS = r"(?:diagrams/(?:data|drawing)\d+\.xml)"
def _main_part(package: Package, default: str) -> str:
    """The main part named by the package's relationships (``_rels/.rels``, read by an XML parser: its
    attributes in any order, quoted either way), else ``default``."""
    if "_rels/.rels" in package.names:
        try:
            root = etree.fromstring(package.read("_rels/.rels"), etree.XMLParser(resolve_entities=False,
                                                                                 no_network=True))
        except etree.XMLSyntaxError:
            return default
        for rel in root.iter("{*}Relationship", "Relationship"):
            if rel.get("Type", "").endswith("/officeDocument"):
                target = rel.get("Target", "").lstrip("/")
                if target in package.names:
                    return target
    return default


def translate_docx(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """A Word document (see the module docstring)."""
    package = open_package(data, name, "Word document (.docx)", "[Content_Types].xml")
    main = _main_part(package, "word/document.xml")
    if main not in package.names or not main.startswith("word/"):
        raise DataError(f"{name}: not a Word document (.docx): it has no word/document.xml"
                        + _what(package))
    chosen = [(main, WORD)] + [(p, WORD) for p in package.names if _WORD_PARTS.fullmatch(p)]
    chosen += [(p, DRAWING) for p in package.names if re.fullmatch(f"word/{_DIAGRAMS}", p)]
    return _translate(package, name, job, chosen, _styles_lang if job.tgt_lang else None)


def translate_pptx(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """A PowerPoint presentation (see the module docstring)."""
    package = open_package(data, name, "PowerPoint presentation (.pptx)", "[Content_Types].xml")
    if _main_part(package, "ppt/presentation.xml") not in package.names:
        raise DataError(f"{name}: not a PowerPoint presentation (.pptx): it has no ppt/presentation.xml"
                        + _what(package))
    pattern = re.compile(rf"ppt/(?:slides/slide\d+|notesSlides/notesSlide\d+)\.xml|ppt/{_DIAGRAMS}")
    chosen = [(p, DRAWING) for p in _natural(package.names) if pattern.fullmatch(p)]
    return _translate(package, name, job, chosen)


def translate_xlsx(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """An Excel workbook (see the module docstring)."""
    package = open_package(data, name, "Excel workbook (.xlsx)", "[Content_Types].xml")
    if _main_part(package, "xl/workbook.xml") not in package.names:
        raise DataError(f"{name}: not an Excel workbook (.xlsx): it has no xl/workbook.xml" + _what(package))
    chosen = [(p, SHARED_STRINGS) for p in package.names if p == "xl/sharedStrings.xml"]
    chosen += [(p, INLINE_STRINGS) for p in _natural(package.names)
               if re.fullmatch(r"xl/worksheets/sheet\d+\.xml", p) and b"inlineStr" in package.read(p)]
    chosen += [(p, CELL_COMMENTS) for p in _natural(package.names) if re.fullmatch(r"xl/comments\d+\.xml", p)]
    return _translate(package, name, job, chosen, keep=_table_columns(package))


def _table_columns(package: Package) -> frozenset[str]:
    """The column names of the workbook's tables: their header cells must say them, and formulas
    refer to them (``Table1[Price]``), so the strings that are one stay as they are."""
    names = set()
    for part in package.names:
        if re.fullmatch(r"xl/tables/table\d+\.xml", part):
            text = package.read(part).decode("utf-8", "replace")
            found = re.findall(r'<(?:\w+:)?tableColumn\b[^>]*?\sname="([^"]*)"', text)
            names.update(html.unescape(m) for m in found)
    return frozenset(names)


def _natural(names: list[str]) -> list[str]:
    """Part names in their numbers' order (slide2 before slide10)."""
    return sorted(names, key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)])


def _what(package: Package) -> str:
    from mtkit.formats.zipped.ziparts import package_kind

    found = package_kind(package)
    return f" (it is {found})" if found else ""


def _translate(package: Package, name: str, job: DocumentJob, chosen: list[tuple[str, Dialect]],
               extra: Callable[[str, str], str] | None = None, keep: frozenset[str] = frozenset()
               ) -> DocumentResult:
    """The chosen parts translated in one batch (a paragraph whose text is in ``keep`` left as it
    is), the package written again with them (and with ``extra`` applied to styles.xml where a
    paragraph was translated)."""
    changed, total = translate_package_parts(package.read, name, chosen, job.strings, job.tgt_lang, keep)
    if extra is not None and changed and "word/styles.xml" in package.names:
        text, encoding = markup.decode(package.read("word/styles.xml"), f"{name}:word/styles.xml", True)
        styled = extra(text, job.tgt_lang)
        if styled != text:
            changed["word/styles.xml"] = encoding.encode(styled)
    summary = (f"{name}: {total.translated} of {total.runs} paragraphs translated, "
               f"{len(total.left)} left as they were")
    return DocumentResult(package.rewritten(changed), total.left, summary)


def _styles_lang(styles: str, tgt_lang: str) -> str:
    """styles.xml with the document's default language (``<w:docDefaults>``) set to the target."""
    lang = tgt_lang.replace("_", "-")

    def defaults(m: re.Match[str]) -> str:  # each <w:lang …> that names a language, in either quotes
        def one(tag: re.Match[str]) -> str:
            has_val = any(a.name == "w:val" for a in markup.attributes(tag[0]))
            return markup.with_attributes(tag[0], {"w:val": lang}) if has_val else tag[0]
        return re.sub(r"<w:lang\b[^>]*>", one, m[0])

    return re.sub(r"<w:docDefaults\b.*?</w:docDefaults>", defaults, styles, count=1, flags=re.S)
