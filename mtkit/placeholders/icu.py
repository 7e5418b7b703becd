"""ICU MessageFormat's complex arguments inside a string: ``{count, plural, one {# file} other {# files}}``.

Their structure is code (the argument's name, ``plural``/``select``/``selectordinal``, ``offset:1``, the
selectors ``one``, ``=0``, ``other``, the braces, ``#``); only the message of each branch is text. So a
string holding one is translated in parts (placeholders/strings.py): the text around it with the
argument standing as a short placeholder (``{count}``), and each branch's message as a string of its own
(``# file``, where ``#`` is a placeholder in plural branches), then put together again in the same
structure. ICU's apostrophe quoting (``'{'``, ``''``) is respected when braces are matched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEAD = re.compile(r"\{\s*(\w+)\s*,\s*(plural|selectordinal|select)\s*,\s*(?:offset\s*:\s*\d+\s*)?")
_SELECTOR = re.compile(r"\s*(=\d+|[\w-]+)\s*")


@dataclass
class ComplexArg:
    """One complex argument of a string: where it stands, its name, its text with each branch message
    cut out (``template``: literal pieces and branch numbers in order), and its branch messages."""

    start: int
    end: int
    name: str
    template: list[str | int]
    branches: list[str]
    counts: bool  # plural or selectordinal: "#" in its branches is the number

    def rebuilt(self, messages: list[str]) -> str:
        """The argument again, with ``messages`` (translated branches) in its branches' places."""
        return "".join(messages[p] if isinstance(p, int) else p for p in self.template)


def _closing(text: str, at: int) -> int:
    """The index just past the ``}`` matching the ``{`` at ``at``, or -1 (ICU's quotes skipped)."""
    depth, i = 0, at
    while i < len(text):
        c = text[i]
        if c == "'" and i + 1 < len(text) and text[i + 1] in "{}#|":
            j = text.find("'", i + 1)
            if j < 0:
                return -1
            i = j + 1
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _parse(text: str, start: int, end: int) -> ComplexArg | None:
    """The complex argument spanning ``text[start:end]``, or None where it is not one."""
    head = _HEAD.match(text, start, end)
    if head is None:
        return None
    template: list[str | int] = [text[start:head.end()]]
    branches: list[str] = []
    i = head.end()
    while i < end - 1:
        selector = _SELECTOR.match(text, i, end - 1)
        if selector is None or selector.end() >= end - 1 or text[selector.end()] != "{":
            return None
        close = _closing(text, selector.end())
        if close < 0 or close > end - 1:
            return None
        template[-1] += text[i:selector.end() + 1]
        template += [len(branches), "}"]
        branches.append(text[selector.end() + 1:close - 1])
        i = close
        gap = re.match(r"\s*", text[i:end - 1])
        template[-1] += gap[0] if gap else ""
        i += len(gap[0]) if gap else 0
    if not branches:
        return None
    template[-1] += "}"
    return ComplexArg(start, end, head[1], template, branches, head[2] != "select")


def complex_args(text: str) -> list[ComplexArg]:
    """The top-level complex arguments of ``text``, in order (none where it has none, or where its
    braces do not parse as ICU's)."""
    found: list[ComplexArg] = []
    i = text.find("{")
    while i >= 0:
        end = _closing(text, i)
        if end < 0:
            break
        arg = _parse(text, i, end)
        if arg is not None:
            found.append(arg)
            i = text.find("{", end)
        else:
            i = text.find("{", i + 1)
    return found


def stand_ins(text: str, args: list[ComplexArg]) -> tuple[str, list[str]]:
    """``text`` with each complex argument replaced by a short placeholder ``{name}`` (numbered where
    that is not unique), and those placeholders."""
    out, marks, at = [], [], 0
    for n, arg in enumerate(args):
        mark = "{" + arg.name + "}"
        while mark in text or mark in marks:
            mark = "{" + f"{arg.name}{n}" + "}"
            n += 1
        out += [text[at:arg.start], mark]
        marks.append(mark)
        at = arg.end
    out.append(text[at:])
    return "".join(out), marks
