"""The ct2 engine's calls per length limit against calls over close limits (issue #43), in one process.

Loads one exported model into a `mtkit.Translator` and translates the same lines, in batches of
``--size`` lines (a server's batch: 48; `mtkit translate`'s chunk: 1,000), with each variant in turn
batch by batch (the order alternating), so that the drift of a shared machine's speed hits every
variant alike. A variant is a spread of `mtkit.decode.ct2._limit_buckets` (1.0: one CTranslate2 call
per distinct length limit, as before; 1.25: the default) or ``old``: the engine of another mtkit
checkout (``--against DIR``, e.g. ``git worktree add /tmp/old 761cb5e``), run on the same loaded model.
Prints sentences/s, the ratio to the first variant and the lines equal to the first variant's.

    python bench/studies/ct2_buckets.py --export EXPORT --size 48 --variants old,1.25 --against /tmp/old
        [--input test.en] [--beam 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", required=True)
    parser.add_argument("--input", default=str(ROOT.parent / "shared/data/deb-en-de/test.en"))
    parser.add_argument("--size", type=int, default=48, help="lines per translate_chunk call")
    parser.add_argument("--variants", default="1.0,1.25")
    parser.add_argument("--against", help="another mtkit checkout, for the variant 'old'")
    parser.add_argument("--beam", type=int, help="the export's own beam size if not given")
    args = parser.parse_args()

    from mtkit.decode import ct2
    from mtkit.decode.translator import Translator

    variants = args.variants.split(",")
    old = None
    if "old" in variants:
        if not args.against:
            sys.exit("the variant 'old' needs --against DIR (another mtkit checkout)")
        spec = importlib.util.spec_from_file_location("old_ct2", Path(args.against) / "mtkit/decode/ct2.py")
        old = importlib.util.module_from_spec(spec)
        sys.modules["old_ct2"] = old
        spec.loader.exec_module(old)  # type: ignore[union-attr]
    lines = [s for s in Path(args.input).read_text(encoding="utf-8").splitlines() if s.strip()]
    random.Random(0).shuffle(lines)  # batches like a server's: any lines together
    tr = Translator(args.export, beam_size=args.beam)
    new_class = type(tr.backend)
    spread_default = ct2._limit_buckets.__defaults__

    def use(variant: str) -> None:
        if variant == "old":
            tr.backend.__class__ = old.Ct2Model  # the same loaded translator, the old search
        else:
            tr.backend.__class__ = new_class
            ct2._limit_buckets.__defaults__ = (spread_default[0], float(variant))

    tr.translate_chunk(lines[:10])
    spent = {v: 0.0 for v in variants}
    outputs: dict[str, list[str]] = {v: [] for v in variants}
    for n, start in enumerate(range(0, len(lines), args.size)):
        batch = lines[start:start + args.size]
        for variant in variants if n % 2 == 0 else variants[::-1]:
            use(variant)
            began = time.perf_counter()
            outputs[variant] += [t.text for t in tr.translate_chunk(batch)]
            spent[variant] += time.perf_counter() - began
    first = variants[0]
    for variant in variants:
        same = sum(a == b for a, b in zip(outputs[first], outputs[variant], strict=True))
        print(f"beam {tr.decoding.beam_size}, batches of {args.size}, {variant}: "
              f"{len(lines) / spent[variant]:.1f} sent/s ({spent[first] / spent[variant]:.3f}x {first}), "
              f"{same}/{len(lines)} lines as {first}")


if __name__ == "__main__":
    main()
