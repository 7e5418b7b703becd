"""README.md is assembled from docs/*.md (tools/build_readme.py): it must not fall behind them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("build_readme", ROOT / "tools" / "build_readme.py")
build_readme = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_readme)


def test_readme_is_built_from_the_docs():
    expected = build_readme.build(ROOT)
    assert (ROOT / "README.md").read_text(encoding="utf-8") == expected, \
        "README.md is stale: edit docs/*.md and run `make readme`"


def test_every_docs_file_is_in_the_readme():
    in_docs = {p.stem for p in (ROOT / "docs").glob("*.md")}
    assert in_docs == set(build_readme.ORDER)
