"""mtkit.data.readers: Moses, TSV and TMX corpora read as streams of one-line segment pairs, with every
problem in a file reported as a DataError naming file:line and every bad option as a ConfigError."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from mtkit.data.readers import CORPUS_FORMATS, CorpusSpec, Pair, corpus_format, read_corpus, same_language
from mtkit.errors import ConfigError, DataError

REPO = Path(__file__).resolve().parents[1]


def write(path: Path, data: str | bytes) -> Path:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if path.name.endswith(".gz"):
        with gzip.open(path, "wb") as f:
            f.write(raw)
    else:
        path.write_bytes(raw)
    return path


def pairs(*paths: Path, src: str = "en", tgt: str = "de", skipped: Counter[str] | None = None,
          **options: object) -> list[Pair]:
    spec = CorpusSpec(tuple(str(p) for p in paths), src, tgt, **options)  # type: ignore[arg-type]
    return list(read_corpus(spec, skipped))


def texts(found: list[Pair]) -> list[tuple[str, str]]:
    return [(p.src, p.tgt) for p in found]


def tmx(body: str, head: str = '<?xml version="1.0" encoding="UTF-8"?>\n') -> str:
    return f'{head}<tmx version="1.4">\n<header srclang="en"/>\n<body>\n{body}</body>\n</tmx>\n'


def tu(**segs: str) -> str:
    """One <tu>: tu(en="Hello", de_DE="Hallo") → tuvs with xml:lang="en" and "de-DE"."""
    tuvs = "".join(f'<tuv xml:lang="{lang.replace("_", "-")}"><seg>{seg}</seg></tuv>'
                   for lang, seg in segs.items())
    return f"<tu>{tuvs}</tu>\n"


# ------------------------------------------------------------------------------------- formats
def test_corpus_format_by_count_and_suffix() -> None:
    assert CORPUS_FORMATS == ("moses", "tsv", "tmx")
    assert corpus_format(["train.en", "train.de"]) == "moses"
    assert corpus_format(["train.en.gz", "train.de.gz"]) == "moses"
    for name in ("c.tsv", "c.TSV", "c.tab", "c.tsv.gz", "c.tab.gz"):
        assert corpus_format([name]) == "tsv", name
    for name in ("c.tmx", "c.TMX", "c.tmx.gz"):
        assert corpus_format([name]) == "tmx", name


@pytest.mark.parametrize("paths, message", [
    (["train.en"], "a Moses corpus is two files"),
    (["train.csv"], ".tsv, .tab or .tmx"),
    ([], "0 paths"),
    (["a.en", "b.de", "c.fr"], "3 paths"),
    (["a.tmx", "b.tmx"], "a single file"),
])
def test_corpus_format_refuses_what_it_cannot_read(paths: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        corpus_format(paths)


def test_read_corpus_checks_options_before_reading(tmp_path: Path) -> None:
    missing = tmp_path / "missing.tsv"
    with pytest.raises(ConfigError, match="quoting"):
        read_corpus(CorpusSpec((str(missing),), "en", "de", quoting="excel"))
    with pytest.raises(ConfigError, match="needs a header row"):
        read_corpus(CorpusSpec((str(missing),), "en", "de", src_column="en", header=False))
    with pytest.raises(ConfigError, match="numbered from 1"):
        read_corpus(CorpusSpec((str(missing),), "en", "de", src_column="0"))
    with pytest.raises(ConfigError, match="not a language code"):
        read_corpus(CorpusSpec((str(tmp_path / "m.tmx"),), "en", "!!"))
    with pytest.raises(ConfigError, match="needs src_lang"):
        read_corpus(CorpusSpec((str(tmp_path / "m.tmx"),), "", "de"))


# ------------------------------------------------------------------------------------- languages
@pytest.mark.parametrize("tag", ["de", "de-DE", "de_AT", "deu", "ger", "DE", "De-ch"])
def test_same_language_by_primary_language(tag: str) -> None:
    assert same_language(tag, "de")


@pytest.mark.parametrize("tag, wanted, expected", [
    ("en", "de", False),
    ("EN-us", "en", True),
    ("pt-BR", "pt", True),
    ("pt-BR", "pt-BR", True),
    ("pt-PT", "pt-BR", False),
    ("pt", "pt-BR", True),  # a tag without region is not known to be another region
    ("zh-Hant-TW", "zh-Hant", True),
    ("zh-Hans", "zh-Hant", False),
    ("zh", "zh-Hant", True),
    ("not a tag!", "de", False),
    ("", "de", False),
])
def test_same_language_regions_scripts_and_junk(tag: str, wanted: str, expected: bool) -> None:
    assert same_language(tag, wanted) is expected


def test_same_language_refuses_a_wanted_code_that_is_not_one() -> None:
    with pytest.raises(ConfigError, match="not a language code"):
        same_language("de", "x y")
    with pytest.raises(ConfigError):
        same_language("de", "und")


# ------------------------------------------------------------------------------------- Moses
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_moses_pair_plain_and_gzip(tmp_path: Path, suffix: str) -> None:
    src = write(tmp_path / f"c.en{suffix}", "  Hello \r\nTwo\u2028lines\nlast")
    tgt = write(tmp_path / f"c.de{suffix}", "  Hallo \r\nZwei\u2029Zeilen\nletzte\n")
    found = pairs(src, tgt)
    assert texts(found) == [("  Hello ", "  Hallo "), ("Two lines", "Zwei Zeilen"), ("last", "letzte")]
    assert [p.line for p in found] == [1, 2, 3]


def test_moses_unequal_lengths_name_both_files(tmp_path: Path) -> None:
    short, long = write(tmp_path / "a.en", "1\n2\n"), write(tmp_path / "b.de", "1\n2\n3\n")
    with pytest.raises(DataError, match=f"^{short} has 2 lines but {long} has more$"):
        pairs(short, long)
    with pytest.raises(DataError, match=f"^{short} has 2 lines but {long} has more$"):
        pairs(long, short)


def test_moses_invalid_utf8_and_missing_file(tmp_path: Path) -> None:
    good = write(tmp_path / "a.en", "a\nb\nc\n")
    bad = write(tmp_path / "b.de", b"a\nb\xff\nc\n")
    with pytest.raises(DataError, match=f"^{bad}:2: invalid UTF-8"):
        pairs(good, bad)
    with pytest.raises(DataError, match="file not found: .*nope.de"):
        pairs(good, tmp_path / "nope.de")


def test_moses_bom_is_stripped_from_both_files(tmp_path: Path) -> None:
    src = write(tmp_path / "a.en", "\ufeffHello\nWorld\n")
    tgt = write(tmp_path / "b.de", b"\xef\xbb\xbfHallo\nWelt\n")
    assert texts(pairs(src, tgt)) == [("Hello", "Hallo"), ("World", "Welt")]


# ------------------------------------------------------------------------------------- TSV
def test_tsv_columns_by_number(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tsv", "id1\tHallo\tHello\nid2\tWelt\tWorld\n")
    found = pairs(path, src_column="3", tgt_column="2")
    assert texts(found) == [("Hello", "Hallo"), ("World", "Welt")]
    assert [p.line for p in found] == [1, 2]
    assert texts(pairs(path)) == [("id1", "Hallo"), ("id2", "Welt")]  # default: columns 1 and 2
    # a header row said to be there is left out even when columns are numbers
    assert texts(pairs(path, src_column="3", tgt_column="2", header=True)) == [("World", "Welt")]


def test_tsv_columns_by_header_name(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tsv", "\ufeffde\tid\ten\nHallo\t1\tHello\nWelt\t2\tWorld\n")
    found = pairs(path, src_column="en", tgt_column="de")
    assert texts(found) == [("Hello", "Hallo"), ("World", "Welt")]
    assert [p.line for p in found] == [2, 3]
    with pytest.raises(ConfigError, match=r"no column named 'fr'.*'de', 'id', 'en'"):
        pairs(path, src_column="fr", tgt_column="de")


def test_tsv_quoted_fields_tabs_escapes_and_newlines(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tsv", (
        '"a\tb"\t"say ""hi"""\r\n'
        '"first line\r\nsecond\nthird"\tone\n'
        'plain\ttext\n'
    ))
    found = pairs(path)
    assert texts(found) == [("a\tb", 'say "hi"'), ("first line second third", "one"), ("plain", "text")]
    assert [p.line for p in found] == [1, 2, 5]


@pytest.mark.parametrize("quoting", ["csv", "none"])
def test_tsv_lone_carriage_return_is_a_space_not_a_row_end(tmp_path: Path, quoting: str) -> None:
    path = write(tmp_path / "c.tsv", "a\rb\tc\r\nd\te\n")
    found = pairs(path, quoting=quoting)
    assert texts(found) == [("a b", "c"), ("d", "e")]
    assert [p.line for p in found] == [1, 2]


def test_tsv_quoting_none_keeps_quotes(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tsv", '"quoted"\t5" screen\n"open\tx\n')
    assert texts(pairs(path, quoting="none")) == [('"quoted"', '5" screen'), ('"open', "x")]
    with pytest.raises(DataError, match=f"^{path}:2: .*quoting \"none\""):
        pairs(path)  # read as csv, the quote opening line 2 is never closed


def test_tsv_too_few_columns_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tsv", "a\tb\tc\nd\te\n")
    with pytest.raises(DataError, match=f"^{path}:2: 2 columns, column 3 wanted$"):
        pairs(path, src_column="1", tgt_column="3")


def test_tsv_unterminated_quote_names_where_the_row_starts(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tsv", 'a\tb\n"never closed\tx\ny\tz\n')
    with pytest.raises(DataError, match=f"^{path}:2: unexpected end of data"):
        pairs(path)


def test_tsv_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tsv", b"a\tb\nc\td\xc3\n")
    with pytest.raises(DataError, match=f"^{path}:2: invalid UTF-8"):
        pairs(path)


def test_tsv_blank_lines_skipped_and_counted(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tsv", "a\tb\n\nc\td\n\n")
    skipped: Counter[str] = Counter()
    found = pairs(path, skipped=skipped)
    assert texts(found) == [("a", "b"), ("c", "d")]
    assert [p.line for p in found] == [1, 3]
    assert skipped == {"blank line": 2}


@pytest.mark.parametrize("quoting", ["csv", "none"])
def test_tsv_gzip(tmp_path: Path, quoting: str) -> None:
    path = write(tmp_path / "c.tsv.gz", "\ufeffHello\tHallo\r\nBye\tTschüss\n")
    assert texts(pairs(path, quoting=quoting)) == [("Hello", "Hallo"), ("Bye", "Tschüss")]


# ------------------------------------------------------------------------------------- TMX
def test_tmx_picks_the_wanted_languages_among_several(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tmx", tmx(
        tu(en="Hello", de_DE="Hallo", fr="Bonjour")
        + tu(fr="Oui", de_DE="Ja", en="Yes")
    ))
    found = pairs(path, src="en", tgt="de")
    assert texts(found) == [("Hello", "Hallo"), ("Yes", "Ja")]
    assert [p.line for p in found] == [5, 6]
    assert texts(pairs(path, src="fr", tgt="en")) == [("Bonjour", "Hello"), ("Oui", "Yes")]


def test_tmx_language_tags_are_matched_by_language(tmp_path: Path) -> None:
    body = "".join(
        f'<tu><tuv xml:lang="EN-us"><seg>s{i}</seg></tuv><tuv xml:lang="{tag}"><seg>t{i}</seg></tuv></tu>\n'
        for i, tag in enumerate(["de-DE", "DE", "deu", "de_AT"])
    )
    assert texts(pairs(write(tmp_path / "c.tmx", tmx(body)))) == [(f"s{i}", f"t{i}") for i in range(4)]


def test_tmx_1_1_lang_attribute_and_a_namespace(tmp_path: Path) -> None:
    old = write(tmp_path / "old.tmx", (
        '<?xml version="1.0"?>\n<tmx version="1.1"><header/><body>\n'
        '<tu><tuv lang="EN"><seg>Hello</seg></tuv><tuv lang="DE"><seg>Hallo</seg></tuv></tu>\n'
        "</body></tmx>\n"
    ))
    assert texts(pairs(old)) == [("Hello", "Hallo")]
    spaced = write(tmp_path / "ns.tmx", tmx(tu(en="Hi", de="Hallo")).replace("<tmx ", '<tmx xmlns="urn:x" '))
    assert texts(pairs(spaced)) == [("Hi", "Hallo")]


def test_tmx_inline_codes_are_dropped_and_text_kept(tmp_path: Path) -> None:
    seg = ('Click <bpt i="1">&lt;b&gt;</bpt>here<ept i="1">&lt;/b&gt;</ept> and'
           ' <hi type="x">see <ph>&lt;br/&gt;</ph>this</hi>,<it pos="begin">&lt;i&gt;</it> ok<!-- note -->'
           '<ut>{\\b}</ut>.')
    # a character reference is not normalised away by the XML parser as a raw \r\n is: still one space
    path = write(tmp_path / "c.tmx", tmx(tu(en=seg, de="Zwei\n  Zeilen\r\n &#13;&#10;drei&#x2028;")))
    assert texts(pairs(path)) == [("Click here and see this, ok.", "Zwei   Zeilen   drei ")]


def test_tmx_bom_utf16_and_gzip(tmp_path: Path) -> None:
    doc = tmx(tu(en="Grüße", de="Größe"))
    bom = write(tmp_path / "bom.tmx", b"\xef\xbb\xbf" + doc.encode("utf-8"))
    utf16 = write(tmp_path / "u16.tmx", doc.replace('encoding="UTF-8"', 'encoding="UTF-16"').encode("utf-16"))
    packed = write(tmp_path / "c.tmx.gz", doc)
    for path in (bom, utf16, packed):
        assert texts(pairs(path)) == [("Grüße", "Größe")], path


def test_tmx_unit_without_a_language_is_skipped_and_counted(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tmx", tmx(
        tu(en="one", de="eins") + tu(en="two", fr="deux") + tu(fr="trois", de="drei")
        + '<tu><tuv xml:lang="en"><seg>no seg in de</seg></tuv><tuv xml:lang="de"/></tu>\n'
        + tu(en="five", de="fünf")
    ))
    skipped: Counter[str] = Counter()
    found = pairs(path, skipped=skipped)
    assert texts(found) == [("one", "eins"), ("five", "fünf")]
    assert [p.line for p in found] == [5, 9]
    assert skipped == {"no <tuv> in de": 2, "no <tuv> in en": 1}


def test_tmx_malformed_names_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tmx", tmx(tu(en="a", de="b") + "<tu><tuv xml:lang='en'><seg>x</tuv></tu>\n"))
    with pytest.raises(DataError, match=f"^{path}:6: not well-formed TMX \\(.*column"):
        pairs(path)
    empty = write(tmp_path / "empty.tmx", "")
    with pytest.raises(DataError, match=f"^{empty}:1: not well-formed TMX"):
        pairs(empty)


def test_tmx_other_xml_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "c.tmx", '<?xml version="1.0"?>\n<xliff version="1.2"><file/></xliff>\n')
    with pytest.raises(DataError, match=f"^{path}:2: not a TMX file \\(root element <xliff>\\)"):
        pairs(path)


def test_tmx_entities_are_not_expanded(tmp_path: Path) -> None:
    secret = write(tmp_path / "secret.txt", "SECRET")
    head = (f'<?xml version="1.0"?>\n<!DOCTYPE tmx [\n<!ENTITY big "EXPANDED">\n'
            f'<!ENTITY file SYSTEM "{secret.as_uri()}">\n]>\n')
    path = write(tmp_path / "c.tmx", tmx(tu(en="a &big; b &file; c &amp; &#65;", de="x"), head=head))
    [found] = pairs(path)
    assert "EXPANDED" not in found.src and "SECRET" not in found.src
    assert found.src == "a &big; b &file; c & A"
    laughs = "".join(f'<!ENTITY l{i + 1} "{f"&l{i};" * 10}">' for i in range(9))
    bomb = write(tmp_path / "bomb.tmx", tmx(tu(en="&l9;", de="x"),
                                          head=f'<!DOCTYPE tmx [<!ENTITY l0 "lol">{laughs}]>\n'))
    try:  # libxml2 may refuse the declarations outright; either way nothing is expanded
        assert texts(pairs(bomb)) == [("&l9;", "x")]
    except DataError as exc:
        assert "not well-formed TMX" in str(exc)


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak resident size from /proc")
def test_tmx_large_file_reads_in_bounded_memory(tmp_path: Path) -> None:
    """80k units (23 MiB): the process grows by well under what a tree of the file would need (about 19
    MiB more when read units are cleared but not removed, about 90 when kept). Measured in a fresh process
    by its peak resident size, since lxml's memory is outside Python's allocator: VmHWM, not ru_maxrss,
    which Linux carries over from the parent (this pytest process, torch and all) across exec."""
    path = tmp_path / "big.tmx"
    units, pad = 80_000, "x" * 100
    with open(path, "w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<tmx version="1.4"><header/><body>\n')
        for i in range(units):
            f.write(f'<tu><tuv xml:lang="en"><seg>s{i} {pad}</seg></tuv>'
                    f'<tuv xml:lang="de"><seg>t{i} {pad}</seg></tuv></tu>\n')
        f.write("</body></tmx>\n")
    script = textwrap.dedent(f"""
        from mtkit.data.readers import CorpusSpec, read_corpus
        spec = CorpusSpec(({str(path)!r},), "en", "de")
        next(read_corpus(spec))  # libraries loaded, parser buffers allocated
        def peak_kib():
            with open("/proc/self/status") as f:
                return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
        before = peak_kib()
        n = 0
        for pair in read_corpus(spec):
            n += 1
        last = pair
        after = peak_kib()
        print(n, after - before, last.line, last.src[:6])
    """)
    path_now = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), path_now] if path_now else [str(REPO)])}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True,
                         timeout=300).stdout.split()
    n, growth_kib, line, src = int(out[0]), int(out[1]), int(out[2]), out[3]
    assert (n, line, src) == (units, units + 2, f"s{units - 1}")
    assert growth_kib < 8 * 1024, f"reading grew the process by {growth_kib / 1024:.1f} MiB"
