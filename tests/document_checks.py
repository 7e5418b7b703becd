"""Checks of a translated office document or book against its source, shared by the tests of
formats/zipped/office.py, opendocument.py, epub.py and bench/studies/documents.py:

- it reopens in its own library (python-docx, python-pptx, openpyxl, odfpy, ebooklib), with the same
  counts (paragraphs, tables, slides, cells, chapters) — ``counts``;
- every zip entry the translation did not touch is byte-equal, in the same order — ``untouched``;
- per paragraph, its text (letters, case and whitespace aside) and the formatting of each stretch of
  it are the source's: no text run lost, none invented, none moved to another formatting — read here
  with lxml straight from the parts, apart from the code under test — ``paragraph_shapes``.

An upper-casing stub model keeps every tag in place, so a document through it must keep its shapes
exactly; a model that reorders words keeps them as multisets.
"""

from __future__ import annotations

import io
import random
import re
import tempfile
import zipfile
from collections import Counter
from pathlib import Path

from lxml import etree

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)


def upper(lines: list[str]) -> list[str]:
    """A stub model: text upper-cased, tags and entities copied."""
    return [re.sub(r"(<[^>]*>|&#?\w+;)|([^<&]+)", lambda m: m[1] or m[2].upper(), s) for s in lines]


def hostile(seed: int):
    """A model that drops, repeats, reorders and invents tags and reverses the words."""
    rng = random.Random(seed)

    def model(lines):
        out = []
        for line in lines:
            tokens = re.findall(r"<[^>]+>|[^<\s]+|\s+", line)
            rng.shuffle(tokens) if rng.random() < 0.3 else None
            tokens = [t for t in tokens if not (t.startswith("<") and rng.random() < 0.2)]
            if rng.random() < 0.2:
                invented = rng.choice(["<x9/>", "<b>", "</i>", "<a2>", "<q/>"])
                tokens.insert(rng.randint(0, len(tokens)), invented)
            out.append("".join(tokens[::-1] if rng.random() < 0.5 else tokens))
        return out

    return model


def entries(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(info.filename, z.read(info)) for info in z.infolist()]


def untouched(source: bytes, out: bytes, translated: set[str], first: str = "") -> list[str]:
    """The entries of ``source`` not in ``translated`` that ``out`` does not hold byte for byte, in
    their place (names, order; ``first``: an entry that may have been moved to the front, EPUB's
    mimetype)."""
    before, after = entries(source), entries(out)
    names = [n for n, _ in before]
    if first and first in names:
        names = [first] + [n for n in names if n != first]
    problems = [] if names == [n for n, _ in after] else ["entry order or names differ"]
    got = dict(after)
    problems += [name for name, data in before if name not in translated and got.get(name) != data]
    return problems


def _letters(text: str) -> str:
    return re.sub(r"\s+", "", text).casefold()


def _norm_props(props: etree._Element | None) -> str:
    """Run properties less their language and spelling marks (a translation sets or drops them)."""
    if props is None:
        return ""
    copy = etree.fromstring(etree.tostring(props))
    for el in list(copy.iter()):
        if el.tag in (f"{W}lang", f"{W}noProof"):
            el.getparent().remove(el)
            continue
        for attr in ("lang", "altLang", "dirty", "err", "noProof"):
            el.attrib.pop(attr, None)
    return etree.tostring(copy, method="c14n").decode()


def paragraph_shapes(part: bytes, kind: str) -> list[list[tuple[str, str]]]:
    """Per paragraph of an XML part: its stretches of text as (formatting, letters), adjacent ones of
    one formatting merged, empty ones left out. ``kind``: word, drawing, sheet or odf."""
    root = etree.fromstring(part, _PARSER)
    shapes = []
    if kind == "odf":
        for p in root.iter(f"{TEXT}p", f"{TEXT}h"):
            stretches: list[tuple[str, str]] = []
            _odf_stretches(p, "", stretches)
            shapes.append(_merged(stretches))
        return shapes
    para, run, props, text = {"word": (f"{W}p", f"{W}r", f"{W}rPr", f"{W}t"),
                              "drawing": (f"{A}p", f"{A}r", f"{A}rPr", f"{A}t"),
                              "sheet": (f"{S}si", f"{S}r", f"{S}rPr", f"{S}t")}[kind]
    for p in root.iter(para):
        stretches = []
        for t in p.iter(text):
            owner = t.getparent()
            if owner.tag != run or _inside(owner, para) is not p:
                continue
            link = any(a.tag == f"{W}hyperlink" for a in owner.iterancestors())
            fmt = ("link:" if link else "") + _norm_props(owner.find(props))
            stretches.append((fmt, _letters(t.text or "")))
        for t in p.findall(text):  # a shared string's plain text
            stretches.append(("", _letters(t.text or "")))
        shapes.append(_merged(stretches))
    return shapes


def _inside(el: etree._Element, tag: str) -> etree._Element | None:
    return next((a for a in el.iterancestors() if a.tag == tag), None)


def _odf_stretches(el: etree._Element, style: str, out: list[tuple[str, str]]) -> None:
    out.append((style, _letters(el.text or "")))
    for child in el:
        if child.tag in (f"{TEXT}span", f"{TEXT}a"):
            inner = style + "/" + (child.get(f"{TEXT}style-name") or child.get("{http://www.w3.org/1999/xlink}href")
                                   or "")
            _odf_stretches(child, inner, out)
        out.append((style, _letters(child.tail or "")))


def _merged(stretches: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for fmt, letters in stretches:
        if not letters:
            continue
        if out and out[-1][0] == fmt:
            out[-1] = (fmt, out[-1][1] + letters)
        else:
            out.append((fmt, letters))
    return out


def counts(data: bytes, fmt: str) -> dict[str, object]:
    """What the format's own library reads in the document: the counts a translation must keep."""
    if fmt == "docx":
        import docx

        doc = docx.Document(io.BytesIO(data))
        return {"paragraphs": len(doc.paragraphs), "tables": len(doc.tables),
                "cells": sum(len(t._cells) for t in doc.tables),
                "headers": [len(s.header.paragraphs) + len(s.footer.paragraphs) for s in doc.sections],
                "runs": Counter(bool(r.text.strip()) for p in doc.paragraphs for r in p.runs)[True] > 0}
    if fmt == "pptx":
        import pptx

        prs = pptx.Presentation(io.BytesIO(data))
        return {"slides": len(prs.slides),
                "shapes": [len(s.shapes) for s in prs.slides],
                "paragraphs": [sum(len(sh.text_frame.paragraphs) for sh in s.shapes if sh.has_text_frame)
                               for s in prs.slides],
                "notes": [s.has_notes_slide and bool(s.notes_slide.notes_text_frame.text)
                          for s in prs.slides]}
    if fmt == "xlsx":
        import openpyxl

        book = openpyxl.load_workbook(io.BytesIO(data))
        return {"sheets": book.sheetnames,
                "cells": [(ws.title, c.coordinate, type(c.value).__name__,
                           c.value if not isinstance(c.value, str) or c.value.startswith("=") else "")
                          for ws in book.worksheets for row in ws.iter_rows() for c in row
                          if c.value is not None]}
    if fmt in ("odt", "odp"):
        from odf import draw, table, text
        from odf.opendocument import load

        doc = load(io.BytesIO(data))
        # spans are not counted: adjacent spans of one style come back as one (their formatting is
        # checked stretch by stretch by paragraph_shapes)
        return {kind.__name__: len(doc.getElementsByType(kind))
                for kind in (text.P, text.H, text.A, text.Note, table.TableCell, draw.Frame)}
    if fmt == "epub":
        from ebooklib import ITEM_DOCUMENT, epub

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "book.epub"
            path.write_bytes(data)
            book = epub.read_epub(str(path), {"ignore_ncx": False})
        return {"items": sorted(i.file_name for i in book.get_items()),
                "documents": len(list(book.get_items_of_type(ITEM_DOCUMENT))), "toc": len(book.toc),
                "spine": [s[0] for s in book.spine]}
    raise ValueError(fmt)
