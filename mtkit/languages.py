"""Language codes as files write them ('de-DE', 'de_AT', 'DE', 'deu', 'ger'), compared by the
language they name (BCP 47 / ISO 639 through langcodes, a well-kept library of the IANA registry and
CLDR's aliases): TMX corpora (`mtkit.data.readers`) and XLIFF files (`mtkit.formats.interchange.xliff`)
name their languages every way, and a hand-written table takes every 2- and 3-letter code as one.
"""

from __future__ import annotations

import re
from functools import lru_cache

import langcodes

from mtkit.errors import ConfigError


def _language(tag: str) -> langcodes.Language | None:
    try:
        lang = langcodes.get(tag.strip())
    except ValueError:  # langcodes' LanguageTagError
        return None
    return lang if lang.language else None


def primary(language: str) -> str:
    """The primary language subtag as written, lower case: "de" for "de-AT", "pt" for "pt_BR" (a
    table lookup by language: code pages, scripts, words; no alias resolved)."""
    return re.split(r"[-_]", language, maxsplit=1)[0].lower()


def is_language(tag: str) -> bool:
    """Whether ``tag`` is a language code langcodes can read."""
    return _language(tag) is not None


@lru_cache(maxsize=4096)
def same_language(tag: str, wanted: str) -> bool:
    """True when the language tag of a segment (``tag``, as found in a file) is the ``wanted`` language.

    Files spell languages every way ('de-DE', 'de_AT', 'DE', 'deu', 'ger'), so tags are compared by
    primary language after langcodes normalises them. A region or script in ``wanted`` ('pt-BR',
    'zh-Hant') must match too, but only when ``tag`` has one: a bare 'pt' unit is not known to be wrong.
    A tag that cannot be parsed matches nothing; a ``wanted`` that cannot is a ConfigError."""
    want = _language(wanted)
    if want is None:
        raise ConfigError(f"not a language code: {wanted!r} (use an ISO 639 / BCP 47 code: 'de', 'pt-BR')")
    got = _language(tag)
    if got is None or got.language != want.language:
        return False
    if want.script and got.script and want.script != got.script:
        return False
    return not (want.territory and got.territory and want.territory != got.territory)


__all__ = ["is_language", "primary", "same_language"]
