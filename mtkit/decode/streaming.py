"""Reading a stream (stdin) in chunks that follow the data as it arrives.

A program that drives a command-line translator through a pipe writes a line and waits for its
answer; a file piped in wants full batches. Both are served by one rule: take every complete line
that is already there, and hand them on as a chunk as soon as the next read would block (or the
chunk is full); at end of input, the rest. A line on a pipe or a terminal is thus answered as soon as
it is translated, while a file still gets batches of ``max_lines``.

POSIX only (``select`` on a pipe); ``stream_fd`` says None elsewhere, or for a stream without a file
descriptor, and the caller reads line by line as before. Lines are decoded like
``mtkit.textio.read_lines(strict=False)``: invalid UTF-8 becomes U+FFFD and ``on_invalid(line)`` is
called; CR before the newline is dropped and a lone CR becomes a space.
"""

from __future__ import annotations

import io
import os
import select
import sys
from collections.abc import Callable, Iterator
from typing import IO

from mtkit.errors import DataError
from mtkit.textio import chunked, read_lines

_READ = 1 << 16


def stream_fd(stream: IO[bytes]) -> int | None:
    """The file descriptor to read ``stream`` without blocking on more than is there, or None when
    it has none (a test's in-memory stdin) or the platform cannot poll it (Windows pipes)."""
    if os.name != "posix":
        return None
    try:
        return stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):
        return None


def _would_block(fd: int) -> bool:
    readable, _, _ = select.select([fd], [], [], 0)
    return not readable  # end of input counts as readable: the next read returns at once


def stream_chunks(fd: int, max_lines: int, on_invalid: Callable[[int], None] | None = None,
                  name: str = "<stdin>") -> Iterator[list[str]]:
    """Lists of at most ``max_lines`` lines (without newlines) from ``fd``: each as soon as the
    lines read so far are complete and no more input is waiting; a last line without a newline
    comes at end of input. Blocks only while no complete line waits to be handed on."""
    pending = bytearray()  # bytes of a line not complete yet
    lines: list[str] = []
    lineno = 0
    while True:
        if lines and _would_block(fd):
            yield lines
            lines = []
        try:
            data = os.read(fd, _READ)
        except OSError as exc:
            raise DataError(f"{name}: cannot read ({exc.strerror or exc})") from None
        pending += data
        cut = pending.rfind(b"\n") + 1 if data else len(pending)
        raw_lines = bytes(pending[:cut]).split(b"\n")
        if data or not raw_lines[-1]:
            raw_lines.pop()  # what follows the last newline: not a line yet, or nothing
        del pending[:cut]
        for raw in raw_lines:
            lineno += 1
            lines.append(_decode(raw, lineno, on_invalid))
            if len(lines) >= max_lines:
                yield lines
                lines = []
        if not data:
            break
    if lines:
        yield lines


def stdin_chunks(max_lines: int, on_invalid: Callable[[int], None] | None = None
                 ) -> Iterator[list[tuple[int, str]]]:
    """(line index, line) chunks of stdin as ``stream_chunks`` makes them. Where stdin cannot be
    polled, as before: a line at a time from a terminal, chunks of ``max_lines`` otherwise."""
    fd = stream_fd(sys.stdin.buffer)
    if fd is None:
        reader = read_lines("-", strict=False, on_invalid=on_invalid)
        yield from chunked(enumerate(reader), 1 if sys.stdin.isatty() else max_lines)
        return
    index = 0
    for lines in stream_chunks(fd, max_lines, on_invalid):
        yield list(enumerate(lines, start=index))
        index += len(lines)


def _decode(raw: bytes, lineno: int, on_invalid: Callable[[int], None] | None) -> str:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("utf-8", errors="replace")
        if on_invalid is not None:
            on_invalid(lineno)
    return text.rstrip("\r\n").replace("\r", " ")


__all__ = ["stdin_chunks", "stream_chunks", "stream_fd"]
