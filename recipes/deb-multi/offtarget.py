"""The off-target rate of translations: how many lines are in another language than the one asked for.

Each non-empty line is given to mtkit's language identifier (py3langid) among the recipe's languages
(en, de, es); a line identified as another of them than --lang is off target. Prints one line per
file: the rate, the count, and what the lines were identified as.

Usage: python offtarget.py --lang es HYP [HYP ...]   (needs py3langid: pip install 'mtkit[serve]')
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
    p.add_argument("--lang", required=True, choices=LANGUAGES)
    p.add_argument("hyps", nargs="+", type=Path)
    args = p.parse_args()
    try:
        identifier = LanguageIdentifier()
        for path in args.hyps:
            lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
            found = Counter(identifier.rank(line, LANGUAGES)[0].language for line in lines)
            off = sum(n for lang, n in found.items() if lang != args.lang)
            rate = 100 * off / max(len(lines), 1)
            seen = ", ".join(f"{lang} {found[lang]}" for lang in LANGUAGES)
            print(f"{path}: off-target {rate:.1f}% ({off} of {len(lines)} lines not {args.lang}; "
                  f"identified: {seen})")
    except MtkitError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
