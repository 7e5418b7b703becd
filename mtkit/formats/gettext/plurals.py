"""Plural forms: how many ``msgstr[n]`` a language has, and which numbers each form is used for.

A catalog's ``Plural-Forms`` header is the translator's word and is used as it is. Where a catalog has
none (a template's ``nplurals=INTEGER``, or no header at all), the language's rule comes from Babel's
CLDR-based table (``babel.messages.plurals``, what pybabel writes into new catalogs), not from a table
of our own.

Which msgid fills which form: a form used for the number 1 and nothing else (German's form 0, Arabic's
form 1) takes the singular's translation; so does a form used for 1 and other numbers (Russian's form 0:
1, 21, 31 …; French's: 0 and 1) where the singular holds the same placeholders as the plural (``%d
file`` / ``%d files``), since it can then say any of them; every other form takes the plural's. A
Russian ``One file`` / ``%d files`` thus fills form 0 with the plural's ``%d``: form 0 is also used for
21, and msgfmt ``--check`` requires the number there.
"""

from __future__ import annotations

import gettext
import re
from collections.abc import Callable
from dataclasses import dataclass

from mtkit.errors import DataError

_RULE = re.compile(r"^\s*nplurals\s*=\s*(\d+)\s*;\s*plural\s*=\s*(.+?)\s*;?\s*$", re.S)
#: the numbers a rule is tried on to see which of them each form covers (every rule of gettext's and
#: CLDR's tables repeats within n % 100 above 100, and n % 1000000 for French's "many")
SAMPLE = (*range(0, 1001), 1000000)


@dataclass(frozen=True)
class PluralRule:
    """A language's plural rule: ``nplurals``, its C expression, and the header value that says it."""

    nplurals: int
    expression: str

    @property
    def header(self) -> str:
        return f"nplurals={self.nplurals}; plural={self.expression};"

    def covers(self) -> list[set[int]]:
        """Per form, the numbers of ``SAMPLE`` it is used for."""
        choose = _compiled(self.expression)
        forms: list[set[int]] = [set() for _ in range(self.nplurals)]
        for n in SAMPLE:
            k = choose(n)
            if 0 <= k < self.nplurals:
                forms[k].add(n)
        return forms

    def singular_forms(self, singular_can_count: bool) -> set[int]:
        """The forms that take the singular's translation (see the module docstring)."""
        if self.nplurals == 1:
            return set()
        return {k for k, numbers in enumerate(self.covers())
                if numbers == {1} or (1 in numbers and singular_can_count)}


def _compiled(expression: str) -> Callable[[int], int]:
    """The C expression as a function (the standard library's gettext parser, which allows only the
    tokens of a plural expression: nothing of the catalog is executed)."""
    try:
        return gettext.c2py(expression)
    except (ValueError, RecursionError, SyntaxError) as exc:
        raise DataError(f"plural expression {expression!r} is not valid ({exc})") from None


def parse(value: str, name: str) -> PluralRule | None:
    """The rule of a ``Plural-Forms`` header value; None for a template's placeholder or an empty one;
    a malformed one refused."""
    if not value.strip() or "INTEGER" in value or "EXPRESSION" in value:
        return None
    match = _RULE.match(value)
    if not match or int(match[1]) < 1:
        raise DataError(f"{name}: the header's Plural-Forms {value!r} is not "
                        "'nplurals=N; plural=EXPRESSION;'")
    rule = PluralRule(int(match[1]), match[2])
    try:
        rule.covers()
    except DataError as exc:
        raise DataError(f"{name}: the header's Plural-Forms: {exc}") from None
    return rule


def for_language(lang: str) -> PluralRule | None:
    """The rule Babel knows for ``lang`` (``de``, ``pt_BR``, ``sr-Latn``), None where it knows none."""
    from babel import Locale, UnknownLocaleError
    from babel.messages.plurals import get_plural

    try:
        Locale.parse(lang.replace("-", "_"))
    except (UnknownLocaleError, ValueError):
        return None
    found = get_plural(lang.replace("-", "_"))
    return PluralRule(found.num_plurals, found.plural_expr)
