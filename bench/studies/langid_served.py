#!/usr/bin/env python3
"""`python bench/studies/langid_served.py`: which question about a text's language is right more often for a
server, measured on the Debian dev sentences (issue #41; mtkit/decode/langid.py).

A server of two of {en, de, es} (each of the three such servers in turn) is sent text in all three:
its two languages and the third, which it does not serve. Each way of asking py3langid is scored on
how often it names the text's true language: among the server's languages only (what mtkit asked
before: the third language can never be named), among all the identifier's languages, and among all
with the server's languages weighted ``k`` times (a prior: clients mostly send the languages a server
offers). Short strings (1-5 words: menu labels, messages) apart. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from mtkit.langid import LanguageIdentifier  # noqa: E402

FILES = {"en": ("deb-en-de/dev.en", "deb-en-es/dev.en"), "de": ("deb-en-de/dev.de",),
         "es": ("deb-en-es/dev.es",)}
WEIGHTS = (1.0, 3.0, 10.0, 30.0, 100.0, 1000.0)


def texts(data: Path) -> dict[str, list[str]]:
    """Each language's distinct non-empty dev lines that hold a letter."""
    out: dict[str, list[str]] = {}
    for lang, names in FILES.items():
        lines = [line.strip() for name in names for line in (data / name).read_text("utf-8").splitlines()]
        out[lang] = list(dict.fromkeys(t for t in lines if any(c.isalpha() for c in t)))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    args = p.parse_args()
    data = texts(args.data)
    ident = LanguageIdentifier()
    ranked = {lang: [ident.rank(t) for t in ts] for lang, ts in data.items()}
    short = {lang: [len(t.split()) <= 5 for t in ts] for lang, ts in data.items()}
    ways = [("among the served only", None)] + [(f"all, served ×{k:g}", k) for k in WEIGHTS]
    print("| question | served text: right | 1-5 words | other text: right | 1-5 words "
          "| other text taken for a served language | 1-5 words |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, k in ways:
        # (text served?, short only?) -> [right, taken for a served language, texts]
        count = {(s, b): [0, 0, 0] for s in (True, False) for b in (False, True)}
        for served in itertools.combinations(FILES, 2):
            for lang, rows in ranked.items():
                for guesses, is_short in zip(rows, short[lang], strict=True):
                    if k is None:
                        found = max((g for g in guesses if g.language in served),
                                    key=lambda g: g.probability).language
                    else:
                        found = max(guesses, key=lambda g: g.probability * (k if g.language in served
                                                                           else 1.0)).language
                    for bucket in {False, is_short}:
                        cell = count[(lang in served, bucket)]
                        cell[0] += found == lang
                        cell[1] += found != lang and found in served
                        cell[2] += 1
        cells = [f"{100 * count[c][0] / count[c][2]:.1f}%" for c in ((True, False), (True, True),
                                                                    (False, False), (False, True))]
        cells += [f"{100 * count[c][1] / count[c][2]:.1f}%" for c in ((False, False), (False, True))]
        print(f"| {name} | " + " | ".join(cells) + " |")
    n = {c: 0 for c in ((True, False), (True, True), (False, False), (False, True))}
    for served in itertools.combinations(FILES, 2):
        for lang in FILES:
            n[(lang in served, False)] += len(data[lang])
            n[(lang in served, True)] += sum(short[lang])
    print(f"\ntexts: served {n[(True, False)]:,} ({n[(True, True)]:,} of 1-5 words), other "
          f"{n[(False, False)]:,} ({n[(False, True)]:,})")

if __name__ == "__main__":
    main()
