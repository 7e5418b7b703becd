"""Plain text as one document (the server's .txt files, the Python API): every line with words
translated, with its placeholders kept (placeholders/strings.py); empty lines, the whitespace at each
line's ends, line endings (LF, CRLF or CR, each line its own) and the BOM as they were.

UTF-8 (with or without a BOM) and UTF-16 or UTF-32 with a BOM are read and written back the same;
other bytes are read in the charset ``encoding=`` (``--encoding``) names, or else the legacy charset of
the file's language (`mtkit.formats.text.charsets`: cp1252 for English, cp1251 for Russian …) where its text
looks right, said in the result; only what no charset can be decided for is refused, naming the first
line that does not decode. A translated line the file's charset cannot write is left as it was.
`mtkit translate` keeps its own line-by-line path for text (streaming, --resume, shards).
"""

from __future__ import annotations

import codecs
import dataclasses
import re

from mtkit.errors import DataError
from mtkit.formats.documents import DocumentJob, DocumentResult
from mtkit.formats.text.charsets import guess_legacy
from mtkit.placeholders.syntaxes import GENERIC

_LINE = re.compile(r"([^\r\n]*)(\r\n|\n|\r|$)")
_WORDY = re.compile(r"[^\W\d_]")
#: the byte order marks a text file may start with (UTF-8 first: the others are longer), and their codecs
BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"),
         (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


NO_CHARSET = "a text file does not say its charset: give --encoding (encoding=), or convert it to UTF-8"
UNICODE = frozenset(("utf-8", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"))


def decode_text(data: bytes, name: str, boms: tuple[tuple[bytes, str], ...] = BOMS,
                why: str = NO_CHARSET, job: DocumentJob | None = None) -> tuple[str, str, bytes, str]:
    """The text of ``data``, its codec, its BOM (b"" for none) and a note saying what was assumed (""
    when nothing was): the charset ``job.encoding`` names; else UTF-8, or the codec of one of ``boms``
    it starts with; else, where ``job`` is given, the legacy charset of ``job.src_lang``'s files when its
    text looks right (`mtkit.formats.text.charsets.guess_legacy`); else one line naming the first line that
    does not decode, and ``why``."""
    if job is not None and job.encoding:
        return _decoded(data, name, job.encoding, b"", why), job.encoding, b"", ""
    codec, bom = "utf-8", b""
    for mark, found in boms:
        if data.startswith(mark):
            codec, bom = found, mark
            break
    try:
        return data[len(bom):].decode(codec), codec, bom, ""
    except UnicodeDecodeError:
        pass
    guess = guess_legacy(data, job.src_lang) if job is not None and not bom else None
    if guess is None:
        return _decoded(data, name, codec, bom, why), codec, bom, ""  # raises, naming the line
    return data.decode(guess.codec), guess.codec, b"", f"{name}: {guess.note}"


def _decoded(data: bytes, name: str, codec: str, bom: bytes, why: str) -> str:
    try:
        return data[len(bom):].decode(codec)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, len(bom) + exc.start) + 1
        byte = exc.object[exc.start]
        raise DataError(f"{name}:{line}: not {codec} text (byte {byte:#04x}); {why}") from None


def writing_in(job: DocumentJob, codec: str) -> DocumentJob:
    """``job`` for a file written back in ``codec``: a translation with a character the codec cannot
    write is left as it was (a legacy charset writes only its own few hundred characters)."""
    return job if codec in UNICODE else dataclasses.replace(job, writable=codec)


def translate_text(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """``data`` (the bytes of ``name``) with each line that has words translated (see the module
    docstring); a line whose translation would break a placeholder, or has no words, stays as it was
    and is reported."""
    text, codec, bom, note = decode_text(data, name, job=job)
    job = writing_in(job, codec)
    lines = [(m[1], m[2]) for m in _LINE.finditer(text) if m[0] or m.start() < len(text)]
    wanted = [n for n, (line, _) in enumerate(lines) if _WORDY.search(line)]
    outcomes = job.strings([lines[n][0] for n in wanted]) if wanted else []
    left = []
    out = [line for line, _ in lines]
    for n, outcome in zip(wanted, outcomes, strict=True):
        if outcome.text is None:
            left.append(f"{name}:{n + 1}: left as it was: {outcome.problem}")
        elif not _WORDY.search(GENERIC.sub("", outcome.text)):
            left.append(f"{name}:{n + 1}: left as it was: the translation has no words: {outcome.text!r}")
        else:
            out[n] = outcome.text.replace("\r", " ").replace("\n", " ")
    written = "".join(line + end for line, (_, end) in zip(out, lines, strict=True))
    summary = (f"{name}: {len(wanted) - len(left)} of {len(wanted)} lines translated, "
               f"{len(left)} left as they were{f' ({codec})' if note else ''}")
    return DocumentResult(bom + written.encode(codec), [note] * bool(note) + left, summary)
