"""The architecture holds: imports go cli → stages → library, models never reach sentencepiece or the
CLI stack, and every module is a short file that says what it is for.

The import rules are checked statically over whatever modules exist under mtkit/ (imports inside
functions and under TYPE_CHECKING included, since a lazy import is still a dependency): imports go
cli → stages → library, and no module imports, directly or through others, one that imports it (no
import circles). The checkers are themselves tested on a small fake package so that a broken rule
cannot pass unnoticed. The package's lazy exports (``from mtkit import Translator``) are checked in
fresh processes.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "mtkit"
MAX_LINES = 800
#: statements a function's body may span (its signature and docstring apart): past it, a function has
#: grown a second job. Like MAX_LINES, a guard against outliers (the longest today: 82), not a size to
#: shape code to
MAX_FUNCTION_BODY = 100

#: floor 2, one "files in → files out" job each; a package stage (train, with average and distill) is
#: one stage; mtkit.data is the library but for its prepare stage, mtkit.interop but for export and hf
STAGES = ("mtkit.data.prepare", "mtkit.train", "mtkit.translate", "mtkit.score", "mtkit.interop.export",
          "mtkit.serve", "mtkit.interop.hf")
#: floor 1 (a package counts with its modules): parses options and calls one stage; it alone may import stages
CLI = ("mtkit.cli", "mtkit.__main__")
#: imported by mtkit.models / mtkit.decode.search they would make every model user pay for the CLI stack
HEAVY = ("sentencepiece", "sacrebleu", "rich", "typer")


# ------------------------------------------------------------------------------------ the checker
def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def imports(path: Path, name: str, known: set[str]) -> list[tuple[int, str]]:
    """(line, imported mtkit module) for every import in the file, wherever it stands. ``from a import
    b`` counts as importing ``a.b`` when that is a module, else ``a``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against this module's package
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.append((node.lineno, sub if sub in known else base))
    top = name.split(".")[0]
    return [(line, target) for line, target in found if target == top or target.startswith(top + ".")]


def stage_of(name: str, stages: tuple[str, ...], cli: tuple[str, ...]) -> str | None:
    """The stage (or "cli") a module belongs to, None for the library."""
    if any(name == entry or name.startswith(entry + ".") for entry in cli):
        return "cli"
    for stage in stages:
        if name == stage or name.startswith(stage + "."):
            return stage
    return None


def violations(root: Path, stages: tuple[str, ...] = STAGES, cli: tuple[str, ...] = CLI) -> list[str]:
    """Every import that breaks a rule, as "file:line imports X (why)"."""
    prefix = root.name
    found = modules(root)
    known = set(found)
    bad = []
    for name, path in found.items():
        here = stage_of(name, stages, cli)
        for line, target in imports(path, name, known):
            there = stage_of(target, stages, cli)
            where = f"{path.relative_to(root.parent)}:{line} imports {target}"
            if there == "cli" and here != "cli":
                bad.append(f"{where} (only the CLI's entry points may import the CLI)")
            elif there is not None and here is None:
                bad.append(f"{where} (the library imports no stage)")
            elif there is not None and here not in ("cli", there):
                bad.append(f"{where} (a stage imports no other stage)")
            models = f"{prefix}.models"
            if (name == models or name.startswith(models + ".")) and target == f"{prefix}.data.bpe":
                bad.append(f"{where} (models use {prefix}.vocab's ids, never the sentencepiece wrapper)")
    return bad


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module → the package's modules it imports (itself left out)."""
    found = modules(root)
    known = set(found)
    return {name: {t for _, t in imports(path, name, known) if t in known and t != name}
            for name, path in found.items()}


def circles(root: Path) -> list[str]:
    """Each group of modules that import one another, directly or through others (a strongly connected
    component of the import graph), as one circle through it: "a → b → c → a", starting at its first
    module in sorted order and going the shortest way round."""
    graph = import_graph(root)
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[set[str]] = []

    def visit(name: str) -> None:  # Tarjan's algorithm
        order[name] = low[name] = len(order)
        stack.append(name)
        for target in sorted(graph[name]):
            if target not in order:
                visit(target)
                low[name] = min(low[name], low[target])
            elif target in stack:
                low[name] = min(low[name], order[target])
        if low[name] == order[name]:
            group = {stack.pop()}
            while name not in group:
                group.add(stack.pop())
            if len(group) > 1:
                groups.append(group)

    for name in sorted(graph):
        if name not in order:
            visit(name)
    found = []
    for group in groups:
        start = min(group)
        paths = {start: [start]}
        queue = [start]
        while queue:  # breadth first, inside the group, until the way leads back to start
            name = queue.pop(0)
            if start in graph[name]:
                found.append(" → ".join([*paths[name], start]))
                break
            for target in sorted(graph[name] & group):
                if target not in paths:
                    paths[target] = [*paths[name], target]
                    queue.append(target)
    return sorted(found)


# -------------------------------------------------------------------------------------- the rules
def test_import_directions_hold() -> None:
    bad = violations(ROOT)
    assert not bad, "imports against the architecture (docs: cli → stages → library):\n" + "\n".join(bad)


def test_no_import_circles() -> None:
    found = circles(ROOT)
    assert not found, ("modules that import each other (move what both need below both, or pass it in):\n"
                       + "\n".join(found))


def _fresh(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_library_api_is_importable_from_the_package() -> None:
    code = ("import mtkit, mtkit.errors, mtkit.options, mtkit.decode.translator as t; "
            "from mtkit import Translator, LoadOptions, SearchOptions, MtkitError, ConfigError, DataError, "
            "CheckpointError; "
            "assert Translator is t.Translator and LoadOptions is t.LoadOptions "
            "is mtkit.options.LoadOptions; "
            "assert SearchOptions is t.SearchOptions and DataError is mtkit.errors.DataError; "
            "assert issubclass(CheckpointError, MtkitError) and issubclass(ConfigError, MtkitError); "
            "assert set(mtkit.__all__) <= set(dir(mtkit)); "
            "print(sorted(n for n in mtkit.__all__ if not hasattr(mtkit, n)))")
    assert _fresh(code) == "[]"
    missing = "import mtkit\ntry:\n    mtkit.Nothing\nexcept AttributeError as e:\n    print(e)"
    assert _fresh(missing) == "module 'mtkit' has no attribute 'Nothing'"


def test_importing_the_package_loads_no_torch_and_no_translator() -> None:
    """`import mtkit` (and so `mtkit --help`) stays as light as it was before the lazy exports."""
    code = ("import sys, mtkit; "
            "print(' '.join(m for m in ('torch', 'mtkit.decode.translator', 'mtkit.options', 'sacrebleu', "
            "'numpy') "
            "if m in sys.modules))")
    assert _fresh(code) == ""


def test_models_and_search_do_not_load_the_cli_stack() -> None:
    code = ("import sys, mtkit.models, mtkit.models.base, mtkit.models.transformer, mtkit.models.rnn, "
            "mtkit.models.ensemble, mtkit.models.summary, mtkit.decode.search; "
            f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [], f"importing the models / the search loaded {out.stdout.split()}"


@pytest.mark.parametrize("path", sorted(ROOT.rglob("*.py")), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_is_short_and_says_what_it_is_for(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert ast.get_docstring(ast.parse(text)), f"{path.relative_to(ROOT.parent)} has no opening docstring"
    lines = len(text.splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT.parent)} has {lines} lines (at most {MAX_LINES})"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            span = node.end_lineno - body[0].lineno + 1 if body else 0  # type: ignore[operator]
            assert span <= MAX_FUNCTION_BODY, (f"{path.relative_to(ROOT.parent)}: {node.name} has a body of "
                                               f"{span} lines (at most {MAX_FUNCTION_BODY})")


# ------------------------------------------------------------------------- the checker catches breaks
def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in {"__init__.py": "", "models/__init__.py": "", "train/__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f'"""doc."""\n{text}')
    return root


def test_checker_names_each_offending_import(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        "cli.py": "from pkg.score import run\nimport pkg.train.loop\n",  # allowed: the CLI calls stages
        "score.py": "def f():\n    from pkg import translate\n",  # stage → stage, inside a function
        "translate.py": "from pkg.lib import x\n",  # stage → library: allowed
        "lib.py": "import pkg.train.loop\n",  # library → stage
        "data/__init__.py": "", "data/bpe.py": "",
        "models/rnn.py": "from ..data.bpe import Bpe\nfrom pkg import cli\n",  # models → bpe; → cli
        "train/loop.py": "from pkg.train import helpers\n",  # inside one stage: allowed
        "train/helpers.py": "",
    })
    stages = ("pkg.score", "pkg.translate", "pkg.train")
    bad = violations(root, stages, ("pkg.cli",))
    assert sorted(bad) == sorted([
        "pkg/score.py:3 imports pkg.translate (a stage imports no other stage)",
        "pkg/lib.py:2 imports pkg.train.loop (the library imports no stage)",
        "pkg/models/rnn.py:2 imports pkg.data.bpe "
        "(models use pkg.vocab's ids, never the sentencepiece wrapper)",
        "pkg/models/rnn.py:3 imports pkg.cli (only the CLI's entry points may import the CLI)",
    ])


def test_checker_finds_each_import_circle(tmp_path: Path) -> None:
    root = _package(tmp_path, {
        # the engines' options from the translator that opens them, if only for type checking
        "engine.py": "from typing import TYPE_CHECKING\n"
                     "if TYPE_CHECKING:\n    from pkg.translator import Options\n",
        "translator.py": "from pkg.engine import open_engine\n",
        # a mixin that imports its class, inside a function
        "train/trainer.py": "from pkg.train.checkpointing import Checkpointing\n",
        "train/checkpointing.py": "def f():\n    from pkg.train import trainer\n",
        # three round, the long way and a short cut
        "a.py": "import pkg.b\n", "b.py": "import pkg.c\nimport pkg.d\n", "c.py": "from pkg import a\n",
        "d.py": "from . import c\n",
        "lib.py": "from pkg.engine import open_engine\nfrom pkg import a\n",  # imports circles, in none
        "options.py": "", "uses_options.py": "from pkg.options import x\n",
    })
    assert circles(root) == [
        "pkg.a → pkg.b → pkg.c → pkg.a",
        "pkg.engine → pkg.translator → pkg.engine",
        "pkg.train.checkpointing → pkg.train.trainer → pkg.train.checkpointing",
    ]
    (root / "engine.py").write_text('"""doc."""\nfrom pkg.options import Options\n')  # moved below both
    (root / "c.py").write_text('"""doc."""\n')
    (root / "train/checkpointing.py").write_text('"""doc."""\n')
    assert circles(root) == []
