"""How many strings with placeholders a model translates, and how well, along each path of
`translate_strings` (mtkit/placeholders/strings.py, masking.py): the deb-en-de test lines holding a
printf directive, brace or dollar placeholder, tag or entity, translated

- plain (no protection: the model's own best);
- ``--placeholders`` without the rescue (masking never, rescue off: left untranslated where the
  model, and the constrained retry, break a placeholder) — the cost reference;
- ``--placeholders`` as it was before masking first (masking never, rescue on: plain, constrained,
  sentinels, alignment or position);
- masking what the model's vocabulary cannot write (the default);
- masking always;

and for each: lines translated (not given back as their source), lines keeping every placeholder,
chrF and BLEU against the references, seconds, and how the lines were kept. The paths run in one
process on one model, alternated ``--repeat`` times (the best time of each kept), so the times are like
for like on a shared machine (the cost: against "placeholders, rescue off", where it runs). ``--hyps
DIR`` writes each path's output (``N.de``, in the order of ``--paths``), for a paired bootstrap with
`mtkit score --hyp DIR/0.de --hyp DIR/1.de --ref DIR/ref.de -m chrf --bootstrap 1000`.

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
from mtkit.options import LoadOptions, SearchOptions  # noqa: E402
from mtkit.placeholders.strings import kept, placeholders, translate_strings  # noqa: E402

#: path → (masking, rescue); None: the plain translation
PATHS = {"placeholders, rescue off": ("never", False),
         "placeholders, mask unwritable": ("unwritable", True),
         "placeholders, mask always": ("always", True),
         "plain": None,
         "placeholders, masking never (rescue after)": ("never", True)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/deb-en-de"))
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--engine", default="auto")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N (the torch engine)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--paths", default=";".join(PATHS), help="which paths, separated by ;")
    parser.add_argument("--hyps", help="a directory for each path's output and the references")
    parser.add_argument("--json", help="where to write the figures")
    args = parser.parse_args()
    import sacrebleu

    src = (Path(args.data) / "test.en").read_text(encoding="utf-8").splitlines()
    ref = (Path(args.data) / "test.de").read_text(encoding="utf-8").splitlines()
    chosen = [n for n, line in enumerate(src) if placeholders(line)]
    lines, refs = [src[n] for n in chosen], [ref[n] for n in chosen]
    search = SearchOptions(overrides=[f"decoding.beam_size={args.beam}"])
    translator = Translator(args.model, LoadOptions(device=args.device, engine=args.engine), search)
    plain_fn, constrained_fn = search_functions(translator)
    rows: dict[str, tuple] = {}
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for name, how in ((p, PATHS[p]) for p in args.paths.split(";")):
            start = time.perf_counter()
            if how is None:
                texts, outcomes = [c[0] for c in plain_fn(lines)], None
            else:
                outcomes = translate_strings(lines, plain_fn, constrained_fn, rescue=how[1], masking=how[0])
                texts = [o.text if o.text is not None else s for o, s in zip(outcomes, lines, strict=True)]
            best[name] = min(best.get(name, float("inf")), time.perf_counter() - start)
            rows[name] = (texts, outcomes)
            print(f"{name}: {best[name]:.2f} s", flush=True)  # as it goes: a loaded machine is slow
    result = {"lines": len(lines), "model": args.model, "beam": args.beam, "engine": translator.engine,
              "repeat": args.repeat, "systems": {}}
    reference = best.get("placeholders, rescue off")  # the cost reference, where it ran
    if args.hyps:
        Path(args.hyps).mkdir(parents=True, exist_ok=True)
        (Path(args.hyps) / "ref.de").write_text("\n".join(refs) + "\n", encoding="utf-8")
        (Path(args.hyps) / "src.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for n, (name, (texts, outcomes)) in enumerate(rows.items()):
        translated = sum(t != s for t, s in zip(texts, lines, strict=True))
        keeping = sum(not kept(s, t) for t, s in zip(texts, lines, strict=True) if t != s)
        entry = {"translated": translated, "translated_keeping_all": keeping,
                 "chrf": round(sacrebleu.corpus_chrf(texts, [refs]).score, 2),
                 "bleu": round(sacrebleu.corpus_bleu(texts, [refs]).score, 2),
                 "seconds": round(best[name], 2),
                 "cost": round(best[name] / reference, 2) if reference else None}
        if outcomes is not None:
            entry["by"] = {how: sum(o.rescued == how for o in outcomes)
                           for how in ("sentinels", "alignment", "position")}
            entry["constrained"] = sum(o.constrained for o in outcomes)
            entry["left"] = sum(o.text is None for o in outcomes)  # reported, given back as the source
        result["systems"][name] = entry
        if args.hyps:
            (Path(args.hyps) / f"{n}.de").write_text("\n".join(texts) + "\n", encoding="utf-8")
        print(f"{name:44s} translated {translated}/{len(lines)}, keeping all {keeping}, "
              f"chrF {entry['chrf']}, BLEU {entry['bleu']}, {entry['seconds']} s ({entry['cost']}x) "
              f"{entry.get('by', '')}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
