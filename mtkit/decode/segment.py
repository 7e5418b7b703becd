"""Input hygiene and segmentation for translation: control characters out, a line cut into the
sentences a model was trained on, and a sentence too long for the model cut into pieces it handles.

Why every line is cut into sentences: models are trained on single sentences, and fed a paragraph
they translate its first sentences and end early (a 300-sentence man-page paragraph came out with a
third of its words). A line of several sentences is therefore translated sentence by sentence, and
the translations are joined; a line of one sentence is the model's input as it stands.

The sentence splitter is rule-based and dependency-free. It errs on the side of not cutting: a
missed boundary costs a somewhat longer input, a wrong one can cut a phrase in half. A Latin-style
end (``. ! ? …`` and closing quotes) needs whitespace after it and a next word that can start a
sentence (capital, digit, uncased script, opening quote), or after a period a lowercase word
("rm removes each file. rm -r …" is common in technical text); after a period the word before must
not be an abbreviation ("e.g.", "Dr.", "No. 5", "etc. and"), an initial ("J. Smith") or a list
number ("1. Install"). Full-width ends (``。！？``) need no space. ``3.5`` and ``config.yaml`` have
no space after the dot.
"""

from __future__ import annotations

import math
import re
import unicodedata

from mtkit.data.bpe import Bpe

_CLOSERS = "\"'”’»)\\]}」』）】〉》"
_OPENERS = "\"'“‘„«([{¿¡「『（【〈《"
# a Latin-style end (group 1) with closing quotes (2) and the whitespace after it (3), or a
# full-width end (4) with closing quotes that needs no whitespace
_BOUNDARY = re.compile(rf"([.!?…।؟۔]+)([{_CLOSERS}]*)(\s+)|([。！？｡]+[{_CLOSERS}]*)\s*")
# words that a period follows without ending the sentence, compared in lower case
_NEVER_END = frozenset({
    "e.g", "i.e", "cf", "vs", "viz", "approx", "ca", "resp", "incl", "excl", "esp", "al", "mr", "mrs", "ms",
    "dr", "prof", "st", "jr", "sr", "gen", "col", "lt", "capt", "sgt", "rev", "hon", "dept", "univ", "ref",
    "refs", "ed", "eds", "a.k.a", "w.r.t", "z.b", "d.h", "u.a", "bzw", "ggf", "vgl", "evtl", "sog", "inkl",
    "usw",
})
# words that a period follows without ending the sentence when a number comes next ("No. 5")
_BEFORE_NUMBER = frozenset({"no", "nos", "nr", "p", "pp", "fig", "figs", "vol", "sec", "ch", "art", "eq",
                            "tab"})
# words that a period follows without ending the sentence when a lowercase word comes next
_BEFORE_LOWER = frozenset({"etc", "max", "min", "avg", "misc", "eg", "ie", "nb", "ver", "op", "cit", "et"})
_DOTTED = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")  # U.S, z.B: letters with inner periods
_LIST_NUMBER = re.compile(r"\d{1,3}|[ivxIVX]{1,4}")


# default-ignorable code points (Unicode's DerivedCoreProperties) outside category Cf: variation
# selectors, fillers and the like, drawn as nothing; with Cf, Cc and whitespace they are what
# `has_visible` looks through
_IGNORABLE = re.compile("[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u2065\u3164\ufe00-\ufe0f"
                        "\uffa0\ufff0-\ufff8\U000e0000-\U000e0fff]")
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zs", "Zl", "Zp"})


def valid_unicode(text: str) -> str:
    """``text`` as a string that encodes to UTF-8: a surrogate pair left as two code points (text cut
    from UTF-16, as JavaScript holds it) becomes the character it stands for, and a lone surrogate
    (half an emoji, a JSON escape such as ``\\ud800``) becomes U+FFFD, as an undecodable byte does
    when `mtkit translate` reads a file. Tokenizers and HTTP answers cannot encode a surrogate, so
    none may pass into the library."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def has_visible(text: str) -> bool:
    """Whether ``text`` holds a character that is drawn: not whitespace, a control, a format
    character (bidi controls, zero-width spaces and joiners, soft hyphen) or another
    default-ignorable one (variation selectors). A model given only such characters sees noise it
    never saw in training and invents a sentence for it."""
    return any(not (c.isspace() or unicodedata.category(c) in _INVISIBLE_CATEGORIES or _IGNORABLE.match(c))
               for c in text)


def clean_line(line: str) -> str:
    """The text a model is given for ``line``: valid Unicode (`valid_unicode`); control characters
    become spaces (they are never meaningful input and some tokenizers choke on them); runs of
    whitespace collapse to one space; a line with nothing visible (`has_visible`) is empty, so it is
    translated into an empty line as a blank one is."""
    line = valid_unicode(line)
    if any(unicodedata.category(c) == "Cc" for c in line):
        line = "".join(" " if unicodedata.category(c) == "Cc" else c for c in line)
    line = " ".join(line.split())
    return line if has_visible(line) else ""


def split_sentences(text: str) -> list[str]:
    """The sentences of a cleaned line (see the module docstring for the rules), in order, without
    the whitespace between them. A line of one sentence comes back unchanged, as ``[text]``."""
    sentences: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if m.end() >= len(text):
            break  # the line's own end
        if m.group(4) is None and not _ends_sentence(text, start, m):
            continue
        sentences.append(text[start:m.start(3) if m.group(4) is None else m.end()].strip())
        start = m.end()
    sentences.append(text[start:].strip())
    return [s for s in sentences if has_visible(s)]  # "你好。\u200b": no sentence of format characters


def _ends_sentence(text: str, start: int, m: re.Match[str]) -> bool:
    """Whether the Latin-style end ``m`` (inside the sentence begun at ``start``) ends it."""
    opener = text[m.end()] in _OPENERS
    nxt = text[m.end():m.end() + 8].lstrip(_OPENERS)[:1] or text[m.end()]
    capital = opener or nxt.isupper() or nxt.isdigit() or unicodedata.category(nxt) in ("Lo", "Lt")
    if m.group(1) != ".":
        return capital  # ! ? … and runs of them: "Yahoo! is", "Well... nothing" go on
    if not (capital or nxt.islower()):
        return False  # a symbol: "-v. -q", "*. *"
    word_start = max(start, text.rfind(" ", start, m.start(1)) + 1)
    word = text[word_start:m.start(1)].lstrip(_OPENERS)
    key = word.lower()
    if key in _NEVER_END or (key in _BEFORE_NUMBER and nxt.isdigit()):
        return False
    if (len(word) == 1 and word.isalpha()) or _DOTTED.fullmatch(word):
        return False  # an initial or a dotted abbreviation
    if word_start == start and _LIST_NUMBER.fullmatch(word):
        return False  # "1. Install the package"
    # technical text starts sentences with lowercase names ("rm removes each file."), but a
    # lowercase word also follows abbreviations that may end a sentence ("etc. and", "max. size")
    return capital or not (key in _BEFORE_LOWER or key in _BEFORE_NUMBER or word.isdigit())


# clause boundaries, strongest first: where an over-long sentence is cut before fixed windows
_CLAUSES = (re.compile(r"(?<=;)\s+|(?<=；)\s*"), re.compile(r"(?<=:)\s+|(?<=：)\s*"),
            re.compile(r"(?<=,)\s+|(?<=[，、])\s*"))


def cut_sentence(text: str, ids: list[int], bpe: Bpe, limit: int) -> list[list[int]]:
    """Pieces of at most ``limit`` subwords of one sentence (``ids`` is its encoding): cut at the
    strongest clause boundary that makes the pieces fit (``;`` then ``:`` then ``,``), pieces of
    about equal size; a clause still too long is cut into windows, at word starts where possible."""
    return _cut(text, ids, bpe, limit, 0)


def _cut(text: str, ids: list[int], bpe: Bpe, limit: int, level: int) -> list[list[int]]:
    if len(ids) <= limit:
        return [ids]
    if level == len(_CLAUSES):
        return _windows(ids, bpe, limit)
    parts = [p for p in _CLAUSES[level].split(text) if p]
    if len(parts) < 2:
        return _cut(text, ids, bpe, limit, level + 1)
    encoded = bpe.encode_ids(parts)
    target = sum(map(len, encoded)) / math.ceil(sum(map(len, encoded)) / limit)
    groups: list[tuple[list[str], list[int]]] = []
    texts: list[str] = []
    current: list[int] = []
    for part, part_ids in zip(parts, encoded, strict=True):
        joined = len(current) + len(part_ids)
        if current and (joined > limit or abs(joined - target) > abs(len(current) - target)):
            groups.append((texts, current))
            texts, current = [], []
        texts.append(part)
        current = current + part_ids
    groups.append((texts, current))
    out: list[list[int]] = []
    for group_texts, group_ids in groups:
        out.extend(_cut(" ".join(group_texts), group_ids, bpe, limit, level + 1))
    return out


def _windows(ids: list[int], bpe: Bpe, limit: int) -> list[list[int]]:
    """Windows of at most ``limit`` subwords, of about equal size, each ending before a word start
    when one lies in the window's second half."""
    pieces = bpe.id_to_piece(ids)
    out: list[list[int]] = []
    start = 0
    while len(ids) - start > limit:
        size = math.ceil((len(ids) - start) / math.ceil((len(ids) - start) / limit))
        end = start + size
        for j in range(end, start + size // 2, -1):
            if pieces[j].startswith("\u2581"):
                end = j
                break
        out.append(ids[start:end])
        start = end
    out.append(ids[start:])
    return out


__all__ = ["clean_line", "cut_sentence", "has_visible", "split_sentences", "valid_unicode"]
