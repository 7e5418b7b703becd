"""Reading and writing text files the way every stage needs: plain or .gz, '-' for stdin/stdout,
strict UTF-8 with the offending file:line named, or lenient with a warning."""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, TypeVar

from mtkit.errors import ConfigError, DataError, OutputClosed


def open_binary(path: str | Path) -> IO[bytes]:
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


def read_bytes(path: str | Path) -> bytes:
    """The whole of ``path`` ('-' for stdin; .gz decompressed) as bytes, for a document read whole."""
    f = open_binary(path)
    try:
        return f.read()
    except (OSError, EOFError) as exc:  # a truncated or corrupt .gz among them
        raise DataError(f"cannot read {path}: {exc}") from None
    finally:
        if f is not sys.stdin.buffer:
            f.close()

def read_lines(path: str | Path, strict: bool = True,
               on_invalid: Callable[[int], None] | None = None) -> Iterator[str]:
    """Yield lines without their newline. Strict: invalid UTF-8 raises DataError naming file:line.
    Lenient: undecodable bytes become U+FFFD and `on_invalid(line_number)` is called."""
    name = "<stdin>" if str(path) == "-" else str(path)
    f = open_binary(path)
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
    """Lines of a file (a last line without newline counts), at block speed."""
    return scan_lines(path, check_utf8=False)


def scan_lines(path: str | Path, check_utf8: bool = True) -> int:
    """Count lines and check they are valid UTF-8, at block speed (no per-line Python work).

    Lets a stage reject a bad corpus before spending minutes on it; the error names file:line
    exactly as `read_lines` would."""
    name = "<stdin>" if str(path) == "-" else str(path)
    f = open_binary(path)
    lines_before, carry = 0, b""
    try:
        while True:
            block = f.read(1 << 20)
            if not block:
                break
            data = carry + block
            cut = data.rfind(b"\n") + 1  # decode whole lines only: a character may span two blocks
            if check_utf8:
                _check_utf8(data[:cut], name, lines_before)
            lines_before += data.count(b"\n", 0, cut)
            carry = data[cut:]
        if carry:
            if check_utf8:
                _check_utf8(carry, name, lines_before)
            lines_before += 1
        return lines_before
    except (OSError, EOFError) as exc:
        raise DataError(f"{name}: cannot read ({exc})") from None
    finally:
        if f is not sys.stdin.buffer:
            f.close()


def scan_pair(src: str | Path, tgt: str | Path) -> int:
    """``scan_lines`` of both sides of a parallel corpus, which must have as many lines."""
    n_src, n_tgt = scan_lines(src), scan_lines(tgt)
    if n_src != n_tgt:
        raise DataError(f"{src} has {n_src} lines but {tgt} has {n_tgt}")
    return n_src


def _check_utf8(data: bytes, name: str, lines_before: int) -> None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        lineno = lines_before + data.count(b"\n", 0, exc.start) + 1
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        raise DataError(
            f"{name}:{lineno}: invalid UTF-8 (byte {exc.start - line_start + 1} of the line)"
        ) from None


def same_file(a: str | Path, b: str | Path) -> bool:
    """True when two paths name one file (through links too); '-' is never a file."""
    if str(a) == "-" or str(b) == "-":
        return False
    pa, pb = Path(a), Path(b)
    try:
        if pa.exists() and pb.exists():
            return os.path.samefile(pa, pb)
    except OSError:
        pass
    return pa.resolve() == pb.resolve()


@contextlib.contextmanager
def output_file(path: str | Path | None) -> Iterator[IO[str]]:
    """A text stream for writing. A file is written to a temporary file beside it and renamed over
    ``path`` only when the block ends without an error, so an existing file is never left empty or
    half-written; .gz is compressed. None or '-' is stdout, line-buffered so a pipe sees each line."""
    if path is None or str(path) == "-":
        out = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8", line_buffering=True, write_through=True)
        try:
            yield out
            out.flush()
        except BrokenPipeError:
            raise OutputClosed("stdout was closed by its reader") from None
        finally:
            out.detach()  # the wrapper must not close sys.stdout's buffer when it is collected
        return
    p = Path(path)
    if p.is_dir():
        raise DataError(f"cannot write {p}: it is a directory")
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        raw = gzip.open(tmp, "wb") if p.suffix == ".gz" else open(tmp, "wb")  # noqa: SIM115
    except OSError as exc:
        raise DataError(f"cannot write {p}: {exc.strerror or exc}") from None
    out = io.TextIOWrapper(raw, encoding="utf-8")
    try:
        yield out
        out.close()
        os.replace(tmp, p)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise DataError(f"cannot write {p}: {exc.strerror or exc}") from None
    except BaseException:
        out.close()
        tmp.unlink(missing_ok=True)
        raise


def parse_shard(spec: str | None) -> tuple[int, int] | None:
    """``"K/N"`` → (K, N) with 0 ≤ K < N: piece K of N of an input, as `mtkit translate --shard` and
    `mtkit clean --shard` take it (so that one job array's index serves both)."""
    if spec is None:
        return None
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", spec)
    if not match or not int(match[1]) < int(match[2]):
        raise ConfigError(f"--shard {spec!r}: expected K/N with 0 <= K < N, e.g. 0/4")
    return int(match[1]), int(match[2])


def write_bytes(path: str | Path | None, data: bytes) -> None:
    """``data`` written whole to ``path`` as ``output_file`` writes text (a temporary file renamed into
    place; None or '-' is stdout): a document's bytes, in its own encoding."""
    if path is None or str(path) == "-":
        try:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        except BrokenPipeError:
            raise OutputClosed("stdout was closed by its reader") from None
        return
    with output_file(path) as out:
        out.flush()
        out.buffer.write(data)

T = TypeVar("T")


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of ``size`` items (the last may be shorter), read lazily."""
    chunk: list[T] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)
