"""Legacy charsets of files that do not say theirs: SubRip subtitles and plain text.

Most subtitles people download are not UTF-8 but the Windows code page of their language (cp1252 for
Western European languages, cp1250 for Central European ones, cp1251 for Cyrillic …). Such a file says
nothing of its charset, and every single-byte code page decodes any bytes, so the bytes alone cannot
decide: a detector asked about a French cp1252 file names the Baltic cp1257 as readily (both decode it
without an error). What can decide is the language the file is in, which a translation model knows
(its source language): its code page is tried first and taken when the text it gives looks like text
(charset-normalizer's measure of "chaos": mojibake, odd symbols among letters); else a detector over
all charsets, taken only when it is sure. A guess is always said (the result's notes and summary),
and a user who knows better gives ``--encoding`` (``encoding=``), which is taken as given.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from mtkit.errors import ConfigError
from mtkit.languages import primary

#: the Windows code page of each language's legacy files (ISO 639-1), what subtitle editors assume
CODE_PAGES = {
    **{lang: "cp1252" for lang in ("af", "ca", "da", "de", "en", "es", "eu", "fi", "fr", "ga", "gl", "id",
                                   "is", "it", "ms", "nl", "no", "nb", "nn", "pt", "sq", "sv", "sw")},
    **{lang: "cp1250" for lang in ("bs", "cs", "hr", "hu", "pl", "ro", "sk", "sl")},
    **{lang: "cp1251" for lang in ("be", "bg", "kk", "mk", "ru", "sr", "uk")},
    "el": "cp1253", "tr": "cp1254", "az": "cp1254", "he": "cp1255", "ar": "cp1256", "fa": "cp1256",
    "ur": "cp1256", "et": "cp1257", "lt": "cp1257", "lv": "cp1257", "vi": "cp1258", "th": "cp874",
    "ja": "shift_jis", "zh": "gb18030", "ko": "cp949",
}
#: how much "chaos" (charset-normalizer's mess ratio, 0-1) a guess may show: a French cp1252 subtitle
#: scores ~0.07 as cp1252; a Polish cp1250 one read as cp1252 ~0.11, as cp1250 0
LANGUAGE_CHAOS = 0.1
DETECTED_CHAOS = 0.05
#: non-ASCII bytes a file needs before a detector's guess (without a language) is believed
DETECTOR_EVIDENCE = 16


@dataclass(frozen=True)
class Guess:
    """The charset a file was read in, and how it was chosen (for the user: what was assumed)."""

    codec: str
    note: str


def check_encoding(encoding: str) -> str:
    """A user's ``--encoding``, as Python's codec name; one line for a name no codec has."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise ConfigError(f"--encoding {encoding!r}: not a charset Python knows (e.g. cp1252, latin-1, "
                          "cp1251, shift_jis)") from None


def guess_legacy(data: bytes, language: str) -> Guess | None:
    """The legacy charset ``data`` is most likely in, for a file in ``language``; None when it cannot be
    decided (the caller refuses the file)."""
    from charset_normalizer import from_bytes

    lang = primary(language)
    page = CODE_PAGES.get(lang)
    if page is not None:  # the language's own code page, or nothing: no other guess beats knowing it
        try:
            data.decode(page)
        except UnicodeDecodeError:
            return None
        best = from_bytes(data, cp_isolation=[page]).best()
        if best is None or best.chaos > LANGUAGE_CHAOS:
            return None
        return Guess(page, f"read as {page}, the usual charset of {lang} files (not UTF-8; give "
                           "--encoding if it is another)")
    if sum(byte >= 0x80 for byte in data) < DETECTOR_EVIDENCE:
        return None  # a handful of non-ASCII bytes decode as something in every charset
    best = from_bytes(data).best()  # a language without a known code page: the detector, if sure
    # never UTF-16/32 without a BOM: a detector names them for a few bytes of anything
    if best is not None and best.chaos <= DETECTED_CHAOS and not best.encoding.startswith(("utf", "ascii")):
        codec = codecs.lookup(best.encoding).name
        return Guess(codec, f"read as {codec}, which its bytes suggest (not UTF-8; give --encoding if it "
                            "is another)")
    return None


__all__ = ["CODE_PAGES", "Guess", "check_encoding", "guess_legacy"]
