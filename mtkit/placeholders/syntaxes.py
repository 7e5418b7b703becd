"""What a placeholder is, per syntax, and whether a translation keeps a string's placeholders.

The generic set (printf directives with gettext's ``%<PRIu64>``, brace, dollar and Ruby ``%{name}``
placeholders, Symfony's ``%name%`` and Twig's ``{{ name }}``, ICU simple arguments, tags, entities)
serves plain text and unflagged catalog entries; a gettext format flag (``qt-format``,
``python-brace-format`` …) puts its syntax's own forms first (``syntax_for``). ``kept`` is the one
check every translation of a string with placeholders passes before it is written
(placeholders/strings.py): the same placeholders as a multiset, printf's ordered directives in order,
tags nested as they were, and in a printf syntax no ``%`` that printf would read.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

_PRINTF = (r"%(?:\([A-Za-z_]\w*\)|[1-9]\d*\$)?[-+#0'I]*(?:\d+|\*)?(?:\.(?:\d+|\*))?"
           r"(?:(?:hh|h|ll|l|L|q|j|z|t)?[diouxXeEfFgGaAcsSp%mr]|<PRI[A-Za-z0-9_]+>)")
_PRINTF_WHOLE = re.compile(_PRINTF)
#: printf directives as C reads them, the space flag too ("% d"): "100% sure" is no directive in prose,
#: but a translation of a string with directives must not gain one that printf would read
_PRINTF_C = re.compile(_PRINTF.replace("[-+#0'I]", "[-+ #0'I]"))
_BRACE = r"\{\s*\$[\w-]+\s*\}|\{[\w.\[\]]*(?:![rsa])?(?::[^{}\s]*)?\}"
#: ICU MessageFormat's simple arguments ({n, number}, {d, date, short}); Ruby's and Rails' %{name}
_ICU_SIMPLE = r"\{\s*\w+\s*,\s*(?:number|date|time|spellout|ordinal|duration)\s*(?:,[^{}]*)?\}"
_RUBY_NAMED = r"%\{\w+\}"
#: Symfony's %name% (and Windows' %PATH%): a name of letters, digits, _ . -, not itself a printf
#: directive followed by a % (``%d%%``, ``%ld%s`` are printf's); never in a printf-flagged string,
#: where msgfmt reads every % as a directive's start. Twig's, Jinja's and Mustache's {{ name }}
#: (filters too: ``{{ user.name|upper }}``); a brace-format flag's ``{{`` escape is tried first.
_PRINTF_THEN_PERCENT = (r"[-+#0'I]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|L|q|j|z|t)?"
                        r"[diouxXeEfFgGaAcsSp%mr]%")
_SYMFONY = rf"%(?!{_PRINTF_THEN_PERCENT})[A-Za-z_][\w.-]*(?<![.-])%"
_TWIG = r"\{\{-?\s*[^{}\s][^{}]*?\s*-?\}\}"
_DOLLAR = r"\$\{[A-Za-z_]\w*\}|\$[A-Za-z_]\w*"
_TAG = (r"</?[A-Za-z][\w:.-]*(?:\s+[\w:.-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s\"'<>]+))?)*\s*/?>")
_ENTITY = r"&(?:[A-Za-z][A-Za-z0-9]*|#\d+|#[xX][0-9A-Fa-f]+);"
_GENERIC = (_RUBY_NAMED, _SYMFONY, _PRINTF, _ICU_SIMPLE, _TWIG, _BRACE, _DOLLAR, _TAG, _ENTITY)
#: the generic set where every % starts a printf directive (a printf flag's entries)
_GENERIC_PRINTF = tuple(p for p in _GENERIC if p != _SYMFONY)
PLACEHOLDER = re.compile("|".join(f"(?:{p})" for p in _GENERIC))
#: what each gettext format flag adds to the generic set (tried first, so ``%1`` of a Qt string is one
#: placeholder, not the start of a printf directive); the flag says which syntax the entry's strings use
FLAG_SYNTAX = {
    **dict.fromkeys(("qt-format", "kde-format", "kde-kuit-format", "ycp-format", "smalltalk-format"),
                    r"%L?[1-9]\d?"),
    "qt-plural-format": r"%L?n",
    "ruby-format": r"%<\w+>[-+ #0]*\d*(?:\.\d+)?[a-zA-Z]",
    **dict.fromkeys(("python-brace-format", "csharp-format", "perl-brace-format", "java-format"),
                    r"\{\{|\}\}|\{\d+\s*,\s*-?\d+(?::[^{}]*)?\}|\{\d+\s*,\s*\w+(?:\s*,[^{}]*)?\}"),
    "boost-format": r"%\|?[1-9]\d*(?:\$[^|%]*\||%)",
    "object-pascal-format": r"%(?:\d+:)?-?\d*(?:\.\d+)?[dueEfgGnmpsxX]",
    **dict.fromkeys(("lisp-format", "scheme-format"), r"~[@:]*[aAsSdDbBoOxXrR%&~pPcC]"),
    "gcc-internal-format": r"%[qlw+#]*[<>'qsdiucDEFTV]|%<|%>",
    "php-format": r"%(?:[1-9]\d*\$)?(?:'.|[-+ 0])*\d*(?:\.\d+)?[bcdeEfFgGosuxX]",
}
#: the flags of printf's syntax: in their strings every % starts a directive (msgfmt refuses a stray one)
PRINTF_FLAGS = frozenset(("c-format", "objc-format", "python-format", "php-format", "perl-format",
                          "awk-format", "lua-format", "gcc-internal-format", "gfc-internal-format",
                          "javascript-format", "ruby-format", "tcl-format", "sh-printf-format"))


@dataclass(frozen=True)
class Syntax:
    """The placeholders of one kind of string: a regex finding them, and whether the string is in a
    printf syntax (then every ``%`` in it starts a directive)."""

    regex: re.Pattern[str]
    printf: bool = False

    def findall(self, text: str) -> list[str]:
        return self.regex.findall(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self.regex.finditer(text)

    def sub(self, replacement: str, text: str) -> str:
        return self.regex.sub(replacement, text)


GENERIC = Syntax(PLACEHOLDER)
_BY_FLAGS: dict[tuple[frozenset[str], bool, str], Syntax] = {}


def syntax_for(flags: Sequence[str], extra: str = "") -> Syntax:
    """The placeholders of a string whose gettext entry has ``flags`` (its ``*-format`` flags name the
    syntax; "no-…-format" ones and others are ignored): the family's own forms before the generic set,
    and ``extra`` (a regex; ICU plural branches add ``#``)."""
    families = frozenset(f for f in flags if f in FLAG_SYNTAX)
    key = (families, bool(PRINTF_FLAGS & set(flags)), extra)
    if key not in _BY_FLAGS:
        generic = _GENERIC_PRINTF if key[1] else _GENERIC
        parts = [*(FLAG_SYNTAX[f] for f in sorted(families)), *([extra] if extra else []), *generic]
        _BY_FLAGS[key] = Syntax(re.compile("|".join(f"(?:{p})" for p in parts)), key[1])
    return _BY_FLAGS[key]



def placeholders(text: str, syntax: Syntax = GENERIC) -> list[str]:
    """The placeholders of ``text`` (in ``syntax``, the generic set by default), in order."""
    return syntax.findall(text)


def in_order(found: list[str]) -> list[str]:
    """The printf directives among ``found`` whose arguments come in order (see ``_ordered``)."""
    return [p for p in found if _ordered(p)]


def _ordered(placeholder: str) -> bool:
    """A printf directive whose argument comes in order: not %%, not %(name)s, not %1$s."""
    return bool(_PRINTF_WHOLE.fullmatch(placeholder)) and not re.match(r"%(?:[(%]|[1-9]\d*\$)", placeholder)


def kept(source: str, translation: str, syntax: Syntax = GENERIC) -> str:
    """'' when ``translation`` keeps the placeholders of ``source`` (see the module docstring), else
    what is wrong, in a few words ("lost %s", "added <b>", "%s %d out of order")."""
    want, got = placeholders(source, syntax), placeholders(translation, syntax)
    lost, added = Counter(want) - Counter(got), Counter(got) - Counter(want)
    if lost or added:
        return "; ".join(part for part in (
            "lost " + " ".join(sorted(lost.elements())) if lost else "",
            "added " + " ".join(sorted(added.elements())) if added else "") if part)
    if reads_printf(source, syntax):  # as C reads them, the other placeholders (%name%, %{x}) aside
        c_source, c_translation = _printf_read(source, syntax), _printf_read(translation, syntax)
        c_lost = Counter(_PRINTF_C.findall(c_source)) - Counter(_PRINTF_C.findall(c_translation))
        c_added = Counter(_PRINTF_C.findall(c_translation)) - Counter(_PRINTF_C.findall(c_source))
        if c_lost or c_added:
            return "printf directives changed: " + " ".join(sorted({*c_lost, *c_added}))
        if _PRINTF_C.sub("", c_translation).count("%") > _PRINTF_C.sub("", c_source).count("%"):
            return "a % that starts no printf directive"  # printf would read one, and msgfmt refuses it
    if _nested(want) and not _nested(got):
        return "tags out of nesting: " + " ".join(p for p in got if p.startswith("<"))
    order_want = [p for p in want if _ordered(p)]
    if order_want != [p for p in got if _ordered(p)]:
        return " ".join(order_want) + " out of order"
    return ""


def _printf_read(text: str, syntax: Syntax) -> str:
    """``text`` as ``kept`` reads it for printf: its placeholders of other kinds as a space (Symfony's
    ``%count%`` holds no ``%c`` for C, and was kept or not by the multiset already)."""
    return syntax.regex.sub(lambda m: m[0] if _PRINTF_WHOLE.fullmatch(m[0]) else " ", text)


def reads_printf(source: str, syntax: Syntax = GENERIC) -> bool:
    """Whether ``kept`` reads a translation of ``source`` as printf does (the syntax is printf's, or the
    source holds a printf directive): then a ``%`` that starts no directive, or one C reads that the
    generic set does not (``% d``), must not be added."""
    return syntax.printf or any(_PRINTF_WHOLE.fullmatch(p) for p in placeholders(source, syntax))


#: what besides its placeholders is taken out of a string that printf reads, before the model sees it:
#: directives C reads ("% d"), gcc's quotes (``%<``, ``%>``) and any other ``%`` with the letters after it
#: (``%qD``) — a model that duplicates or invents one of these breaks the check as surely as a ``%s``
_STRAY_PERCENT = f"{_PRINTF_C.pattern}|%[<>]|%[A-Za-z]*"
_GUARDED: dict[Syntax, Syntax] = {}


def guarded(source: str, syntax: Syntax = GENERIC) -> Syntax:
    """The syntax whose matches are taken out of ``source`` when it is masked or translated without its
    placeholders (placeholders/masking.py): ``syntax``, and where ``kept`` reads printf (``reads_printf``),
    every other ``%`` too, so that the model is given none to duplicate and those it invents can be
    told apart and taken out."""
    if not reads_printf(source, syntax):
        return syntax
    if syntax not in _GUARDED:
        _GUARDED[syntax] = Syntax(re.compile(f"(?:{syntax.regex.pattern})|{_STRAY_PERCENT}"), syntax.printf)
    return _GUARDED[syntax]


def _nested(found: list[str]) -> bool:
    """Whether the tags among ``found`` open and close in a well-nested order (``<b><i></i></b>``)."""
    stack: list[str] = []
    for p in found:
        tag = re.match(r"<(/?)([A-Za-z][\w:.-]*)[^>]*?(/?)>$", p)
        if tag is None or tag[3]:
            continue
        if not tag[1]:
            stack.append(tag[2])
        elif not stack or stack.pop() != tag[2]:
            return False
    return not stack
