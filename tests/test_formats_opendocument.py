"""OpenDocument text and presentations (mtkit.formats.zipped.opendocument): each paragraph's spans, links,
spaces, tabs and line breaks kept around its translation, notes and comments translated as paragraphs
of their own in place, headers and footers of styles.xml translated, every other entry byte for byte;
each output reopens in odfpy with the same counts."""

from __future__ import annotations

import io
import re
import sys
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from odf import teletype
from odf.draw import Frame, Page, TextBox
from odf.office import Annotation
from odf.opendocument import OpenDocumentPresentation, OpenDocumentText, load
from odf.style import DefaultStyle, Footer, Header, MasterPage, PageLayout, Style, TextProperties
from odf.text import A, H, LineBreak, Note, NoteBody, NoteCitation, P, S, Span, Tab

sys.path.insert(0, str(Path(__file__).parent))
from document_checks import counts, entries, paragraph_shapes, untouched, upper  # noqa: E402

from mtkit.errors import DataError  # noqa: E402
from mtkit.formats.documents import DocumentJob  # noqa: E402
from mtkit.formats.zipped.opendocument import translate_odp, translate_odt  # noqa: E402


def saved(document) -> bytes:
    buf = io.BytesIO()
    document.save(buf)
    return buf.getvalue()


def text_document() -> bytes:
    doc = OpenDocumentText()
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    default = DefaultStyle(family="paragraph")
    default.addElement(TextProperties(language="en", country="US"))
    doc.styles.addElement(default)
    layout = PageLayout(name="Layout")
    doc.automaticstyles.addElement(layout)
    master = MasterPage(name="Standard", pagelayoutname=layout)
    header, footer = Header(), Footer()
    header.addElement(P(text="The running header"))
    footer.addElement(P(text="The page footer"))
    master.addElement(header)
    master.addElement(footer)
    doc.masterstyles.addElement(master)
    doc.text.addElement(H(outlinelevel=1, text="A heading here"))
    p = P(text="Some ")
    p.addElement(Span(stylename=bold, text="bold words"))
    p.addText(" and a ")
    p.addElement(A(href="https://example.org", text="link"))
    p.addElement(S(c=3))
    p.addText("spaced")
    p.addElement(Tab())
    p.addText("tabbed")
    p.addElement(LineBreak())
    p.addText("broken line.")
    note = Note(id="n1", noteclass="footnote")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text="The note text"))
    note.addElement(body)
    p.addElement(note)
    p.addText(" After the note.")
    doc.text.addElement(p)
    commented = P(text="A commented paragraph")
    comment = Annotation()
    comment.addElement(P(text="The comment says this"))
    commented.addElement(comment)
    doc.text.addElement(commented)
    return saved(doc)


def job(model=upper, calls: list | None = None) -> DocumentJob:
    def recording(lines):
        if calls is not None:
            calls.extend(lines)
        return model(lines)

    return DocumentJob("de-AT", recording)


def test_odt_spans_links_spaces_tabs_breaks_notes_comments_headers_translated_and_kept():
    data = text_document()
    calls: list[str] = []
    result = translate_odt(data, "t.odt", job(calls=calls))
    assert set(calls) == {"A heading here", "Some <span>bold words</span> and a <a>link</a>   spaced",
                          "tabbed",
                          "broken line.<x/> After the note.", "The note text", "A commented paragraph",
                          "The comment says this", "The running header", "The page footer"}
    assert counts(result.data, "odt") == counts(data, "odt")
    before, after = dict(entries(data)), dict(entries(result.data))
    changed = {n for n in before if before[n] != after[n]}
    assert changed == {"content.xml", "styles.xml"}
    assert untouched(data, result.data, changed) == []
    for part in changed:
        assert paragraph_shapes(after[part], "odf") == paragraph_shapes(before[part], "odf")
    content = after["content.xml"].decode()
    assert ('SOME <text:span text:style-name="Bold">BOLD WORDS</text:span> AND A <text:a '
            'xlink:href="https://example.org" xlink:type="simple">LINK</text:a> <text:s text:c="2"/>SPACED'
            '<text:tab/>TABBED<text:line-break/>BROKEN LINE.<text:note ') in content
    doc = load(io.BytesIO(result.data))
    texts = [teletype.extractText(p) for p in doc.getElementsByType(P)]
    assert "THE NOTE TEXT" in texts and "THE COMMENT SAYS THIS" in texts and "THE PAGE FOOTER" in texts
    assert 'fo:language="de" fo:country="AT"' in after["styles.xml"].decode()
    assert 'fo:language="en" fo:country="US"' in before["styles.xml"].decode()
    assert result.left == [] and result.summary == "t.odt: 7 of 7 paragraphs translated, 0 left as they were"


def test_identity_model_gives_the_document_back_byte_for_byte():
    data = text_document()
    assert translate_odt(data, "t.odt", DocumentJob("", lambda lines: lines)).data == data


def test_odp_frames_on_slides_translated_master_pages_kept():
    doc = OpenDocumentPresentation()
    layout = PageLayout(name="PM")
    doc.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    for n in range(2):
        page = Page(masterpagename=master)
        frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
        box = TextBox()
        box.addElement(P(text=f"Slide {n + 1} says hello"))
        frame.addElement(box)
        page.addElement(frame)
        doc.presentation.addElement(page)
    data = saved(doc)
    result = translate_odp(data, "s.odp", job())
    assert counts(result.data, "odp") == counts(data, "odp")
    assert untouched(data, result.data, {"content.xml"}) == []
    doc = load(io.BytesIO(result.data))
    assert [teletype.extractText(p) for p in doc.getElementsByType(P)] == ["SLIDE 1 SAYS HELLO",
                                                                           "SLIDE 2 SAYS HELLO"]


WORDS = ("save", "the", "file", "now", "Édition")


@st.composite
def paragraph(draw) -> P:
    p = P()
    for _ in range(draw(st.integers(1, 5))):
        text = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))) + " "
        kind = draw(st.sampled_from(("text", "span", "link", "space", "tab")))
        if kind == "span":
            p.addElement(Span(stylename=draw(st.sampled_from(("T1", "T2"))), text=text))
        elif kind == "link":
            p.addElement(A(href="https://x.org/" + draw(st.sampled_from("ab")), text=text))
        elif kind == "space":
            p.addElement(S(c=draw(st.integers(1, 3))))
            p.addText(text)
        elif kind == "tab":
            p.addElement(Tab())
        else:
            p.addText(text)
    return p


def hostile(seed: int):
    import random

    rng = random.Random(seed)

    def model(lines):
        out = []
        for line in lines:
            tokens = re.findall(r"<[^>]+>|[^<\s]+|\s+", line)
            if rng.random() < 0.4:
                rng.shuffle(tokens)
            tokens = [t for t in tokens if not (t.startswith("<") and rng.random() < 0.2)]
            if rng.random() < 0.3:
                invented = rng.choice(["<x/>", "<span3>", "</a>", "<b/>"])
                tokens.insert(rng.randint(0, len(tokens)), invented)
            out.append("".join(tokens))
        return out

    return model


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(paragraph(), min_size=1, max_size=3), st.integers(0, 10**6))
def test_a_hostile_model_never_loses_text_and_the_document_reopens(paragraphs, seed):
    doc = OpenDocumentText()
    for p in paragraphs:
        doc.text.addElement(p)
    data = saved(doc)
    result = translate_odt(data, "h.odt", job(hostile(seed)))
    out = load(io.BytesIO(result.data))
    source = load(io.BytesIO(data))
    a, b = source.getElementsByType(P), out.getElementsByType(P)
    assert len(a) == len(b)
    for x, y in zip(a, b, strict=True):
        assert sorted(re.sub(r"\W", "", teletype.extractText(y)).casefold()) == \
            sorted(re.sub(r"\W", "", teletype.extractText(x)).casefold())
    before, after = counts(data, "odt"), counts(result.data, "odt")
    assert {k: v for k, v in after.items() if k != "A"} == {k: v for k, v in before.items() if k != "A"}
    links = [{a.getAttribute("href") for a in d.getElementsByType(A)} for d in (source, out)]
    assert links[0] == links[1]  # adjacent links to one target may come back as one


@pytest.mark.parametrize(("data", "why"), [
    (lambda: text_document()[:100], r"not a readable OpenDocument text \(\.odt\): not a zip archive"),
    (lambda: b"<html><p>hi</p></html>",
     r"x\.odt: not an OpenDocument text \(\.odt\): it is an XML or HTML file"),
    (lambda: saved(OpenDocumentPresentation()),
     r"its mimetype is 'application/vnd\.oasis\.opendocument\.presentation'"),
])
def test_what_is_no_odt_is_refused_in_one_line(data, why):
    with pytest.raises(DataError, match=why) as caught:
        translate_odt(data(), "x.odt", job())
    assert str(caught.value).startswith("x.odt") and "\n" not in str(caught.value)


def test_entities_of_the_source_stay_references_never_resolved_and_the_models_text_is_escaped():
    content = ('<?xml version="1.0"?>\n<!DOCTYPE c [<!ENTITY ext SYSTEM "/etc/hostname">]>\n'
               '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
               'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>'
               '<text:p>Name: &ext; &amp; more</text:p></office:text></office:body>'
               '</office:document-content>')
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        z.writestr("content.xml", content)
    model = lambda lines: [line + " & <3" for line in upper(lines)]  # noqa: E731
    result = translate_odt(buf.getvalue(), "e.odt", job(model))
    out = dict(entries(result.data))["content.xml"].decode()
    assert "<text:p>NAME: &ext; &amp; MORE &amp; &lt;3</text:p>" in out
