"""The README is a front page and docs/ the manual: every page reachable, no dead links, no stale
module paths, and the config-key tables generated from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mtkit.config.docs import COMMAND, render_markdown

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]
NOTEBOOK = ROOT / "docs" / "notebook"
#: the dated notebook: its links are checked too, but not its module paths (it quotes them as they were)
NOTEBOOK_PAGES = sorted(NOTEBOOK.glob("*.md"))
MAX_README_LINES = 250
#: docs/results.md is one page of today's figures; the dated runs go to docs/notebook/
MAX_RESULTS_LINES = 500

_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"(?<!!)\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def _links(path: Path) -> list[str]:
    """Targets of the inline Markdown links of a page (code blocks and code spans excluded)."""
    targets = []
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        targets += _LINK.findall(_CODE_SPAN.sub("", line))
    return targets


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for line in _prose_lines(path.read_text(encoding="utf-8")):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = _slug(m.group(1))
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def _is_external(target: str) -> bool:
    return bool(re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I))


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(README.parent / t.split("#", 1)[0]).resolve() for t in _links(README) if not _is_external(t)}
    missing = [p.name for p in DOCS if p.resolve() not in linked]
    assert not missing, f"docs pages not linked from README.md: {missing}"


@pytest.mark.parametrize("page", PAGES + NOTEBOOK_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_existing_files_and_headings(page: Path):
    broken = []
    for target in _links(page):
        if _is_external(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target} (no such heading in {dest.name})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"


def test_readme_is_a_front_page():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, \
        f"README.md has {len(lines)} lines (at most {MAX_README_LINES}): move details to docs/"


def test_results_is_one_page_of_current_figures():
    lines = (ROOT / "docs" / "results.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_RESULTS_LINES, \
        f"docs/results.md: {len(lines)} lines (at most {MAX_RESULTS_LINES}); dated runs go to docs/notebook/"


def test_config_page_is_generated_from_the_code():
    page = ROOT / "docs" / "config.md"
    assert page.read_text(encoding="utf-8") == render_markdown(), \
        f"docs/config.md is stale: run `{COMMAND}`"


def test_config_page_lists_every_key():
    from mtkit.config.docs import describe_keys

    text = render_markdown()
    missing = [key for key, *_ in describe_keys() if f"| `{key}` |" not in text]
    assert not missing, missing


def test_pipes_in_cells_are_escaped():
    for line in render_markdown().splitlines():
        if line.startswith("| `"):
            cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
            assert len(cells) == 5, line


def _module_exists(parts: list[str]) -> bool:
    path = ROOT.joinpath(*parts)
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_module_paths_in_the_docs_exist(page: Path):
    """The package gets reorganised: a path or dotted module named in the docs must still exist."""
    text = page.read_text(encoding="utf-8")
    stale = []
    for m in re.finditer(r"(?<![\w/.-])mtkit/[\w/.]*\w/?", text):
        if not (ROOT / m.group(0)).exists():
            stale.append(m.group(0))
    for m in re.finditer(r"(?<![\w/.-])mtkit((?:\.[a-z_][a-z0-9_]*)+)", text):
        parts = ["mtkit", *m.group(1).strip(".").split(".")]
        # mtkit.a.b.name: the longest prefix that is a module must go at least one level down
        if not any(_module_exists(parts[:n]) for n in range(2, len(parts) + 1)):
            stale.append(m.group(0))
    assert not stale, f"{page.relative_to(ROOT)} names modules that do not exist: {sorted(set(stale))}"


def test_every_bench_study_is_listed_in_the_bench_readme():
    """bench/README.md is the index of the studies: a study nobody can find is measured once and lost."""
    listed = (ROOT / "bench" / "README.md").read_text(encoding="utf-8")
    studies = ROOT / "bench" / "studies"
    missing = [p.relative_to(studies).as_posix() for p in sorted(studies.rglob("*"))
               if p.suffix in (".py", ".sh") and "__pycache__" not in p.parts and f"`{p.name}`" not in listed]
    assert not missing, f"bench/README.md does not list: {missing}"


def test_the_notebook_contents_list_every_section():
    """docs/notebook/README.md's contents name every section (## and ###) of every notebook page, in
    a list a reader can scan for a date or a topic: a section left out is a measurement nobody finds."""
    contents = (NOTEBOOK / "README.md").read_text(encoding="utf-8")
    missing = []
    for page in NOTEBOOK_PAGES:
        if page.name == "README.md":
            continue
        for line in _prose_lines(page.read_text(encoding="utf-8")):
            m = re.match(r"^#{2,3}\s+(.*?)\s*$", line)
            if m and f"]({page.name}#{_slug(m.group(1))})" not in contents:
                missing.append(f"{page.name}: {m.group(1)}")
    assert not missing, f"docs/notebook/README.md's contents miss: {missing}"
