"""Office Open XML documents (mtkit.formats.zipped.office on formats/xml/xml_runs.py and
formats/zipped/ziparts.py): each paragraph's runs are one string for the model with their formatting
as numbered tags, rebuilt with their own properties; every zip entry outside the translated parts comes
back byte for byte; each output reopens in its own library (python-docx, python-pptx, openpyxl) with
the same counts."""

from __future__ import annotations

import functools
import io
import re
import struct
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import docx
import openpyxl
import pptx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openpyxl.cell.rich_text import CellRichText, TextBlock
from openpyxl.cell.text import InlineFont

sys.path.insert(0, str(Path(__file__).parent))
from document_checks import counts, entries, hostile, paragraph_shapes, untouched, upper  # noqa: E402

from mtkit.errors import DataError  # noqa: E402
from mtkit.formats.documents import DocumentJob  # noqa: E402
from mtkit.formats.zipped.office import translate_docx, translate_pptx, translate_xlsx  # noqa: E402
from mtkit.placeholders.strings import translate_strings  # noqa: E402


def job(model=upper, calls: list | None = None, tgt: str = "de", rescue: bool = True) -> DocumentJob:
    def recording(lines):
        if calls is not None:
            calls.extend(lines)
        return model(lines)

    return DocumentJob(tgt, recording) if rescue else UnrescuedJob(tgt, recording)


@dataclass(frozen=True)
class UnrescuedJob(DocumentJob):
    """A job whose strings are not rescued by sentinels or position: what the model does alone."""

    def strings(self, texts, **kwargs):
        return translate_strings(texts, self.plain, rescue=False)


def replacing(old: str, new: str):
    return lambda lines: [new if s == old else upper([s])[0] for s in lines]


def saved(document) -> bytes:
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


@functools.cache
def word_document() -> bytes:
    d = docx.Document()
    d.add_heading("Saving your work", level=1)
    p = d.add_paragraph("Click ")
    p.add_run("Save").bold = True
    p.add_run(" and then ")
    p.add_run("close").italic = True
    p.add_run(" the window.")
    d.add_paragraph("Second paragraph & <more>.")
    table = d.add_table(rows=2, cols=2)
    table.cell(0, 0).text = "Name of the file"
    table.cell(1, 1).paragraphs[0].add_run("Bold cell").bold = True
    d.sections[0].header.paragraphs[0].text = "The header line"
    d.sections[0].footer.paragraphs[0].text = "The footer line"
    d.add_comment(p.runs[1], text="Check this word", author="A")
    return saved(d)


WORD_PARTS = {"word/document.xml", "word/header1.xml", "word/footer1.xml", "word/comments.xml",
              "word/styles.xml"}


def test_docx_paragraphs_tables_headers_footers_comments_translated_formatting_and_other_parts_kept():
    data = word_document()
    calls: list[str] = []
    result = translate_docx(data, "a.docx", job(calls=calls))
    assert "Click <x1/><b>Save</b><x2/> and then <i>close</i> the window." in calls
    assert {"Saving your work", "Second paragraph &amp; &lt;more&gt;.", "Name of the file", "Bold cell",
            "The header line", "The footer line", "Check this word"} <= set(calls)
    assert counts(result.data, "docx") == counts(data, "docx")
    assert untouched(data, result.data, WORD_PARTS) == []
    before, after = dict(entries(data)), dict(entries(result.data))
    assert {n for n in before if before[n] != after[n]} == WORD_PARTS
    for part in WORD_PARTS - {"word/styles.xml"}:
        assert paragraph_shapes(after[part], "word") == paragraph_shapes(before[part], "word")
    out = docx.Document(io.BytesIO(result.data))
    runs = [(r.text, r.bold, r.italic) for r in out.paragraphs[1].runs if r.text]
    assert runs == [("CLICK ", None, None), ("SAVE", True, None), (" AND THEN ", None, None),
                    ("CLOSE", None, True), (" THE WINDOW.", None, None)]
    assert out.paragraphs[2].text == "SECOND PARAGRAPH & <MORE>."
    assert out.sections[0].header.paragraphs[0].text == "THE HEADER LINE"
    assert out.tables[0].cell(0, 0).text == "NAME OF THE FILE"
    assert result.left == [] and result.summary == "a.docx: 8 of 8 paragraphs translated, 0 left as they were"


def test_runs_reordered_by_the_translation_keep_their_own_formatting():
    data = word_document()
    model = replacing("Click <x1/><b>Save</b><x2/> and then <i>close</i> the window.",
                      "Das Fenster <i>schließen</i>, vorher <x1/><b>Speichern</b><x2/> klicken.")
    result = translate_docx(data, "a.docx", job(model))
    paragraph = docx.Document(io.BytesIO(result.data)).paragraphs[1]
    assert [(r.text, r.bold, r.italic) for r in paragraph.runs if r.text] == [
        ("Das Fenster ", None, None), ("schließen", None, True), (", vorher ", None, None),
        ("Speichern", True, None), (" klicken.", None, None)]


BODY = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<w:document '
        'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"><w:body>{}'
        '<w:sectPr/></w:body></w:document>')


def with_body(paragraphs: str) -> bytes:
    """word_document() with its body replaced by ``paragraphs`` (raw WordprocessingML)."""
    source = io.BytesIO(word_document())
    out = io.BytesIO()
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            is_body = info.filename == "word/document.xml"
            zout.writestr(info, BODY.format(paragraphs).encode() if is_body else zin.read(info))
    return out.getvalue()


def document_xml(data: bytes) -> str:
    return dict(entries(data))["word/document.xml"].decode()


RICH = ('<w:p><w:pPr><w:pStyle w:val="Normal"/></w:pPr><w:bookmarkStart w:id="0" w:name="top"/>'
        '<w:r><w:rPr><w:lang w:val="en-US"/></w:rPr><w:t xml:space="preserve">Press </w:t></w:r>'
        '<w:proofErr w:type="spellStart"/><w:r><w:rPr><w:lang w:val="en-US"/></w:rPr>'
        '<w:lastRenderedPageBreak/><w:t>Ctrl</w:t></w:r>'
        '<w:proofErr w:type="spellEnd"/><w:r><w:rPr><w:lang w:val="en-US"/></w:rPr><w:tab/><w:t>then</w:t>'
        '<w:br/><w:t xml:space="preserve">see page </w:t></w:r>'
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGE </w:instrText></w:r>'
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>3</w:t></w:r>'
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>'
        '<w:r><w:t xml:space="preserve"> of the </w:t></w:r>'
        '<w:hyperlink r:id="rId9"><w:r><w:rPr><w:rStyle w:val="Hyperlink"/></w:rPr><w:t>manual</w:t></w:r>'
        '</w:hyperlink><w:r><w:t>.</w:t></w:r><w:bookmarkEnd w:id="0"/></w:p>')


def test_fields_bookmarks_tabs_breaks_links_and_spelling_marks_and_the_language_set_to_the_target():
    data = with_body(RICH)
    calls: list[str] = []
    result = translate_docx(data, "a.docx", job(calls=calls, tgt="de"))
    assert calls[:3] == ["Press Ctrl", "then", "see page <x/> of the <a>manual</a>."]  # cut at \t and \n
    out = document_xml(result.data)
    assert out.count('<w:bookmarkStart w:id="0" w:name="top"/>') == 1 and out.count('<w:bookmarkEnd') == 1
    assert "<w:proofErr" not in out and "<w:lastRenderedPageBreak" not in out
    assert ('<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> PAGE </w:instrText></w:r>'
            '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>3</w:t></w:r>'
            '<w:r><w:fldChar w:fldCharType="end"/></w:r>') in out  # the field whole, its result untranslated
    assert '<w:hyperlink r:id="rId9">' in out and 'MANUAL' in out
    assert '<w:lang w:val="de"/>' in out and "en-US" not in out
    paragraph = docx.Document(io.BytesIO(result.data)).paragraphs[0]
    assert paragraph.text == "PRESS CTRL\tTHEN\nSEE PAGE 3 OF THE MANUAL."
    styles = dict(entries(result.data))["word/styles.xml"].decode()
    assert re.search(r'<w:docDefaults>.*<w:lang w:val="de"', styles, re.S)


LINKED = ('<w:p><w:r><w:t xml:space="preserve">Visit </w:t></w:r>'
          '<w:r><w:fldChar w:fldCharType="begin"/></w:r>'
          '<w:r><w:instrText xml:space="preserve"> HYPERLINK "https://example.org" </w:instrText></w:r>'
          '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:rPr><w:rStyle w:val="Hyperlink"/></w:rPr>'
          '<w:t>the site</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>'
          '<w:r><w:t> today.</w:t></w:r></w:p>')


def test_a_hyperlink_fields_words_are_translated_its_code_and_end_kept_in_order():
    calls: list[str] = []
    data = with_body(LINKED)
    result = translate_docx(data, "a.docx", job(calls=calls))
    assert calls[0] == "Visit <x1/><span>the site</span><x2/> today."
    out = document_xml(result.data)
    assert ('<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> '
            'HYPERLINK "https://example.org" </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/>'
            '</w:r><w:r><w:rPr><w:rStyle w:val="Hyperlink"/></w:rPr><w:t xml:space="preserve">THE SITE</w:t>'
            '</w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>') in out
    assert docx.Document(io.BytesIO(result.data)).paragraphs[0].text == "VISIT THE SITE TODAY."
    model = replacing(calls[0], "Heute <x2/><span>die Seite</span><x1/>.")
    swapped = translate_docx(data, "a.docx", job(model, rescue=False))
    assert document_xml(swapped.data) == document_xml(data)
    assert "end is moved before its start" in swapped.left[0]


def test_identity_model_gives_every_part_back_byte_for_byte():
    data = with_body(RICH)
    result = translate_docx(data, "a.docx", job(lambda lines: lines, tgt=""))
    assert result.data == data


@pytest.mark.parametrize("broken", ["see page of the <a>manual</a>.",
                                    "see page <x/> <x/> of the <a>manual</a>.",
                                    "see page <x/> of the manual.", "see page <x/> of the <a> </a>.",
                                    "see page <x/> of the <a>manual.", "see page <y/> of the <a>manual</a>."])
def test_a_translation_that_loses_repeats_or_invents_a_tag_leaves_the_paragraph_as_it_was(broken):
    data = with_body(RICH)
    result = translate_docx(data, "a.docx", job(replacing("see page <x/> of the <a>manual</a>.", broken),
                                                rescue=False))
    assert document_xml(result.data) == document_xml(data)
    assert len(result.left) == 1 and result.left[0].startswith("a.docx:word/document.xml:2: left as it was")


# --- a hostile model on random paragraphs --------------------------------------------------------------

WORDS = ("save", "the", "file", "now", "édition", "open", "Straße")
PROPS = ("", "<w:rPr><w:b/></w:rPr>", "<w:rPr><w:i/></w:rPr>", '<w:rPr><w:u w:val="single"/></w:rPr>')
MARKS = ('<w:bookmarkStart w:id="1" w:name="m"/>', '<w:bookmarkEnd w:id="1"/>',
         '<w:proofErr w:type="spellStart"/>', '<w:r><w:tab/></w:r>', '<w:r><w:br w:type="page"/></w:r>',
         '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText>DATE</w:instrText></w:r>'
         '<w:r><w:fldChar w:fldCharType="end"/></w:r>',
         '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> HYPERLINK "h" </w:instrText></w:r>'
         '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>linked words</w:t></w:r>'
         '<w:r><w:fldChar w:fldCharType="end"/></w:r>')


@st.composite
def paragraphs(draw) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3)))
        run = f'<w:r>{draw(st.sampled_from(PROPS))}<w:t xml:space="preserve">{text} </w:t></w:r>'
        if draw(st.booleans()):
            run = f'<w:hyperlink r:id="rId{draw(st.integers(1, 2))}">{run}</w:hyperlink>'
        parts.append(run)
        if draw(st.integers(0, 3)) == 0:
            parts.append(draw(st.sampled_from(MARKS)))
    return "<w:p>" + "".join(parts) + "</w:p>"


def letters(text: str) -> list[str]:
    return sorted(re.sub(r"\W", "", text).casefold())


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(paragraphs(), min_size=1, max_size=3), st.integers(0, 10**6))
def test_a_hostile_model_never_loses_text_or_marks_and_the_document_reopens(body, seed):
    data = with_body("".join(body))
    result = translate_docx(data, "a.docx", job(hostile(seed)))
    out = docx.Document(io.BytesIO(result.data))
    source = docx.Document(io.BytesIO(data))
    assert len(out.paragraphs) == len(source.paragraphs)
    for a, b in zip(source.paragraphs, out.paragraphs, strict=True):
        assert letters(b._p.xpath("string(.)")) == letters(a._p.xpath("string(.)"))
    before, after = document_xml(data), document_xml(result.data)
    for mark in ("<w:bookmarkStart", "<w:bookmarkEnd", "<w:fldChar", "<w:instrText", "<w:tab/>",
                 'w:type="page"'):
        assert after.count(mark) == before.count(mark), mark
    assert set(re.findall(r'r:id="(rId\d)"', after)) == set(re.findall(r'r:id="(rId\d)"', before))
    assert fields_nest(after)


def fields_nest(xml: str) -> bool:
    """Whether every field's begin, separate and end come in that order, nested."""
    stack: list[str] = []
    for kind in re.findall(r'w:fldCharType="(\w+)"', xml):
        if kind == "begin":
            stack.append(kind)
        elif not stack or (kind == "separate" and stack[-1] != "begin"):
            return False
        elif kind == "separate":
            stack[-1] = kind
        else:
            stack.pop()
    return not stack


# --- PowerPoint and Excel ---------------------------------------------------------------------------------

def presentation() -> bytes:
    prs = pptx.Presentation()
    for n in range(2):
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = f"Title of slide {n + 1}"
        frame = slide.placeholders[1].text_frame
        frame.text = "First point"
        paragraph = frame.add_paragraph()
        run = paragraph.add_run()
        run.text = "bold words"
        run.font.bold = True
        paragraph.add_run().text = " then plain"
        slide.notes_slide.notes_text_frame.text = f"Notes for slide {n + 1}"
    return saved(prs)


def test_pptx_slides_and_notes_translated_layouts_masters_and_everything_else_kept():
    data = presentation()
    calls: list[str] = []
    result = translate_pptx(data, "p.pptx", job(calls=calls))
    assert "<b>bold words</b> then plain" in calls and "Notes for slide 2" in calls
    assert counts(result.data, "pptx") == counts(data, "pptx")
    before, after = dict(entries(data)), dict(entries(result.data))
    changed = {n for n in before if before[n] != after[n]}
    assert changed == {"ppt/slides/slide1.xml", "ppt/slides/slide2.xml", "ppt/notesSlides/notesSlide1.xml",
                       "ppt/notesSlides/notesSlide2.xml"}
    assert untouched(data, result.data, changed) == []
    for part in changed:
        assert paragraph_shapes(after[part], "drawing") == paragraph_shapes(before[part], "drawing")
    prs = pptx.Presentation(io.BytesIO(result.data))
    body = prs.slides[1].placeholders[1].text_frame.paragraphs[1]
    assert [(r.text, r.font.bold) for r in body.runs] == [("BOLD WORDS", True), (" THEN PLAIN", None)]
    assert prs.slides[1].notes_slide.notes_text_frame.text == "NOTES FOR SLIDE 2"


def test_xlsx_shared_and_rich_strings_translated_formulas_numbers_and_sheet_names_kept():
    """openpyxl writes plain strings as shared strings and rich text as inline strings: both are read."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Prices"
    sheet["A1"], sheet["B1"], sheet["C1"] = "Name of the item", 42, "=SUM(B1:B1)"
    sheet["A2"] = CellRichText(["Rich ", TextBlock(InlineFont(b=True), "bold"), " text"])
    sheet["A3"] = "Name of the item"
    data = saved(book)
    calls: list[str] = []
    result = translate_xlsx(data, "b.xlsx", job(calls=calls))
    assert sorted(set(calls)) == ["Name of the item", "Rich <b>bold</b> text"]
    assert counts(result.data, "xlsx") == counts(data, "xlsx")
    assert untouched(data, result.data, {"xl/sharedStrings.xml", "xl/worksheets/sheet1.xml"}) == []
    out = openpyxl.load_workbook(io.BytesIO(result.data), rich_text=True)
    cells = out["Prices"]
    assert (cells["A1"].value, cells["B1"].value, cells["C1"].value, cells["A3"].value) == \
        ("NAME OF THE ITEM", 42, "=SUM(B1:B1)", "NAME OF THE ITEM")
    assert [(getattr(b, "font", None) and b.font.b, str(b)) for b in cells["A2"].value] == \
        [(None, "RICH "), (True, "BOLD"), (None, " TEXT")]


def test_xlsx_table_column_names_and_the_header_cells_repeating_them_are_kept():
    from openpyxl.worksheet.table import Table

    book = openpyxl.Workbook()
    sheet = book.active
    for row in (["Item name", "Price"], ["Green apple", 3], ["Red pear", 4]):
        sheet.append(row)
    sheet["D1"] = "=SUM(Fruit[Price])"
    sheet.add_table(Table(displayName="Fruit", ref="A1:B3"))
    data = saved(book)
    calls: list[str] = []
    result = translate_xlsx(data, "t.xlsx", job(calls=calls))
    assert sorted(calls) == ["Green apple", "Red pear"]
    out = openpyxl.load_workbook(io.BytesIO(result.data))
    table = out.active.tables["Fruit"]
    header = [c.value for c in out.active[1]][:2]
    assert header == [c.name for c in table.tableColumns] == ["Item name", "Price"]
    assert out.active["A2"].value == "GREEN APPLE" and out.active["D1"].value == "=SUM(Fruit[Price])"


# --- refused input ------------------------------------------------------------------------------------

def odt_bytes() -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", "<office:document-content/>")
    return out.getvalue()


def huge_claim() -> bytes:
    """word_document() whose central directory says document.xml unpacks to 4 GB (a zip bomb's claim)."""
    data = bytearray(word_document())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        name_len = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46:at + 46 + name_len] == b"word/document.xml":
            struct.pack_into("<L", data, at + 24, 0xFFFFFFF0)
        at = data.find(b"PK\x01\x02", at + 4)
    return bytes(data)


@pytest.mark.parametrize(("data", "why"), [
    (lambda: word_document()[:-300], r"not a readable Word document \(\.docx\): not a zip archive"),
    (odt_bytes, r"it has no \[Content_Types\]\.xml \(it is application/vnd\.oasis\.opendocument\.text\)"),
    (lambda: b"Just some text\n", r"not a Word document \(\.docx\): it is no zip archive"),
    (presentation, r"it has no word/document\.xml \(it is an Office Open XML presentationml package\)"),
    (huge_claim, r"unpack to \d+ bytes"),
])
def test_what_is_no_word_document_is_refused_in_one_line_naming_the_file(data, why):
    with pytest.raises(DataError, match=why) as caught:
        translate_docx(data(), "in/a.docx", job())
    assert str(caught.value).startswith("in/a.docx") and "\n" not in str(caught.value)


def test_cli_translates_a_docx_with_a_tiny_model(tmp_path):
    from test_translator import make_model_dir
    from typer.testing import CliRunner

    from mtkit.cli.app import app

    model = make_model_dir(tmp_path / "model", beam_size=1, max_len_a=0.5, max_len_b=2)
    src, out = tmp_path / "a.docx", tmp_path / "b.docx"
    data = word_document()
    src.write_bytes(data)
    run = CliRunner().invoke(app, ["translate", "-m", str(model), "-i", str(src), "-o", str(out),
                                   "--device", "cpu"])
    assert run.exit_code == 0, run.output
    assert re.search(r"a\.docx: \d of 8 paragraphs translated", run.output)
    assert counts(out.read_bytes(), "docx") == counts(data, "docx")
    assert untouched(data, out.read_bytes(), WORD_PARTS) == []
    src.write_bytes(b"not a zip")
    bad = CliRunner().invoke(app, ["translate", "-m", str(model), "-i", str(src), "-o",
                                   str(tmp_path / "c.docx")])
    assert bad.exit_code != 0 and not (tmp_path / "c.docx").exists() and isinstance(bad.exception, DataError)


def test_a_break_before_the_first_words_or_after_the_last_comes_back_as_it_was():
    from mtkit.formats.xml.xml_runs import Part, translate_parts
    from mtkit.formats.zipped.office import DRAWING

    text = ('<p:sld xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
            'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"><a:p>'
            '<a:r><a:rPr lang="en-US" sz="1200"/><a:t>Hello world</a:t></a:r>'
            '<a:br><a:rPr lang="en-US" sz="4000"/></a:br></a:p></p:sld>')
    [(out, report)] = translate_parts([Part(text, "s.xml", DRAWING)], job().strings, "de")
    assert out == text.replace('lang="en-US" sz="1200"/><a:t>Hello world',
                               'lang="de" sz="1200"/><a:t>HELLO WORLD')
    assert report.translated == 1


def _rewritten(data: bytes, edits: dict, renames: dict) -> bytes:
    """A copy of a zip package with some parts' text changed (``edits``: part → function of its text)
    and some parts renamed (``renames``: old name → new)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            body = zin.read(info.filename)
            if info.filename in edits:
                body = edits[info.filename](body.decode("utf-8")).encode("utf-8")
            zout.writestr(renames.get(info.filename, info.filename), body)
    return out.getvalue()


def test_relationships_and_language_attributes_are_read_in_any_order_and_quotes():
    """The main part is found by its relationship whatever the attributes' order and quotes; the default
    language is set whatever the quotes of w:lang (an XML reader, not a regex of one way to write it)."""
    def rels(text: str) -> str:  # the main part renamed, its relationship written another way
        return re.sub(r'<Relationship Id="(\w+)" Type="([^"]+/officeDocument)" Target="[^"]+"/>',
                      r"<Relationship Target='word/main.xml' Id='\1' Type='\2'/>", text)

    def styles(text: str) -> str:
        return re.sub(r'<w:lang w:val="([^"]*)"', r"<w:lang w:eastAsia='zh-CN' w:val='\1'", text, count=1)

    types = lambda text: text.replace("/word/document.xml", "/word/main.xml")  # noqa: E731
    source = _rewritten(word_document(), {"_rels/.rels": rels, "word/styles.xml": styles,
                                          "[Content_Types].xml": types},
                        {"word/document.xml": "word/main.xml",
                         "word/_rels/document.xml.rels": "word/_rels/main.xml.rels"})
    assert "Target='word/main.xml'" in dict(entries(source))["_rels/.rels"].decode()
    result = translate_docx(source, "moved.docx", job())
    assert "SAVING YOUR WORK" in dict(entries(result.data))["word/main.xml"].decode()
    out = dict(entries(result.data))["word/styles.xml"].decode()
    assert re.search(r"<w:docDefaults>.*<w:lang w:eastAsia='zh-CN' w:val='de'", out, re.S)
