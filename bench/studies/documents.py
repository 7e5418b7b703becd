"""Real office documents and books through formats/zipped/office.py, opendocument.py and epub.py with an
upper-casing stub model (no model cost, every tag kept in place), each checked with
tests/document_checks.py: it reopens in its own library with the same counts, every zip entry outside
the translated parts is byte-equal and in its place, and per paragraph the text (case aside) and the
formatting of each stretch are the source's (0 text runs lost or moved).

The files (bench/work/documents/, gitignored) come from package registries: the test documents in
the sdists of python-docx, python-pptx, openpyxl, odfpy and ebooklib on PyPI, the workbooks embedded
in their charts, and Debian's developers-reference EPUB:

    mkdir -p bench/work/documents/sdists && cd bench/work/documents/sdists
    pip download --no-deps --no-binary :all: python-docx python-pptx openpyxl odfpy ebooklib
    for f in *.tar.gz; do tar xzf $f; done
    cd .. && mkdir deb && cd deb && apt-get download developers-reference && dpkg-deb -x *.deb x
    cd /work/main && python bench/studies/documents.py --extract-embedded
    python bench/studies/documents.py
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import time
import zipfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from document_checks import counts, hostile, paragraph_shapes, untouched, upper  # noqa: E402

from mtkit.errors import MtkitError  # noqa: E402
from mtkit.formats.documents import translate_document  # noqa: E402

WORK = ROOT / "bench/work/documents"
FORMATS = ("docx", "pptx", "xlsx", "odt", "odp", "epub")
#: the parts each format may change, and the dialect of lxml reading its paragraphs
PARTS = {
    "docx": [(r"word/(?:document\d*|header\d*|footer\d*|footnotes|endnotes|comments)\.xml", "word"),
             (r"word/diagrams/(?:data|drawing)\d+\.xml", "drawing"), (r"word/styles\.xml", None)],
    "pptx": [(r"ppt/(?:slides/slide\d+|notesSlides/notesSlide\d+|diagrams/(?:data|drawing)\d+)\.xml",
              "drawing")],
    "xlsx": [(r"xl/sharedStrings\.xml", "sheet"), (r"xl/worksheets/sheet\d+\.xml", None),
             (r"xl/comments\d+\.xml", None)],
    "odt": [(r"content\.xml|styles\.xml", "odf"), (r"meta\.xml", None)],
    "odp": [(r"content\.xml", "odf"), (r"styles\.xml|meta\.xml", None)],
    "epub": [(r".*\.(?:x?html?|ncx|opf)", None), (r"mimetype", None)],
}


def extract_embedded() -> None:
    """The workbooks embedded in the sdists' presentations and documents (their charts' data)."""
    out = WORK / "embedded"
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted(p for p in (WORK / "sdists").rglob("*") if p.suffix in (".docx", ".pptx")):
        try:
            with zipfile.ZipFile(path) as z:
                for name in z.namelist():
                    if "embeddings/" in name and name.endswith(".xlsx"):
                        (out / f"{path.stem}-{Path(name).name}").write_bytes(z.read(name))
        except zipfile.BadZipFile:
            continue


def check(path: Path, fmt: str, model=upper, exact: bool = True) -> dict[str, object]:
    """One file translated by ``model`` and checked; what was found. ``exact``: each paragraph's
    stretches must be the source's (a model that keeps its tags in place), else its letters as a
    multiset (a model that moves, drops and invents tags and words: nothing may be lost)."""
    data = path.read_bytes()
    try:
        before = counts(data, fmt)
    except Exception as exc:  # a file its own library cannot read is no test of ours
        return {"status": "library refuses the source", "why": f"{type(exc).__name__}: {exc}"[:120]}
    start = time.perf_counter()
    try:
        result = translate_document(data, path.name, fmt, "de", model)
    except MtkitError as exc:
        return {"status": "refused", "why": str(exc)[:160]}
    seconds = time.perf_counter() - start
    found: dict[str, object] = {"status": "ok", "seconds": seconds, "summary": result.summary,
                                "left": len(result.left)}
    try:
        after = counts(result.data, fmt)
    except Exception as exc:
        return {**found, "status": "does not reopen", "why": f"{type(exc).__name__}: {exc}"[:160]}
    problems = []
    if after != before:
        problems.append("counts differ")
    allowed = "|".join(p for p, _ in PARTS[fmt])
    after_entries = dict(_entries(result.data))
    changed = {n for n, a in _entries(data) if after_entries.get(n) != a}
    problems += [f"{n} changed" for n in changed if not re.fullmatch(allowed, n)]
    moved = "mimetype" if fmt == "epub" else ""
    problems += [f"{n} not byte-equal" for n in untouched(data, result.data, changed, moved)]
    done, total = map(int, re.search(r"(\d+) of (\d+)", result.summary).groups())  # type: ignore[union-attr]
    paragraphs = 0
    source_parts, out_parts = dict(_entries(data)), dict(_entries(result.data))
    for pattern, kind in PARTS[fmt]:
        for name in source_parts:
            if kind and re.fullmatch(pattern, name):
                shapes = paragraph_shapes(source_parts[name], kind)
                got = paragraph_shapes(out_parts[name], kind)
                paragraphs += len(shapes)
                if not exact:
                    shapes, got = ([sorted("".join(t for _, t in p)) for p in x] for x in (shapes, got))
                if shapes != got:
                    problems.append(f"{name}: paragraph text or formatting differs")
    if fmt == "epub":
        problems += _epub_text(source_parts, out_parts, exact)
    return {**found, "paragraphs": paragraphs, "translated": done, "units": total, "problems": problems,
            "status": "ok" if not problems else "differs"}


def _entries(data: bytes) -> list[tuple[str, bytes]]:
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        return [(i.filename, z.read(i)) for i in z.infolist()]


def _epub_text(source: dict[str, bytes], out: dict[str, bytes], exact: bool) -> list[str]:
    """Per XHTML document, its letters (case and whitespace aside) the source's (in order where
    ``exact``, else as a multiset)."""
    from lxml import etree, html

    problems = []
    for name, data in source.items():
        if name.endswith((".xhtml", ".html", ".htm")):
            parse = etree.XMLParser(resolve_entities=False, recover=True)
            try:
                a, b = (etree.fromstring(d, parse) for d in (data, out[name]))
            except etree.XMLSyntaxError:
                a, b = (html.fromstring(d) for d in (data, out[name]))
            letters = [re.sub(r"\s+", "", "".join(x.itertext())).casefold() for x in (a, b)]
            if not exact:
                letters = [sorted(x) for x in letters]
            if letters[0] != letters[1]:
                problems.append(f"{name}: text differs")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--extract-embedded", action="store_true")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--hostile", action="store_true",
                        help="a model that moves, drops and invents tags (tests/document_checks.hostile)")
    args = parser.parse_args()
    if args.extract_embedded:
        extract_embedded()
        return
    by_format: dict[str, list[tuple[Path, dict]]] = defaultdict(list)
    for path in sorted(WORK.rglob("*")):
        fmt = path.suffix[1:].lower()
        if fmt in FORMATS and path.is_file():
            model = hostile(len(by_format[fmt])) if args.hostile else upper
            by_format[fmt].append((path, check(path, fmt, model, exact=not args.hostile)))
    print("| format | files | translated and checked | reopen, same counts | non-text entries byte-equal,"
          " paragraphs' text and formatting kept | paragraphs in the parts | translated of those with"
          " words | left | refused (why) | library refuses the source | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for fmt in FORMATS:
        rows = by_format.get(fmt, [])
        done = [r for _, r in rows if r["status"] in ("ok", "differs", "does not reopen")]
        reopened = [r for r in done
                    if r["status"] != "does not reopen" and "counts differ" not in r.get("problems", [])]
        clean = [r for r in done if r["status"] == "ok"]
        refused = sorted({str(r["why"]).split(": ", 1)[-1][:60] for _, r in rows if r["status"] == "refused"})
        def total(key: str, done: list[dict] = done) -> int:
            return sum(int(r.get(key, 0)) for r in done)

        print(f"| {fmt} | {len(rows)} | {len(done)} | {len(reopened)} | {len(clean)} | "
              f"{total('paragraphs')} | "
              f"{total('translated')} of {total('units')} | {total('left')} | "
              f"{sum(r['status'] == 'refused' for _, r in rows)} {'; '.join(refused)} | "
              f"{sum(r['status'] == 'library refuses the source' for _, r in rows)} | "
              f"{sum(float(r.get('seconds', 0)) for r in done):.2f} |")
    for fmt in FORMATS:
        for path, r in by_format.get(fmt, []):
            if r["status"] not in ("ok",) and (args.verbose or r["status"] != "library refuses the source"):
                print(f"{path.relative_to(WORK)}: {r['status']}: {r.get('why', '')} {r.get('problems', '')}")


if __name__ == "__main__":
    main()
