"""Text I/O: line fidelity (plain, gzip, CR/LF, last line without newline) and UTF-8 errors by file:line."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from mtkit.errors import DataError
from mtkit.textio import chunked, count_lines, output_file, read_lines, same_file, scan_lines


def write_bytes(path: Path, data: bytes) -> Path:
    if path.suffix == ".gz":
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


@pytest.mark.parametrize("name", ["a.txt", "a.txt.gz"])
def test_read_lines_keeps_every_line_plain_and_gzip(tmp_path: Path, name: str) -> None:
    data = "eins\n\nzwei  \r\ndrei\rvier\nfünf".encode()
    path = write_bytes(tmp_path / name, data)
    lines = list(read_lines(path))
    # empty lines kept, CRLF stripped, a lone CR inside a line becomes a space (one line, as wc -l counts)
    assert lines == ["eins", "", "zwei  ", "drei vier", "fünf"]
    assert count_lines(path) == scan_lines(path) == len(lines) == 5


def test_counts_with_and_without_final_newline_and_empty_file(tmp_path: Path) -> None:
    assert count_lines(write_bytes(tmp_path / "a", b"x\ny\n")) == 2
    assert scan_lines(tmp_path / "a") == 2
    assert count_lines(write_bytes(tmp_path / "b", b"x\ny")) == 2
    assert scan_lines(tmp_path / "b") == 2
    assert count_lines(write_bytes(tmp_path / "c", b"")) == 0
    assert scan_lines(tmp_path / "c") == 0
    assert list(read_lines(tmp_path / "c")) == []


def test_invalid_utf8_strict_names_file_and_line(tmp_path: Path) -> None:
    path = write_bytes(tmp_path / "bad.txt", b"ok\nab\xffcd\nok\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 \(byte 3 of the line\)"):
        list(read_lines(path))
    with pytest.raises(DataError, match=r"bad\.txt:2: invalid UTF-8 \(byte 3 of the line\)"):
        scan_lines(path)


def test_invalid_utf8_lenient_replaces_and_reports(tmp_path: Path) -> None:
    path = write_bytes(tmp_path / "bad.txt.gz", b"ok\nab\xffcd\n\xfe\n")
    seen: list[int] = []
    lines = list(read_lines(path, strict=False, on_invalid=seen.append))
    assert lines == ["ok", "ab\ufffdcd", "\ufffd"]
    assert seen == [2, 3]


def test_scan_lines_across_block_boundaries(tmp_path: Path) -> None:
    # a 2-byte character straddling the 1 MiB read block is valid; an error after it is on the right line
    first = b"a" * ((1 << 20) - 1) + "é".encode() + b"\n"
    path = write_bytes(tmp_path / "big.txt", first + b"x\n" * 3 + b"\xc3(\n")
    with pytest.raises(DataError, match=r"big\.txt:5: invalid UTF-8 \(byte 1 of the line\)"):
        scan_lines(path)
    write_bytes(path, first + b"x\n" * 3)
    assert scan_lines(path) == 4


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file not found: .*nope.txt"):
        list(read_lines(tmp_path / "nope.txt"))
    with pytest.raises(DataError, match="file not found"):
        scan_lines(tmp_path / "nope.txt")
    with pytest.raises(DataError, match="directory"):
        count_lines(tmp_path)


def test_truncated_gzip_is_a_data_error(tmp_path: Path) -> None:
    full = gzip.compress(b"line\n" * 1000)
    path = tmp_path / "cut.gz"
    path.write_bytes(full[: len(full) // 2])
    with pytest.raises(DataError, match="cut.gz: cannot read"):
        list(read_lines(path))
    with pytest.raises(DataError, match="cut.gz: cannot read"):
        scan_lines(path)


def test_output_file_gzip_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "out.txt.gz"
    with output_file(path) as f:
        f.write("α\nβ\n")
    assert list(read_lines(path)) == ["α", "β"]


def test_output_file_unwritable_is_a_data_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataError, match="cannot write"), output_file(blocker / "out.txt"):
        pass


def test_output_file_is_atomic(tmp_path: Path) -> None:
    """A failure while writing leaves the old file whole and no temporary file behind."""
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with pytest.raises(RuntimeError), output_file(path) as f:
        f.write("new, half written")
        assert path.read_text() == "old\n"  # nothing visible before the end
        raise RuntimeError("killed")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
    with output_file(path) as f:
        f.write("new\n")
    assert path.read_text() == "new\n"


def test_same_file_sees_through_links(tmp_path: Path) -> None:
    real = tmp_path / "doc.en"
    real.write_text("x\n")
    (tmp_path / "link.en").symlink_to(real)
    assert same_file(real, tmp_path / "link.en") and same_file(real, tmp_path / "." / "doc.en")
    assert not same_file(real, tmp_path / "other.en") and not same_file("-", real)


def test_chunked() -> None:
    assert list(chunked(iter(range(5)), 2)) == [[0, 1], [2, 3], [4]]
    assert list(chunked([], 3)) == []
