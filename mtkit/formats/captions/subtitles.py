"""SubRip (.srt) and WebVTT (.vtt) subtitles: the text of each cue translated, every other byte as it
was (cue numbers, identifiers, timings with WebVTT's settings, the WEBVTT header, NOTE, STYLE and
REGION blocks, blank lines, line endings, the BOM).

The file is read as it is written and each translation replaces the span of its cue's text, never
re-serialized. A sentence that runs on across cues (a cue whose text ends with no sentence end,
followed within two seconds by one that starts no new speaker; at most four cues) is translated as
one string and split back across its cues at spaces, by the lengths of the source cues, each keeping
a word; each cue's text is broken into as many lines as it had, as even as they can be. A cue whose
lines each start a speaker (``- Who?`` / ``- Me.``, or ``<v Ann>``) has each line translated apart.
Styling tags come back with the text they hold (formats/captions/subtitle_text.py).

Encoding: UTF-8 (with or without a BOM) or UTF-16 or UTF-32 with a BOM, written back the same;
WebVTT is UTF-8 by definition. An SRT file in another charset (most downloaded ones: the Windows code
page of their language) is read in the charset ``--encoding`` names, or else in its language's legacy
charset where the text looks right (formats/text/charsets.py), said in the notes and the summary, and written
back in it; refused, naming its first undecodable line, only where no charset can be decided.

Refused in one line naming the file and line: a timing line that does not parse, a cue without a
timing, a WebVTT file that does not start with ``WEBVTT``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mtkit.errors import DataError
from mtkit.formats.captions import subtitle_text as cue_text
from mtkit.formats.documents import DocumentJob, DocumentResult
from mtkit.formats.text.plaintext import BOMS, decode_text, writing_in
from mtkit.placeholders.strings import Outcome

_LINE = re.compile(r"[^\r\n]*(\r\n|\n|\r|$)")
#: timings as players read them (the srt library too): a dot or colon before the milliseconds, unpadded
#: numbers; the bytes are never rewritten, so reading leniently changes nothing in the file
_SRT_TIME = r"(\d+):(\d{1,2}):(\d{1,2})(?:[,.:](\d{1,3}))?"
_SRT_TIMING = re.compile(rf"\s*{_SRT_TIME}\s*-[ -]?>\s*{_SRT_TIME}(?:\s.*)?")
_VTT_TIME = r"(?:(\d+):)?(\d{1,2}):(\d{1,2})\.(\d{1,3})"
_VTT_TIMING = re.compile(rf"{_VTT_TIME}[ \t]+-->[ \t]+{_VTT_TIME}(?:[ \t].*)?")
_VTT_BLOCKS = re.compile(r"(?:NOTE|STYLE|REGION)(?:[ \t]|$)")
#: cues that run on as one sentence: at most this many, each starting at most this long after the last
_MAX_JOINED, _MAX_GAP = 4, 2.0


@dataclass
class Cue:
    """A cue as it is written: the line number of its text's first line, its start and end in seconds,
    the span of its text in the file (lines and the breaks between them, no final break), its lines and the
    line break they are written with."""

    line: int
    begin: float
    end: float
    span: tuple[int, int]
    lines: list[str]
    newline: str

    @property
    def text(self) -> str:
        return " ".join(line.strip() for line in self.lines)

    def per_line(self) -> bool:
        """Whether each line starts a speaker of its own (a dash, a WebVTT voice) and keeps its tags
        to itself: then each is translated apart."""
        starts = [bool(re.match(r"\s*(?:\{\\[^{}]*\}|<[^v/][^<>]*>)*\s*(?:[-‐‑–—]|<v[ .])", line))
                  for line in self.lines]
        if len(self.lines) < 2 or sum(starts) < 2:
            return False
        return _pairs(self.text) == sum(_pairs(line) for line in self.lines)


def _pairs(text: str) -> int:
    """How many pairs of tags ``text`` holds: a cue holds more than its lines alone where a pair reaches
    from one line into another."""
    return sum(not tag.empty for tag in cue_text.labelled([text]).tags.values())


@dataclass
class Report:
    cues: int = 0  # cues with words
    translated: int = 0
    joined: int = 0  # sentences that ran across cues, translated as one
    left: list[str] = field(default_factory=list)


def translate_srt(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """A SubRip file (see the module docstring)."""
    text, codec, bom, note = _decode(data, name, job, vtt=False)
    cues = read_srt(text, name)
    out, report = _translate(text, cues, name, writing_in(job, codec), escape=False)
    summary = _summary(name, report) + (f" ({codec})" if note else "")
    return DocumentResult(bom + out.encode(codec), [note] * bool(note) + report.left, summary)


def translate_vtt(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """A WebVTT file (see the module docstring)."""
    text, codec, bom, _ = _decode(data, name, job, vtt=True)
    cues = read_vtt(text, name)
    out, report = _translate(text, cues, name, job, escape=True)
    return DocumentResult(bom + out.encode(codec), report.left, _summary(name, report))


def _summary(name: str, report: Report) -> str:
    return (f"{name}: {report.translated} of {report.cues} cues translated ({report.joined} sentences "
            f"across cues), {len(report.left)} left as they were")


def _decode(data: bytes, name: str, job: DocumentJob, vtt: bool) -> tuple[str, str, bytes, str]:
    """The text of ``data``, its codec, its BOM (b"" for none) and what was assumed (plaintext.decode_text):
    WebVTT is UTF-8 by definition; SubRip says nothing, so its language's legacy charset is tried."""
    if vtt:
        return decode_text(data, name, BOMS[:1], "WebVTT is UTF-8")
    return decode_text(data, name, BOMS, "a SubRip file does not say its charset and it could not be "
                       "decided: give --encoding (e.g. cp1252), or convert it to UTF-8", job)


def _lines(text: str) -> list[tuple[int, str, str]]:
    """Each line of ``text``: its offset, its content and its line break ('' for the last)."""
    found = []
    for m in _LINE.finditer(text):
        if m.start() == len(text) and (not found or found[-1][2]):
            break
        found.append((m.start(), m[0][:len(m[0]) - len(m[1])], m[1]))
        if not m[1]:
            break
    return found


def _seconds(parts: tuple[str | None, ...]) -> float:
    hours, minutes, secs, millis = (int(p) if p else 0 for p in parts)
    return hours * 3600 + minutes * 60 + secs + int(millis or 0) / 10 ** len(parts[3] or "0")


def read_srt(text: str, name: str) -> list[Cue]:
    """The cues of a SubRip file, each with its text's span (see the module docstring for what is
    refused)."""
    lines = _lines(text)
    timing = [_SRT_TIMING.fullmatch(content) for _, content, _ in lines]

    def starts_cue(i: int) -> bool:  # a timing line, or a cue number before one
        number = i + 1 < len(lines) and lines[i][1].strip().isdigit()
        return bool(timing[i]) or (number and bool(timing[i + 1]))

    cues, i = [], 0
    while i < len(lines):
        if not lines[i][1].strip():
            i += 1
            continue
        if not starts_cue(i):
            bad = i + 1 if lines[i][1].strip().isdigit() and i + 1 < len(lines) else i
            why = (f"a timing line that does not parse: {lines[bad][1].strip()[:60]!r} (expected "
                   "00:00:01,000 --> 00:00:04,000)" if "-->" in lines[bad][1] or "->" in lines[bad][1]
                   else f"a cue without a timing line: {lines[i][1].strip()[:60]!r}")
            raise DataError(f"{name}:{bad + 1}: {why}")
        if not timing[i]:
            i += 1
        m = timing[i]
        assert m is not None
        i = first = i + 1
        while i < len(lines) and lines[i][1].strip() and not starts_cue(i):
            i += 1
        cues.append(_cue(lines, first, i, _seconds(m.groups()[:4]), _seconds(m.groups()[4:8])))
    return cues


def _cue(lines: list[tuple[int, str, str]], first: int, stop: int, begin: float, end: float) -> Cue:
    own = lines[first:stop]
    span = (own[0][0], own[-1][0] + len(own[-1][1])) if own else (0, 0)
    newline = own[0][2] if len(own) > 1 else ""
    return Cue(first + 1, begin, end, span, [content for _, content, _ in own], newline or "\n")


def read_vtt(text: str, name: str) -> list[Cue]:
    """The cues of a WebVTT file, each with its text's span (see the module docstring for what is
    refused)."""
    lines = _lines(text)
    if not lines or not re.match(r"WEBVTT(?:[ \t]|$)", lines[0][1]):
        raise DataError(f"{name}:1: not a WebVTT file: it must start with WEBVTT")
    i = 0
    while i < len(lines) and lines[i][1].strip():  # the header
        i += 1
    cues = []
    while i < len(lines):
        if not lines[i][1].strip():
            i += 1
            continue
        if _VTT_BLOCKS.match(lines[i][1]) and "-->" not in lines[i][1]:
            while i < len(lines) and lines[i][1].strip():
                i += 1
            continue
        at = i if "-->" in lines[i][1] else i + 1  # a cue identifier first, or not
        if at >= len(lines) or "-->" not in lines[at][1]:
            raise DataError(f"{name}:{i + 1}: a cue without a timing line: {lines[i][1].strip()[:60]!r}")
        m = _VTT_TIMING.fullmatch(lines[at][1].strip("\ufeff"))
        if m is None:
            raise DataError(f"{name}:{at + 1}: a timing line that does not parse: {lines[at][1][:60]!r} "
                            "(expected 00:01.000 --> 00:04.000, then settings)")
        i = first = at + 1
        while i < len(lines) and lines[i][1].strip() and "-->" not in lines[i][1]:
            i += 1
        cues.append(_cue(lines, first, i, _seconds(m.groups()[:4]), _seconds(m.groups()[4:8])))
    return cues


@dataclass
class _Unit:
    """One string for the model: the cues (or the one line of a dialogue cue) it fills."""

    cues: list[int]
    line: int | None  # the line of a dialogue cue, None for whole cues
    labelled: cue_text.Labelled


def _units(cues: list[Cue]) -> list[_Unit]:
    """The strings to translate: runs of cues that make one sentence, and each line of dialogue cues."""
    units: list[_Unit] = []
    run: list[int] = []

    def close() -> None:
        if run:
            units.append(_Unit(list(run), None, cue_text.labelled([cues[k].text for k in run])))
            run.clear()

    for k, cue in enumerate(cues):
        if not cue_text.has_words(cue_text.visible(cue.text)):
            close()
            continue
        if cue.per_line():
            close()
            units += [_Unit([k], n, cue_text.labelled([line])) for n, line in enumerate(cue.lines)
                      if cue_text.has_words(cue_text.visible(line))]
            continue
        if run and not _continues(cues[run[-1]], cue, len(run)):
            close()
        run.append(k)
    close()
    return units


def _continues(before: Cue, cue: Cue, joined: int) -> bool:
    """Whether ``cue`` goes on with the sentence of ``before``."""
    return (joined < _MAX_JOINED and not cue_text.ends_sentence(before.text)
            and 0 <= cue.begin - before.end <= _MAX_GAP
            and not cue_text.has_timestamps(before.text) and not cue_text.has_timestamps(cue.text)
            and cue_text.labelled([cue.text]).segments[0].prefix.strip() == "")


#: per cue of a unit, its new lines
_CueLines = list[list[str]]


def _translate(text: str, cues: list[Cue], name: str, job: DocumentJob, escape: bool) -> tuple[str, Report]:
    """``text`` with the text of its ``cues`` translated (``escape``: WebVTT's escaping), and the report."""
    units = _units(cues)
    report = Report(cues=len({k for unit in units for k in unit.cues}))
    new_lines: dict[int, list[str]] = {}  # a cue's new lines
    failed: set[int] = set()
    pending = units
    for attempt in range(2):  # a sentence that cannot be split back is translated cue by cue
        outcomes = job.strings([u.labelled.string for u in pending]) if pending else []
        retry = []
        for unit, outcome in zip(pending, outcomes, strict=True):
            parts, problem = _parts(unit, outcome, cues, escape)
            if problem and len(unit.cues) > 1 and attempt == 0:
                retry += [_Unit([k], None, cue_text.labelled([cues[k].text])) for k in unit.cues]
            elif problem:
                failed.update(unit.cues)
                line = cues[unit.cues[0]].line + (unit.line or 0)
                report.left.append(f"{name}:{line}: left as it was: {problem}")
            elif parts is not None:  # None: the same text, the cues as they were
                report.joined += len(unit.cues) > 1
                for k, part in zip(unit.cues, parts, strict=True):
                    lines = new_lines.setdefault(k, list(cues[k].lines))
                    lines[slice(None) if unit.line is None else slice(unit.line, unit.line + 1)] = part
        pending = retry
    report.translated = report.cues - len(failed)
    splices = [(cues[k].span, cues[k].newline.join(lines)) for k, lines in new_lines.items()]
    out, at = [], 0
    for (start, end), new in sorted(splices):
        out += [text[at:start], new]
        at = end
    return "".join(out) + text[at:], report


def _parts(unit: _Unit, outcome: Outcome, cues: list[Cue], escape: bool) -> tuple[_CueLines | None, str]:
    """Per cue of ``unit``, its new lines for the translation ``outcome`` (a sentence across cues split
    back by the lengths of their source texts; None for a translation equal to its source), or why it
    cannot be written."""
    if outcome.text is None:
        return None, outcome.problem
    translation = " ".join(outcome.text.split())  # one space between words: never an empty line
    problem = cue_text.check(unit.labelled.string, translation, unit.labelled.tags)
    if problem or translation == unit.labelled.string:
        return None, problem
    segments = unit.labelled.segments
    weights = [max(1, len(cue_text.visible(s.string))) for s in segments]
    pieces = cue_text.split_by_length(translation, weights)
    if pieces is None:
        return None, f"its translation cannot be split back over its {len(segments)} cues: {translation!r}"
    found = []
    for k, segment, piece in zip(unit.cues, segments, pieces, strict=True):
        count = 1 if unit.line is not None else len(cues[k].lines)
        lines = [cue_text.written(line, unit.labelled.tags, escape)
                 for line in cue_text.balanced(piece, count)]
        lines[0] = segment.prefix + lines[0]
        lines[-1] += segment.suffix
        if any(_SRT_TIMING.fullmatch(line) or _VTT_TIMING.fullmatch(line) for line in lines):
            return None, f"a line of its translation would read as a timing line: {translation!r}"
        found.append(lines)
    return found, ""
