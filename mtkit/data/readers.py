"""Streaming readers for parallel corpora: a Moses pair (two aligned files), one TSV file, or one TMX file.

Every reader yields `Pair`s one at a time and holds at most one unit in memory, so a corpus of tens of
millions of sentences is read in bounded memory. Each segment comes back as one line (line and paragraph
separators inside it become a space) because every later stage stores one sentence per line; nothing else
is changed, so what a user sees in the file is what the model trains on. Problems with a file's content
raise `DataError` naming file:line; bad options raise `ConfigError` when `read_corpus` is called, before
any file is opened.
"""

from __future__ import annotations

import contextlib
import csv
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

from lxml import etree

from mtkit.errors import ConfigError, DataError
from mtkit.languages import same_language
from mtkit.textio import open_binary, read_lines

__all__ = ["CORPUS_FORMATS", "CorpusSpec", "Pair", "corpus_format", "read_corpus", "same_language"]

CORPUS_FORMATS = ("moses", "tsv", "tmx")

_TSV_SUFFIXES = (".tsv", ".tab", ".tsv.gz", ".tab.gz")
_TMX_SUFFIXES = (".tmx", ".tmx.gz")
_QUOTINGS = ("csv", "none")
# "\r\n" first so that a Windows line ending inside a segment becomes one space, not two
_LINE_BREAKS = re.compile("\r\n|[\r\n\u2028\u2029]")
# TMX inline elements that hold the native codes of the original document ("&lt;b&gt;"), not text
_NATIVE_CODES = frozenset({"bpt", "ept", "ph", "it", "ut"})
_XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
_SYNTAX_POSITION = re.compile(r", line \d+, column (\d+)$")


@dataclass(frozen=True)
class CorpusSpec:
    """One corpus to read: a Moses pair (two paths) or one TSV / TMX file (one path), optionally .gz.

    The TSV options are ignored for the other formats so that a caller can build every spec the same way.
    """

    paths: tuple[str, ...]
    src_lang: str
    tgt_lang: str
    src_column: str = ""  # TSV: 1-based column number ("3") or header name ("en"); default "1"
    tgt_column: str = ""  # default "2"
    header: bool | None = None  # TSV: first row is a header; None = yes when a column is given by name
    quoting: str = "csv"  # TSV: "csv" (RFC 4180-style quotes, tab-separated) or "none" (split on tabs)


@dataclass(frozen=True)
class Pair:
    """One source/target segment pair, with where it came from so that later stages can name it."""

    src: str
    tgt: str
    line: int  # 1-based line in the (first) file where this pair starts


def corpus_format(paths: Sequence[str]) -> str:
    """The format of a corpus given as paths: two files are a Moses pair, one file is known by its suffix.

    Guessing from content is not attempted: a single plain-text file could be either side of a Moses
    pair or a TSV without a suffix, and reading it the wrong way would train on garbage silently."""
    if len(paths) == 2:
        for p in paths:
            if str(p).lower().endswith(_TSV_SUFFIXES + _TMX_SUFFIXES):
                raise ConfigError(
                    f"{p}: a TSV or TMX corpus is a single file; two files are read as a Moses pair "
                    "(one sentence per line in each)"
                )
        return "moses"
    if len(paths) == 1:
        p = str(paths[0])
        if p.lower().endswith(_TSV_SUFFIXES):
            return "tsv"
        if p.lower().endswith(_TMX_SUFFIXES):
            return "tmx"
        raise ConfigError(
            f"{p}: not a corpus on its own: a Moses corpus is two files (give -i train.en -i train.de); "
            "a single file must be .tsv, .tab or .tmx (optionally .gz)"
        )
    raise ConfigError(
        f"a corpus is one .tsv/.tab/.tmx file or two Moses files, but {len(paths)} paths were given"
        + (f": {', '.join(map(str, paths))}" if paths else "")
    )


def read_corpus(spec: CorpusSpec, skipped: Counter[str] | None = None) -> Iterator[Pair]:
    """The pairs of ``spec``'s corpus, in file order, streamed.

    Options are checked now (ConfigError before any reading); files are opened when iteration starts.
    Units left out are counted in ``skipped`` by reason ("blank line" in TSV; "no <tuv> in de" in TMX)
    so that the caller can report them once the corpus is read."""
    counts: Counter[str] = Counter() if skipped is None else skipped
    paths = tuple(str(p) for p in spec.paths)
    fmt = corpus_format(paths)
    if fmt == "moses":
        return _read_moses(paths[0], paths[1])
    if fmt == "tsv":
        return _read_tsv(paths[0], spec, counts)
    for name, lang in (("src_lang", spec.src_lang), ("tgt_lang", spec.tgt_lang)):
        if not lang:
            raise ConfigError(f"{paths[0]}: a TMX corpus needs {name}, to pick its <tuv> elements")
        same_language("und", lang)  # ConfigError now for a code that is not one
    return _read_tmx(paths[0], spec.src_lang, spec.tgt_lang, counts)


def _one_line(text: str) -> str:
    return _LINE_BREAKS.sub(" ", text)


# --------------------------------------------------------------------------------------------- Moses
def _read_moses(src_path: str, tgt_path: str) -> Iterator[Pair]:
    src_lines, tgt_lines = read_lines(src_path), read_lines(tgt_path)
    try:
        n = 0
        for n, src in enumerate(src_lines, start=1):
            tgt = next(tgt_lines, None)
            if tgt is None:
                raise DataError(f"{tgt_path} has {n - 1} lines but {src_path} has more")
            if n == 1:
                src, tgt = src.removeprefix("\ufeff"), tgt.removeprefix("\ufeff")
            # read_lines has already taken the line ending off and made a lone \r a space
            yield Pair(_one_line(src), _one_line(tgt), n)
        if next(tgt_lines, None) is not None:
            raise DataError(f"{src_path} has {n} lines but {tgt_path} has more")
    finally:  # close both files now, not when the garbage collector gets to them
        src_lines.close()
        tgt_lines.close()


# ----------------------------------------------------------------------------------------------- TSV
def _column(value: str, default: int, path: str) -> int | str:
    """A 0-based index for a column given by number, or the name to look up in the header."""
    if not value:
        return default
    if value.isdigit():
        if int(value) < 1:
            raise ConfigError(f"{path}: TSV columns are numbered from 1, not {value}")
        return int(value) - 1
    return value


def _decoded_lines(path: str) -> Iterator[str]:
    """The lines of ``path`` as `mtkit.textio.read_lines` reads them (strict UTF-8 named by file:line, a
    lone \\r a space, as in the Moses reader: csv would call it a row end), the BOM off, each ended by
    \\n again for the csv reader, which joins a quoted field's lines."""
    for n, line in enumerate(read_lines(path)):
        yield (line.removeprefix("\ufeff") if n == 0 else line) + "\n"


def _tsv_rows(path: str, quoting: str) -> Iterator[tuple[int, list[str]]]:
    """(starting line, fields) of each row; a blank line is an empty row."""
    lines = _decoded_lines(path)
    if quoting == "none":
        for lineno, line in enumerate(lines, start=1):
            body = line.rstrip("\r\n")
            yield lineno, body.split("\t") if body else []
        return
    reader = csv.reader(lines, delimiter="\t", quotechar='"', doublequote=True, strict=True)
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DataError(
                f"{path}:{start}: {exc} (with quoting \"none\", quotes are read as plain text)"
            ) from None
        yield start, row


def _read_tsv(path: str, spec: CorpusSpec, skipped: Counter[str]) -> Iterator[Pair]:
    if spec.quoting not in _QUOTINGS:
        raise ConfigError(f"quoting must be one of {', '.join(_QUOTINGS)}, not {spec.quoting!r}")
    src_col, tgt_col = _column(spec.src_column, 0, path), _column(spec.tgt_column, 1, path)
    by_name = [c for c in (src_col, tgt_col) if isinstance(c, str)]
    header = bool(by_name) if spec.header is None else spec.header
    if by_name and not header:
        raise ConfigError(f"{path}: column {by_name[0]!r} is a name, which needs a header row (header: off)")
    return _tsv_pairs(path, spec.quoting, header, src_col, tgt_col, skipped)


def _tsv_pairs(path: str, quoting: str, header: bool, src_col: int | str, tgt_col: int | str,
               skipped: Counter[str]) -> Iterator[Pair]:
    rows = _tsv_rows(path, quoting)
    if header:
        first = next(rows, None)
        if first is None:
            if isinstance(src_col, str) or isinstance(tgt_col, str):
                raise DataError(f"{path}:1: the file is empty, but its header row names the columns")
            return
        names = first[1]
        src_col, tgt_col = (_header_index(c, names, path) for c in (src_col, tgt_col))
    assert isinstance(src_col, int) and isinstance(tgt_col, int)
    wanted = max(src_col, tgt_col) + 1
    for line, row in rows:
        if not row:
            skipped["blank line"] += 1
            continue
        if len(row) < wanted:
            raise DataError(f"{path}:{line}: {len(row)} columns, column {wanted} wanted")
        yield Pair(_one_line(row[src_col]), _one_line(row[tgt_col]), line)


def _header_index(column: int | str, names: list[str], path: str) -> int:
    if isinstance(column, int):
        return column
    if column in names:
        return names.index(column)
    listed = ", ".join(repr(n) for n in names) or "none"
    raise ConfigError(f"{path}: no column named {column!r} in the header row (its columns: {listed})")


# ----------------------------------------------------------------------------------------------- TMX
def _local(tag: object) -> str:
    """An element's name without its namespace ('' for comments, entities, processing instructions)."""
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _xml_error(path: str, exc: etree.XMLSyntaxError) -> DataError:
    msg = exc.msg or str(exc)
    found = _SYNTAX_POSITION.search(msg)
    if found:
        msg = f"{msg[:found.start()]}, column {found.group(1)}"
    return DataError(f"{path}:{max(exc.lineno or 0, 1)}: not well-formed TMX ({msg})")


def _parse(f: IO[bytes], events: tuple[str, ...], tag: str | None) -> etree.iterparse:
    # no entity expansion, no DTD or network fetches: a TMX comes from anywhere (billion laughs, XXE)
    return etree.iterparse(f, events=events, tag=tag, huge_tree=True, resolve_entities=False,
                           no_network=True, load_dtd=False)


@contextlib.contextmanager
def _xml_file(path: str) -> Iterator[IO[bytes]]:
    """``path`` open for the XML parser, its errors turned into one line naming the file (and line)."""
    f = open_binary(path)
    try:
        yield f
    except etree.XMLSyntaxError as exc:
        raise _xml_error(path, exc) from None
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    finally:
        f.close()


def _check_root(path: str) -> None:
    """Refuse a file whose root is not <tmx> before reading it: the reader keeps only <tu> elements
    small, so a large XML file of another kind would otherwise be built whole in memory."""
    with _xml_file(path) as f:
        for _, root in _parse(f, ("start",), None):
            if _local(root.tag) != "tmx":
                raise DataError(f"{path}:{root.sourceline or 1}: not a TMX file (root element <{root.tag}>)")
            return


def _seg_text(seg: etree._Element) -> str:
    """The translatable text of a <seg>: native codes (bpt, ept, ph, it, ut) left out with everything in
    them, their tails kept; other elements (hi, sub, unknown ones) contribute their text. An entity that
    was not expanded stays as written ("&name;"). Iterative, as a <seg> may nest deeper than recursion."""
    parts = [seg.text or ""]
    stack = [(seg, iter(seg))]
    while stack:
        element, children = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            if stack:
                parts.append(element.tail or "")
            continue
        if isinstance(child.tag, str) and _local(child.tag) not in _NATIVE_CODES:
            parts.append(child.text or "")
            stack.append((child, iter(child)))
            continue
        if child.tag is etree.Entity:
            parts.append(child.text or "")
        parts.append(child.tail or "")
    return _one_line("".join(parts))


def _tuv_segments(tu: etree._Element) -> Iterator[tuple[str, etree._Element]]:
    """(language, <seg>) of each <tuv> of a <tu> that has both."""
    for tuv in tu:
        if _local(tuv.tag) != "tuv":
            continue
        lang = tuv.get(_XML_LANG) or tuv.get("lang")  # xml:lang in TMX 1.4, lang in TMX 1.1
        seg = next((c for c in tuv if _local(c.tag) == "seg"), None)
        if lang and seg is not None:
            yield lang, seg


def _read_tmx(path: str, src_lang: str, tgt_lang: str, skipped: Counter[str]) -> Iterator[Pair]:
    _check_root(path)
    with _xml_file(path) as f:
        for _, tu in _parse(f, ("end",), "{*}tu"):
            src = tgt = None
            for lang, seg in _tuv_segments(tu):
                if src is None and same_language(lang, src_lang):
                    src = seg
                elif tgt is None and same_language(lang, tgt_lang):
                    tgt = seg
            pair = None
            if src is None:
                skipped[f"no <tuv> in {src_lang}"] += 1
            elif tgt is None:
                skipped[f"no <tuv> in {tgt_lang}"] += 1
            else:
                pair = Pair(_seg_text(src), _seg_text(tgt), tu.sourceline or 0)
            # free what is parsed: this unit, and the (already cleared) units and comments before it
            tu.clear(keep_tail=True)
            parent = tu.getparent()
            if parent is not None:
                while tu.getprevious() is not None:
                    del parent[0]
            if pair is not None:
                yield pair
