"""What the catalog path costs besides the model: 5,000 training source lines (unique, under 300
characters) as a catalog, translated by an identity model (no model cost) with this checkout's code
and with an older commit's (a git worktree), alternating, a fresh interpreter each run. The model's own
time is what `bench/studies/formats.py --only speed` adds on top (a catalog against plain lines).

    python bench/studies/catalog_overhead.py --base 0fe384c --rounds 3
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = r'''
import sys, time
sys.path.insert(0, sys.argv[1])
from mtkit.formats.documents import translate_document
data = open(sys.argv[2], "rb").read()
identity = lambda lines: [[line] for line in lines]
start = time.perf_counter()
try:
    translate_document(data, "speed.pot", "po", "de", identity, None)
except (TypeError, AttributeError):  # before bytes in, bytes out the function took text
    translate_document(data.decode(), "speed.pot", "po", "de", identity, None)
print(time.perf_counter() - start)
'''


def catalog(data: Path, entries: int, path: Path) -> None:
    """The speed catalog of bench/studies/formats.py: ``entries`` training source lines as msgids."""
    from mtkit.formats.gettext.po import escape

    lines, seen = [], set()
    with gzip.open(data / "train.en.gz", "rt", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.strip() and line not in seen and len(line) < 300:
                seen.add(line)
                lines.append(line)
            if len(lines) == entries:
                break
    header = ('msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n"Language: de\\n"\n'
              '"Plural-Forms: nplurals=2; plural=(n != 1);\\n"\n')
    path.write_text(header + "".join(f'\nmsgid "{escape(line)}"\nmsgstr ""\n' for line in lines),
                    encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/deb-en-de"))
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--base", default="0fe384c", help="the commit to compare with")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        pot, old = Path(tmp) / "speed.pot", Path(tmp) / "base"
        catalog(Path(args.data), args.entries, pot)
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-f", "--detach", str(old), args.base],
                       check=True, capture_output=True)
        try:
            seconds: dict[str, list[float]] = {"checkout": [], args.base: []}
            for _ in range(args.rounds):
                for name, root in (("checkout", ROOT), (args.base, old)):
                    run = subprocess.run([sys.executable, "-c", RUN, str(root), str(pot)],
                                         capture_output=True, text=True, check=True)
                    seconds[name].append(round(float(run.stdout.split()[-1]), 3))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False)
    print(json.dumps({"entries": args.entries, "seconds": seconds}))


if __name__ == "__main__":
    main()
