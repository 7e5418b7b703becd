"""EPUB books (mtkit.formats.zipped.epub): each XHTML content document through the XHTML page path, the NCX's
titles, dc:language set to the target; every other file byte for byte, mimetype first and stored;
each output reopens in ebooklib with the same items, spine and table of contents."""

from __future__ import annotations

import io
import re
import sys
import zipfile
from pathlib import Path

import pytest
from ebooklib import epub

sys.path.insert(0, str(Path(__file__).parent))
from document_checks import counts, entries, untouched, upper  # noqa: E402

from mtkit.errors import DataError  # noqa: E402
from mtkit.formats.documents import DocumentJob  # noqa: E402
from mtkit.formats.zipped.epub import translate_epub  # noqa: E402


def book_bytes() -> bytes:
    book = epub.EpubBook()
    book.set_identifier("id-1")
    book.set_title("A small book")
    book.set_language("en")
    chapters = []
    for n, body in enumerate(("<p>Hello <b>bold</b> world, see <a href='ch2.xhtml'>the next one</a>.</p>",
                              "<p>Second <i>chapter</i> text.</p><pre>keep   this</pre>"), start=1):
        chapter = epub.EpubHtml(title=f"Chapter {n}", file_name=f"ch{n}.xhtml", lang="en")
        chapter.content = f"<h1>Chapter {n}</h1>{body}"
        book.add_item(chapter)
        chapters.append(chapter)
    book.add_item(epub.EpubItem(uid="style", file_name="style.css", media_type="text/css",
                                content=b"p { color: red }"))
    book.toc = tuple(epub.Link(f"ch{n}.xhtml", f"Chapter {n}", f"c{n}") for n in (1, 2))
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *chapters]
    buf = io.BytesIO()
    epub.write_epub(buf, book)
    return buf.getvalue()


def job(calls: list | None = None, model=upper) -> DocumentJob:
    def recording(lines):
        if calls is not None:
            calls.extend(lines)
        return model(lines)

    return DocumentJob("de", recording)


def test_chapters_nav_and_ncx_translated_language_set_everything_else_kept():
    data = book_bytes()
    calls: list[str] = []
    result = translate_epub(data, "b.epub", job(calls))
    assert "Hello <b>bold</b> world, see <a>the next one</a>." in calls and "<a>Chapter 2</a>" in calls
    assert counts(result.data, "epub") == counts(data, "epub")
    before, after = dict(entries(data)), dict(entries(result.data))
    changed = {n for n in before if before[n] != after[n]}
    assert changed == {"EPUB/ch1.xhtml", "EPUB/ch2.xhtml", "EPUB/nav.xhtml", "EPUB/toc.ncx",
                       "EPUB/content.opf"}
    assert untouched(data, result.data, changed) == []
    chapter = after["EPUB/ch1.xhtml"].decode()
    assert ('<p>HELLO <b>BOLD</b> WORLD, SEE <a href="ch2.xhtml">THE NEXT ONE</a>.</p>' in chapter
            and 'lang="de"' in chapter)
    assert "<pre>keep   this</pre>" in after["EPUB/ch2.xhtml"].decode()
    assert re.findall(r"<text>([^<]*)</text>", after["EPUB/toc.ncx"].decode()) == \
        ["A SMALL BOOK", "CHAPTER 1", "CHAPTER 2"]
    opf = after["EPUB/content.opf"].decode()
    assert "<dc:language>de</dc:language>" in opf and "<dc:title>A small book</dc:title>" in opf
    first = zipfile.ZipFile(io.BytesIO(result.data)).infolist()[0]
    assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)
    assert result.left == []


def test_a_book_whose_mimetype_is_compressed_or_late_gets_it_first_and_stored():
    data = book_bytes()
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in reversed(zin.infolist()):
            zout.writestr(info.filename, zin.read(info))
    result = translate_epub(out.getvalue(), "b.epub", job())
    infos = zipfile.ZipFile(io.BytesIO(result.data)).infolist()
    assert (infos[0].filename, infos[0].compress_type) == ("mimetype", zipfile.ZIP_STORED)
    assert zipfile.ZipFile(io.BytesIO(result.data)).read("mimetype") == b"application/epub+zip"
    assert counts(result.data, "epub") == counts(data, "epub")


def with_entry(data: bytes, name: str, body: bytes) -> bytes:
    """The book with entry ``name`` replaced by ``body`` (added at the end where it has none)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            zout.writestr(info, body if info.filename == name else zin.read(info))
        if name not in zin.namelist():
            zout.writestr(name, body)
    return out.getvalue()


@pytest.mark.parametrize(("make", "why"), [
    (lambda: book_bytes()[:-40], r"b\.epub: not a readable EPUB book \(\.epub\)"),
    (lambda: with_entry(book_bytes(), "mimetype", b"application/zip"), r"its mimetype is 'application/zip'"),
    (lambda: with_entry(book_bytes(), "EPUB/ch1.xhtml", b"<html><p>x</b></html>"),
     r"b\.epub:EPUB/ch1\.xhtml:1: not well-formed XML"),
    (lambda: with_entry(book_bytes(), "META-INF/encryption.xml", b"<encryption>EPUB/ch1.xhtml</encryption>"),
     r"b\.epub:EPUB/ch1\.xhtml: encrypted"),
])
def test_a_broken_or_protected_book_is_refused_in_one_line(make, why):
    data = make()
    with pytest.raises(DataError, match=why) as caught:
        translate_epub(data, "b.epub", job())
    assert "\n" not in str(caught.value)
