"""HTML (mtkit.formats.html, `mtkit translate --format html`): each block's run of text and inline tags
is one string for the model, the tags come back inside it (moved as the translation needs, with their
attributes), and the page's block structure, attributes and untranslated parts equal the input's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import html as lxml_html

from mtkit.errors import DataError
from mtkit.formats.html import page_text, parse_page, translate_page
from mtkit.formats.placeholders import translate_strings

PAGE = """<div class="help" id="top"><h1 id="t">Saving <em>your</em> work</h1>
<p>Click <a href="/save" title="Save it">Save <b>now</b></a> and run <code>make &amp;&amp; go</code>.
It keeps a <span class="x">copy</span>.<br>Then close.</p>
<pre>keep   this   text</pre>
<p translate="no">Product Name</p>
<script>var s = "do not";</script><style>p { color: red }</style>
<ul><li>One &amp; two</li><li>Three <span class="notranslate">Brand</span> four</li></ul>
<table><tr><td>Cell <i>text</i></td></tr></table>
tail words</div>
"""


def upper(lines: list[str]) -> list[str]:
    """A stub model: text upper-cased, tags and entities copied."""
    return [re.sub(r"(<[^>]*>|&\w+;)|([^<&]+)", lambda m: m[1] or m[2].upper(), s) for s in lines]


def translate(text: str, model=upper, calls: list | None = None) -> tuple[str, object]:
    def recording(lines):
        if calls is not None:
            calls.extend(lines)
        return model(lines)

    root, whole = parse_page(text, "page.html")
    report = translate_page(root, "page.html", lambda s: translate_strings(s, recording))
    return page_text(root, whole, text), report


def shape(text: str) -> list[tuple]:
    """Every element in document order: its tag, attributes and depth (the structure a page keeps)."""
    root = lxml_html.fragment_fromstring(text, create_parent="div")
    return [(el.tag, dict(el.attrib), len(list(el.iterancestors()))) for el in root.iter()]


def test_structure_attributes_and_untranslated_parts_stay_and_text_is_translated():
    out, report = translate(PAGE)
    assert shape(out) == shape(PAGE)
    for kept in ("<pre>keep   this   text</pre>", '<p translate="no">Product Name</p>',
                 '<script>var s = "do not";</script>', "<style>p { color: red }</style>",
                 '<span class="notranslate">Brand</span>', "<code>make &amp;&amp; go</code>"):
        assert kept in out
    assert "SAVING <em>YOUR</em> WORK" in out and "CELL <i>TEXT</i>" in out and "TAIL WORDS" in out
    assert '<a href="/save" title="Save it">SAVE <b>NOW</b></a>' in out
    assert report.left == [] and report.translated == report.runs == 6


def test_a_sentence_split_across_inline_tags_is_one_string():
    calls: list[str] = []
    translate(PAGE, calls=calls)
    assert ("Click <a>Save <b>now</b></a> and run <code/>. It keeps a <span>copy</span>.<br/>Then close."
            in calls)
    assert not any("this   text" in c or "Product" in c or "Brand" in c or "make" in c for c in calls)


def test_tags_may_move_within_their_run_and_keep_their_attributes():
    def reorder(lines):  # the tag moves to where German puts the verb
        return ["Jetzt <a>speichern</a> klicken" if s == "Click <a>Save</a> now" else s for s in lines]

    out, report = translate('<p>Click <a href="/s" class="btn">Save</a> now</p>', model=reorder)
    assert out == '<p>Jetzt <a href="/s" class="btn">speichern</a> klicken</p>' and report.left == []


@pytest.mark.parametrize("broken", ["Klicken <a>Speichern jetzt", "Klicken </a>Speichern<a> jetzt",
                                    "Klicken Speichern jetzt"])
def test_a_run_whose_translation_loses_or_unnests_a_tag_stays_as_it_was(broken):
    source = '<p>Click <a href="/s">Save</a> now</p><p>Other text</p>'
    out, report = translate(source, model=lambda ls: [broken if "Click" in s else s.upper() for s in ls])
    assert out == '<p>Click <a href="/s">Save</a> now</p><p>OTHER TEXT</p>'
    assert len(report.left) == 1 and report.left[0].startswith("page.html:1: left as it was")


def test_a_whole_document_keeps_its_doctype_head_and_body():
    doc = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>My page</title></head>"
           "<body><p>Hello <em>there</em></p></body></html>\n")
    out, _ = translate(doc)
    assert out.startswith("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>MY PAGE")
    assert "<p>HELLO <em>THERE</em></p>" in out


def test_a_mismatched_end_tag_is_refused_naming_the_line():
    with pytest.raises(DataError, match=r"page\.html:2: Unexpected end tag : i"):
        parse_page("<p>fine</p>\n<p>a <b>x</i></p>", "page.html")


def test_cli_format_html_and_one_line_errors(tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from test_translator import make_model_dir

    model = make_model_dir(tmp_path / "model", beam_size=2, max_len_a=1.0, max_len_b=6)
    src, out = tmp_path / "page.html", tmp_path / "out.html"
    src.write_text(PAGE, encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "mtkit", "translate", "-m", str(model), "-i", str(src), "-o",
                          str(out), "--device", "cpu"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert re.search(r"page\.html: \d of 6 text runs translated, \d left as they were", run.stderr)
    assert shape(out.read_text(encoding="utf-8")) == shape(PAGE)
    src.write_text("<p>a <b>x</i></p>\n", encoding="utf-8")
    bad = subprocess.run([sys.executable, "-m", "mtkit", "translate", "-m", str(model), "-i", str(src), "-o",
                          str(tmp_path / "none.html")], capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and not (tmp_path / "none.html").exists()
    assert bad.stderr.strip() == f"error: {src}:1: Unexpected end tag : i"
