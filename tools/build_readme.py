"""Rebuild README.md from its intro and docs/*.md, so each topic is written once.

README.md = its own text up to "## Contents" (intro, quick start, install) + a table of contents +
docs/{recipes,data,models,training,translate,score}.md with every heading one level down. Edit the docs,
then run `make readme`; tests/test_docs.py fails when README.md is stale.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORDER = ["recipes", "data", "models", "training", "translate", "score"]


def _shift_headings(text: str) -> list[str]:
    lines, in_code = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if not in_code and re.match(r"^#{1,5} ", line):
            line = "#" + line
        lines.append(line)
    return lines


def build(root: Path = ROOT) -> str:
    intro = (root / "README.md").read_text(encoding="utf-8").split("\n## Contents")[0].rstrip() + "\n"
    toc, parts = [], []
    for name in ORDER:
        text = (root / "docs" / f"{name}.md").read_text(encoding="utf-8")
        if name == "recipes":  # the README has its own quick start above
            text = text.replace("\n## Quick start\n", "\n## The demo: `make demo`\n", 1)
        lines = _shift_headings(text)
        title = lines[0].lstrip("# ").strip()
        anchor = re.sub(r"[^a-z0-9 -]", "", title.lower()).replace(" ", "-")
        toc.append(f"- [{title}](#{anchor})")
        parts.append("\n".join(lines).strip() + "\n")
    return intro + "\n## Contents\n\n" + "\n".join(toc) + "\n\n" + "\n".join(parts)


def main() -> int:
    readme = build()
    (ROOT / "README.md").write_text(readme, encoding="utf-8")
    print(f"README.md: {len(readme.splitlines())} lines", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
