"""How many strings with placeholders a model translates, with and without sentinels and position
(mtkit/formats/masking.py): the deb-en-de test lines holding a printf directive, brace or dollar
placeholder, tag or entity, translated with `--placeholders` as it is (rescue on) and as it was
(rescue off: left untranslated where the model, and the constrained retry, break a placeholder), plus
the plain translation; for each: lines translated (not given back as their source), lines keeping every
placeholder, chrF and BLEU against the references. In one process, on one model, so like for like.

    python bench/studies/placeholder_rescue.py --model /tmp/nm/model --data ../shared/data/deb-en-de
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from mtkit.decode.formats_adapter import search_functions  # noqa: E402
from mtkit.decode.translator import Translator  # noqa: E402
from mtkit.formats.placeholders import kept, placeholders, translate_strings  # noqa: E402
from mtkit.options import LoadOptions, SearchOptions  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/deb-en-de"))
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--json", help="where to write the figures")
    args = parser.parse_args()
    import sacrebleu

    src = (Path(args.data) / "test.en").read_text(encoding="utf-8").splitlines()
    ref = (Path(args.data) / "test.de").read_text(encoding="utf-8").splitlines()
    chosen = [n for n, line in enumerate(src) if placeholders(line)]
    lines, refs = [src[n] for n in chosen], [ref[n] for n in chosen]
    search = SearchOptions(overrides=[f"decoding.beam_size={args.beam}"])
    translator = Translator(args.model, LoadOptions(device="cpu"), search)
    plain_fn, constrained_fn = search_functions(translator)
    rows = {}
    start = time.perf_counter()
    plain = [c[0] for c in plain_fn(lines)]
    rows["plain"] = (plain, time.perf_counter() - start)
    for name, rescue in (("placeholders, rescue off", False), ("placeholders (sentinels, position)", True)):
        start = time.perf_counter()
        outcomes = translate_strings(lines, plain_fn, constrained_fn, rescue=rescue)
        texts = [o.text if o.text is not None else line for o, line in zip(outcomes, lines, strict=True)]
        rows[name] = (texts, time.perf_counter() - start, outcomes)
    result = {"lines": len(lines), "model": args.model, "beam": args.beam, "systems": {}}
    for name, (texts, seconds, *rest) in rows.items():
        translated = sum(t != s for t, s in zip(texts, lines, strict=True))
        keeping = sum(not kept(s, t) for t, s in zip(texts, lines, strict=True) if t != s)
        entry = {"translated": translated, "translated_keeping_all": keeping,
                 "chrf": round(sacrebleu.corpus_chrf(texts, [refs]).score, 2),
                 "bleu": round(sacrebleu.corpus_bleu(texts, [refs]).score, 2), "seconds": round(seconds, 1)}
        if rest:
            entry["by"] = {how: sum(o.rescued == how for o in rest[0]) for how in ("sentinels", "position")}
            entry["constrained"] = sum(o.constrained for o in rest[0])
        result["systems"][name] = entry
        print(f"{name:40s} translated {translated}/{len(lines)}, keeping every placeholder {keeping}, "
              f"chrF {entry['chrf']}, BLEU {entry['bleu']}, {entry['seconds']} s {entry.get('by', '')}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
