"""The off-target rate of translations: how many lines are in another language than the one asked for.

Each non-empty line is given to mtkit's language identifier (py3langid) among the recipe's languages
(en, de, es); a line identified as another of them than --lang is off target. Prints one line per
file: the rate, the count, and what the lines were identified as. One run takes every file of a table
(each named with the language it should be in), since loading py3langid's model is most of its cost.

Usage: python offtarget.py --lang es HYP [HYP ...]
       python offtarget.py es:HYP de:HYP ...   (needs py3langid: pip install 'mtkit[serve]')
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

from mtkit.errors import MtkitError
from mtkit.langid import LanguageIdentifier

LANGUAGES = ("en", "de", "es")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lang", choices=LANGUAGES, help="the language of every HYP not named LANG:HYP")
    p.add_argument("hyps", nargs="+", metavar="[LANG:]HYP")
    args = p.parse_args()
    wanted: list[tuple[str, Path]] = []
    for item in args.hyps:
        lang, sep, path = item.partition(":")
        if sep and lang in LANGUAGES:
            wanted.append((lang, Path(path)))
        elif args.lang:
            wanted.append((args.lang, Path(item)))
        else:
            p.error(f"{item}: name its language as LANG:HYP (one of {', '.join(LANGUAGES)}) or give --lang")
    try:
        identifier = LanguageIdentifier()
        for lang, path in wanted:
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            found = Counter(identifier.rank(line, LANGUAGES)[0].language for line in lines)
            off = sum(n for found_lang, n in found.items() if found_lang != lang)
            rate = 100 * off / max(len(lines), 1)
            seen = ", ".join(f"{other} {found[other]}" for other in LANGUAGES)
            print(f"{path}: off-target {rate:.1f}% ({off} of {len(lines)} lines not {lang}; "
                  f"identified: {seen})")
    except MtkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
