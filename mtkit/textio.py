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
    if p.endswith(".gz"):
        return gzip.open(p, "rb")
    return open(p, "rb")


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
        f.close()


def open_output(path: str | Path | None) -> IO[str]:
    """A text stream for writing: stdout for None or '-', gzip for .gz, line-buffered for pipes."""
    if path is None or str(path) == "-":
        return io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", line_buffering=True,
                                write_through=True)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(p, "wb"), encoding="utf-8")
    return open(p, "w", encoding="utf-8")


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)
