"""Cut a text file into the sentences `mtkit translate` searches (mtkit's own splitter,
`mtkit.decode.segment`), so that `bench/studies/hf_flow.py generate --join` gives `transformers` the same
inputs: `mtkit translate` cuts every line into sentences and joins their translations with a space
(26% of the deb-en-de test lines are cut), `generate` translates a line as it stands.

    python bench/studies/hf_segment.py test.en -o test.sent.en  # writes test.sent.en and test.sent.en.count

OUT holds one sentence a line; OUT.count one number a line of the input: how many sentences it gave
(0 for an empty line), which `hf_flow.py generate --join OUT.count` uses to join the translations back.
Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from mtkit.decode.segment import clean_line, split_sentences


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input")
    p.add_argument("-o", "--output", required=True)
    args = p.parse_args()
    lines = Path(args.input).read_text(encoding="utf-8").splitlines()
    per_line = [split_sentences(clean_line(line)) for line in lines]
    out = Path(args.output)
    out.write_text("".join(s + "\n" for sents in per_line for s in sents), encoding="utf-8")
    Path(f"{out}.count").write_text("".join(f"{len(s)}\n" for s in per_line), encoding="utf-8")
    print(json.dumps({"lines": len(lines), "sentences": sum(map(len, per_line)),
                      "lines_cut": sum(len(s) > 1 for s in per_line)}))


if __name__ == "__main__":
    main()
