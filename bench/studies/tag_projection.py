"""Where the tags go: the deb-en-de test and dev lines with inline tags on both sides (``<i>…</i>``,
``<b>…</b>``), translated by a model, and each tag pair of the output compared with the reference's
by the words they enclose.

Systems: the page path as `mtkit translate --format html` runs it (the line as an HTML fragment:
masking what the model cannot write, then sentinels, alignment, position); and the two projections
alone, on one translation of each line without its tags (masking.stripped), so that only the placement
differs: by the word alignment of the model's attention (masking.project_aligned) and by relative
position (masking.project).

Measure, per tag pair of the source (the k-th pair of a name in output and reference): the words
written once in both the output and the reference (lower-cased, without punctuation), and whether
each is inside the pair in both or outside in both. A pair *agrees* when every such word does (and
there is one); reported over all pairs, and over the pairs that do not enclose the whole line (the
easy case: any placement at the edges gets it).

    python bench/studies/tag_projection.py --model /tmp/nm/model --data ../shared/data/deb-en-de
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from mtkit.decode.formats_adapter import search_functions  # noqa: E402
from mtkit.decode.translator import Translator  # noqa: E402
from mtkit.formats.xml.html import translate_page_text  # noqa: E402
from mtkit.options import LoadOptions, SearchOptions  # noqa: E402
from mtkit.placeholders import masking  # noqa: E402
from mtkit.placeholders.strings import GENERIC, kept, translate_strings  # noqa: E402

_PAIR = re.compile(r"<([A-Za-z]\w*)(?:\s[^>]*)?>(.*?)</\1>")
_TAG = re.compile(r"</?[A-Za-z]\w*(?:\s[^>]*)?>")


def tagged_lines(data: Path) -> list[tuple[str, str]]:
    out = []
    for split in ("test", "dev"):
        src = (data / f"{split}.en").read_text(encoding="utf-8").splitlines()
        ref = (data / f"{split}.de").read_text(encoding="utf-8").splitlines()
        out += [(s, r) for s, r in zip(src, ref, strict=True) if _PAIR.search(s) and _PAIR.search(r)]
    return out


def _norm(word: str) -> str:
    return re.sub(r"[\W_]+", "", word.lower())


def labelled(text: str) -> list[tuple[str, frozenset[tuple[str, int]]]]:
    """Each word of ``text`` (tags taken out) with the tag pairs it is inside ((name, k): the k-th
    pair of that name)."""
    out: list[tuple[str, frozenset[tuple[str, int]]]] = []
    open_now: list[tuple[str, int]] = []
    seen: Counter[str] = Counter()
    for part in re.split(f"({_TAG.pattern})", text):
        if _TAG.fullmatch(part or " "):
            name = re.match(r"</?([A-Za-z]\w*)", part)[1]  # type: ignore[index]
            if part.startswith("</"):
                last = max((n for n, p in enumerate(open_now) if p[0] == name), default=None)
                if last is not None:
                    del open_now[last]
            elif not part.endswith("/>"):
                open_now.append((name, seen[name]))
                seen[name] += 1
            continue
        out += [(_norm(w), frozenset(open_now)) for w in part.split() if _norm(w)]
    return out


def agreement(output: str, reference: str) -> list[tuple[bool, bool]]:
    """Per tag pair of the reference: (agrees, encloses the whole reference line)."""
    got, want = labelled(output), labelled(reference)
    once = {w for w, n in Counter(w for w, _ in got).items() if n == 1} & \
        {w for w, n in Counter(w for w, _ in want).items() if n == 1}
    got_at, want_at = dict(got), dict(want)
    pairs = {p for _, ps in want for p in ps}
    out = []
    for pair in sorted(pairs):
        shared = [w for w in once if w in got_at]
        whole = all(pair in ps for _, ps in want)
        agree = bool(shared) and all((pair in got_at[w]) == (pair in want_at[w]) for w in shared)
        out.append((agree, whole))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/deb-en-de"))
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--json", help="where to write the figures")
    args = parser.parse_args()
    lines = tagged_lines(Path(args.data))
    translator = Translator(args.model, LoadOptions(device="cpu"),
                            SearchOptions(overrides=[f"decoding.beam_size={args.beam}"]))
    plain, constrained = search_functions(translator)
    sources = [s for s, _ in lines]
    outputs: dict[str, list[str]] = {}
    strings = partial(translate_strings, translate=plain, constrained=constrained)
    outputs["page path (mask, sentinels, alignment, position)"] = [
        translate_page_text(s, "line.html", strings, "de")[0] for s in sources]
    bare = [masking.stripped(s, GENERIC.finditer) for s in sources]
    found = plain.aligned([b for b, _ in bare])
    by_alignment, by_position = [], []
    for (_, placed), (text, links), source in zip(bare, found, sources, strict=True):
        position = masking.project(text, placed)
        aligned = masking.project_aligned(text, placed, links) if links is not None else None
        by_position.append(position)
        by_alignment.append(aligned if aligned is not None and not kept(source, aligned) else position)
    outputs["projection by alignment"] = by_alignment
    outputs["projection by position"] = by_position
    result: dict = {"lines": len(lines), "model": args.model, "systems": {}}
    for name, texts in outputs.items():
        scores = [a for out, (_, ref) in zip(texts, lines, strict=True) for a in agreement(out, ref)]
        inner = [agree for agree, whole in scores if not whole]
        keeping = sum(not kept(s, t) for s, t in zip(sources, texts, strict=True))
        entry = {"pairs": len(scores), "agree": sum(a for a, _ in scores), "inner_pairs": len(inner),
                 "inner_agree": sum(inner), "kept": keeping}
        result["systems"][name] = entry
        print(f"{name:52s} tag pairs agreeing {entry['agree']}/{entry['pairs']}, not around the whole "
              f"line {entry['inner_agree']}/{entry['inner_pairs']}; lines keeping every tag "
              f"{keeping}/{len(lines)}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
