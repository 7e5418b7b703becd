"""Reading and writing text files the way every stage needs: plain or .gz, '-' for stdin/stdout,
strict UTF-8 with the offending file:line named, or lenient with a warning."""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from mtkit.errors import DataError


def _open_binary(path: str | Path) -> IO[bytes]:
    p = str(path)
    if p == "-":
        return sys.stdin.buffer
    if not Path(p).exists():
        raise DataError(f"file not found: {p}")
    if Path(p).is_dir():
        raise DataError(f"expected a file but found a directory: {p}")
    try:
        return gzip.open(p, "rb") if p.endswith(".gz") else open(p, "rb")
    except OSError as exc:  # permission denied and friends: a user problem, not a traceback
        raise DataError(f"cannot open {p}: {exc.strerror or exc}") from None


def read_lines(path: str | Path, strict: bool = True,
               on_invalid: Callable[[int], None] | None = None) -> Iterator[str]:
    """Yield lines without their newline. Strict: invalid UTF-8 raises DataError naming file:line.
    Lenient: undecodable bytes become U+FFFD and `on_invalid(line_number)` is called."""
    name = "<stdin>" if str(path) == "-" else str(path)
    f = _open_binary(path)
    try:
        for lineno, raw in enumerate(_iter_raw(f, name), start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                if strict:
                    raise DataError(
                        f"{name}:{lineno}: invalid UTF-8 (byte {exc.start + 1} of the line)"
                    ) from None
                text = raw.decode("utf-8", errors="replace")
                if on_invalid is not None:
                    on_invalid(lineno)
            yield text.rstrip("\r\n").replace("\r", " ")
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def _iter_raw(f: IO[bytes], name: str) -> Iterator[bytes]:
    try:
        # readline (not iteration with read-ahead) so a line typed at a terminal is seen at once
        while True:
            raw = f.readline()
            if not raw:
                return
            yield raw
    except (OSError, EOFError) as exc:
        raise DataError(f"{name}: cannot read ({exc})") from None


def count_lines(path: str | Path) -> int:
    f = _open_binary(path)
    try:
        n, last = 0, b"\n"
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            n += block.count(b"\n")
            last = block[-1:]
        return n + (0 if last == b"\n" else 1)
    except (OSError, EOFError) as exc:
        raise DataError(f"{path}: cannot read ({exc})") from None
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def scan_lines(path: str | Path) -> int:
    """Count lines and check they are valid UTF-8, at block speed (no per-line Python work).

    Lets a stage reject a bad corpus before spending minutes on it; the error names file:line
    exactly as `read_lines` would."""
    name = "<stdin>" if str(path) == "-" else str(path)
    f = _open_binary(path)
    lines_before, carry = 0, b""
    try:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            data = carry + block
            cut = data.rfind(b"\n") + 1  # decode whole lines only: a character may span two blocks
            _check_utf8(data[:cut], name, lines_before)
            lines_before += data.count(b"\n", 0, cut)
            carry = data[cut:]
        if carry:
            _check_utf8(carry, name, lines_before)
            lines_before += 1
        return lines_before
    except (OSError, EOFError) as exc:
        raise DataError(f"{name}: cannot read ({exc})") from None
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def _check_utf8(data: bytes, name: str, lines_before: int) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = lines_before + data.count(b"\n", 0, exc.start) + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        raise DataError(
            f"{name}:{lineno}: invalid UTF-8 (byte {exc.start - line_start + 1} of the line)"
        ) from None


def open_output(path: str | Path | None) -> IO[str]:
    """A text stream for writing: stdout for None or '-', gzip for .gz, line-buffered for pipes."""
    if path is None or str(path) == "-":
        return io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", line_buffering=True,
                                write_through=True)
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        if p.suffix == ".gz":
            return io.TextIOWrapper(gzip.open(p, "wb"), encoding="utf-8")
        return open(p, "w", encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot write {p}: {exc.strerror or exc}") from None


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)
