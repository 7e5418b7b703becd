"""The text of subtitle cues as strings for the model and back: styling tags as numbered labels, a
sentence that runs across cues split back by length, a cue's lines balanced again.

A cue's text is shown to the model with its lines joined by spaces and each styling tag as a bare
label (``<i>``, ``<font>`` → ``<font>``, ``<c.yellow>`` → ``<c>``, numbered where a name comes more
than once in the string: ``<i1>…</i1> <i2>…</i2>``), so that the translation may move them and each
keeps its own source when written back. A tag without its pair, a WebVTT timestamp (``<00:00:05.000>``)
and an ASS override (``{\\an8}``) travel as one empty label (``<t1/>``, ``<x1/>``); those at the start
or end of a cue (with a speaker's dash) stay where they are and never reach the model.

A translation is written back only when it keeps every label once (placeholders/strings.py checked
that), nests them as the source did, leaves words in each tag that had some and keeps the timestamps
in their order; else the cue stays as it was. XLIFF's inline codes are labelled the same way
(formats/interchange/xliff_inline.py) and written back by ``check`` and ``written`` here.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

#: styling tags (SRT's <i> <b> <u> <font …>, WebVTT's <c.class>, <v Speaker>, <lang en>, <ruby>, <rt>),
#: WebVTT timestamps, SRT timestamps written the same way, and ASS overrides ({\an8}) that SRT players read
_TOKEN = re.compile(r"(?P<ts><(?:\d+:)?\d{2}:\d{2}[.,]\d{3}>)|(?P<ass>\{\\[^{}]*\})"
                    r"|<(?P<close>/?)(?P<name>[A-Za-z][\w-]*)(?:\.[^\s<>./]+)*(?:[ \t][^<>]*)?>")
_LABEL = re.compile(r"<(/?)([A-Za-z][\w-]*)(/?)>")
#: a speaker's dash at the start of a line or cue ("- Where?")
_DASH = re.compile(r"[-‐‑–—][ \t]*")
_WORDY = re.compile(r"[^\W\d_]")
#: where a cue's text ends a sentence: its last visible character (closing quotes and brackets after it)
_SENTENCE_END = re.compile(r"[.!?…。！？؟♪♫][\"'»”’)\]]*\s*$")


@dataclass
class Tag:
    """A styling tag of the source by its label: its start tag (or its whole source, for an empty
    label), its end tag, whether its content had words, and its rank among the timestamps (-1 for
    none)."""

    head: str
    tail: str = ""
    empty: bool = True
    words: bool = False
    timestamp: int = -1


@dataclass
class Segment:
    """The text of one cue, or one line of a dialogue cue, for the model: what stays before and after
    it (tags, a speaker's dash, whitespace) and the string in between (labels for its tags)."""

    prefix: str
    string: str
    suffix: str


@dataclass
class Labelled:
    """The segments of a string for the model (a sentence across several cues is several) and the
    tags its labels stand for."""

    segments: list[Segment]
    tags: dict[str, Tag] = field(default_factory=dict)

    @property
    def string(self) -> str:
        return " ".join(s.string for s in self.segments)


def has_words(text: str) -> bool:
    """Whether ``text`` (a string with labels) has a letter outside its labels."""
    return bool(_WORDY.search(_LABEL.sub(" ", text)))


def visible(text: str) -> str:
    """``text`` with its labels (or its source tags) taken out: what a viewer reads."""
    return _TOKEN.sub("", _LABEL.sub("", text))


def ends_sentence(text: str) -> bool:
    """Whether the cue text ``text`` ends a sentence (so the next cue does not continue it)."""
    return bool(_SENTENCE_END.search(visible(text)))


def has_timestamps(text: str) -> bool:
    return any(m["ts"] for m in _TOKEN.finditer(text))


def labelled(texts: list[str]) -> Labelled:
    """The segments of ``texts`` (each the text of a cue or line, lines joined by spaces) with their
    tags as labels numbered across all of them."""
    per_text = [_pieces(text) for text in texts]
    names = Counter(name for pieces in per_text for kind, name, _ in pieces[1] if kind != "text"
                    and not kind.startswith("/"))
    seen: Counter[str] = Counter()
    tags: dict[str, Tag] = {}
    stamps = 0
    segments = []
    for prefix, pieces, suffix in per_text:
        string, stamps = label_pieces(pieces, names, seen, tags, stamps)
        segments.append(Segment(prefix, string, suffix))
    return Labelled(segments, tags)


def label_pieces(pieces: list[tuple[str, str, str]], names: Counter[str], seen: Counter[str],
                 tags: dict[str, Tag], stamps: int = 0) -> tuple[str, int]:
    """One text's pieces (kind, name, source; kind "text", "open", "close" or "/…" for its end,
    "empty" or "ts") as the string for the model: each tag a label, its name alone where ``names``
    counts it once in the whole document, else numbered by ``seen``; the labels' tags added to
    ``tags``. Returns the string and the timestamps counted so far (``stamps`` before it)."""
    out: list[str] = []
    open_labels: list[tuple[str, int]] = []  # a pair's label and where its content starts in out
    for kind, name, source in pieces:
        if kind == "text":
            out.append(source)
            continue
        if kind == "close" or kind.startswith("/"):
            label, inner = open_labels.pop()
            tags[label].tail = source
            tags[label].words = has_words("".join(out[inner:]))
            out.append(f"</{label}>")
            continue
        seen[name] += 1
        label = name if names[name] == 1 else f"{name}{seen[name]}"
        if kind == "open":
            tags[label] = Tag(source, empty=False)
            open_labels.append((label, len(out) + 1))
            out.append(f"<{label}>")
        else:
            tags[label] = Tag(source, timestamp=stamps if kind == "ts" else -1)
            stamps += kind == "ts"
            out.append(f"<{label}/>")
    return "".join(out), stamps


def _pieces(text: str) -> tuple[str, list[tuple[str, str, str]], str]:
    """The prefix of ``text`` that stays (leading empty tags, a dash, whitespace), its pieces between as
    (kind, label name, source): kind "text", "open", "/open" (its end), "empty" or "ts"; the suffix."""
    tokens: list[tuple[str, str, str]] = []
    stack: list[int] = []
    at = 0
    for m in _TOKEN.finditer(text):
        if m.start() > at:
            tokens.append(("text", "", text[at:m.start()]))
        at = m.end()
        if m["ts"]:
            tokens.append(("ts", "t", m[0]))
        elif m["ass"]:
            tokens.append(("empty", "x", m[0]))
        elif not m["close"]:
            stack.append(len(tokens))
            tokens.append(("empty", m["name"].lower(), m[0]))  # "open" once its end is found
        else:
            name = m["name"].lower()
            k = next((k for k in range(len(stack) - 1, -1, -1) if tokens[stack[k]][1] == name), None)
            if k is None:
                tokens.append(("empty", name, m[0]))
                continue
            tokens[stack[k]] = ("open", name, tokens[stack[k]][2])
            del stack[k:]  # tags opened inside and never closed stay empty labels
            tokens.append(("/open", name, m[0]))
    if at < len(text):
        tokens.append(("text", "", text[at:]))
    prefix, suffix = [], []
    while tokens and (tokens[0][0] == "empty" or (tokens[0][0] == "text" and not tokens[0][2].strip())):
        prefix.append(tokens.pop(0)[2])
    if tokens and tokens[0][0] == "text":
        dash = _DASH.match(tokens[0][2].lstrip())
        lead = len(tokens[0][2]) - len(tokens[0][2].lstrip())
        cut = lead + (dash.end() if dash and tokens[0][2].lstrip()[dash.end():dash.end() + 1] != "-" else 0)
        prefix.append(tokens[0][2][:cut])
        tokens[0] = ("text", "", tokens[0][2][cut:])
    while tokens and (tokens[-1][0] == "empty" or (tokens[-1][0] == "text" and not tokens[-1][2].strip())):
        suffix.insert(0, tokens.pop()[2])
    if tokens and tokens[-1][0] == "text":
        body = tokens[-1][2].rstrip()
        suffix.insert(0, tokens[-1][2][len(body):])
        tokens[-1] = ("text", "", body)
    return "".join(prefix), tokens, "".join(suffix)


def check(source: str, translation: str, tags: dict[str, Tag]) -> str:
    """'' when ``translation`` of ``source`` can be written back with ``tags`` (words where the source
    had some, each label once, nested, each pair that had words still with some, timestamps in
    order), else why not."""
    if has_words(source) and not has_words(translation):
        return f"the translation has no words: {translation!r}"
    stack: list[tuple[str, int]] = []
    used: Counter[str] = Counter()
    stamps = []
    for m in _LABEL.finditer(translation):
        label = m[2]
        tag = tags.get(label)
        if tag is None or tag.empty != bool(m[3]) or (m[1] and m[3]):
            return f"{m[0]} is not a tag of the source"
        if m[1]:
            if not stack or stack[-1][0] != label:
                return "its tags do not nest"
            inner = translation[stack.pop()[1]:m.start()]
            if tag.words and not has_words(inner):
                return f"<{label}> lost its words"
            continue
        used[label] += 1
        if tag.timestamp >= 0:
            stamps.append(tag.timestamp)
        if not m[3]:
            stack.append((label, m.end()))
    if stack or used != Counter(tags.keys()):
        return "a tag is missing, doubled or not closed"
    if stamps != sorted(stamps):
        return "its timestamps are out of order"
    return ""


def written(text: str, tags: dict[str, Tag], escape: bool) -> str:
    """``text`` (a line of the translation, with labels) as cue text: each label its tag's source;
    ``escape``: WebVTT, where a bare ``&`` and ``<`` of the translation are written as references and
    ``-->`` (which would end the cue) is broken."""
    out, at = [], 0
    for m in _LABEL.finditer(text):
        out += [_escaped(text[at:m.start()], escape),
                tags[m[2]].tail if m[1] else tags[m[2]].head]
        at = m.end()
    out.append(_escaped(text[at:], escape))
    return "".join(out)


def _escaped(text: str, escape: bool) -> str:
    if not escape:
        return text
    text = re.sub(r"&(?!(?:[A-Za-z][A-Za-z0-9]*|#\d+|#[xX][0-9A-Fa-f]+);)", "&amp;", text)
    return text.replace("<", "&lt;").replace("-->", "--&gt;")


def _depths(text: str) -> list[tuple[int, int]]:
    """The spaces of ``text`` outside every pair of labels, as (position, visible characters before)."""
    found, depth, seen, at = [], 0, 0, 0
    for m in list(_LABEL.finditer(text)) + [None]:
        stop = m.start() if m else len(text)
        for i in range(at, stop):
            if text[i] == " " and depth == 0:
                found.append((i, seen))
            seen += 1
        if m:
            depth += 0 if m[3] else (-1 if m[1] else 1)
            at = m.end()
    return found


def split_by_length(text: str, weights: list[int]) -> list[str] | None:
    """``text`` cut at spaces outside every tag pair into ``len(weights)`` parts whose lengths are
    as near as they can be to proportional to ``weights``, each with a word; None where it cannot be."""
    if len(weights) == 1:
        return [text.strip()]
    spaces = _depths(text)
    total = len(visible(text))
    cuts = [p for p, _ in spaces]
    bounds = [0, *cuts, len(text)]
    wordy = [has_words(text[bounds[k]:bounds[k + 1]]) for k in range(len(bounds) - 1)]
    wordy_after = [sum(wordy[k:]) for k in range(len(wordy) + 1)]  # words in segments k…
    chosen: list[int] = []  # indices into cuts
    prev = -1  # segments before cut c are 0..c
    aim, whole = 0, sum(weights)
    for j in range(1, len(weights)):
        aim += weights[j - 1]
        target = total * aim / whole
        best = None
        for c in range(prev + 1, len(cuts)):
            if not any(wordy[prev + 1:c + 1]) or wordy_after[c + 1] < len(weights) - j:
                continue
            if best is None or abs(spaces[c][1] - target) < abs(spaces[best][1] - target):
                best = c
        if best is None:
            return None
        chosen.append(best)
        prev = best
    if not any(wordy[prev + 1:]):
        return None
    edges = [0, *(cuts[c] for c in chosen), len(text)]
    return [text[edges[k]:edges[k + 1]].strip() for k in range(len(edges) - 1)]


def balanced(text: str, lines: int) -> list[str]:
    """``text`` broken at spaces into at most ``lines`` lines of lengths as even as they can be."""
    spaces = [i for i, ch in enumerate(text) if ch == " "]
    if lines <= 1 or not spaces:
        return [text]
    lines = min(lines, len(spaces) + 1)
    length = len(visible(text))
    positions = {i: len(visible(text[:i])) for i in spaces}
    chosen: list[int] = []
    for j in range(1, lines):
        free = [i for i in spaces if (not chosen or i > chosen[-1])
                and len([s for s in spaces if s > i]) >= lines - 1 - j]
        chosen.append(min(free, key=lambda i: abs(positions[i] - length * j / lines)))
    edges = [-1, *chosen, len(text)]
    return [text[edges[k] + 1:edges[k + 1]] for k in range(len(edges) - 1)]
