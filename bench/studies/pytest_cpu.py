"""Where `make test`'s CPU time goes: a pytest plugin that records, for each test, the CPU seconds of the
process running it and of the subprocesses it waited for, and for each process the time Python's
garbage collector took.

On 2 cores the suite's wall time is about its CPU time over 2 (both xdist workers stay busy), and that
CPU time is spread over many tests, so wall-clock `--durations` mislead: a test waiting on a subprocess
shows the subprocess's time only if it was waited for, and a test slowed by the other worker's load
looks longer than it is. Run from the repository root:

    rm -rf /tmp/pytest-cpu && PYTEST_CPU_DIR=/tmp/pytest-cpu PYTHONPATH=bench/studies \\
        python -m pytest -p pytest_cpu -n 2 --dist loadscope --no-loadscope-reorder -q tests
    python bench/studies/pytest_cpu.py /tmp/pytest-cpu        # the summary

Each process writes `tests.<pid>.tsv` (self CPU-s, children CPU-s, wall s, test id, start s) and
`gc.<pid>.txt` (seconds and passes per generation) into PYTEST_CPU_DIR.
"""

from __future__ import annotations

import gc
import os
import resource
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

_DIR = os.environ.get("PYTEST_CPU_DIR")
_START = time.time()
_GC_SECONDS = [0.0, 0.0, 0.0]
_GC_PASSES = [0, 0, 0]
_GC_BEGAN: list[float] = []


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def _time_gc(phase: str, info: dict) -> None:
    if phase == "start":
        _GC_BEGAN[:] = [time.perf_counter()]
    elif _GC_BEGAN:
        _GC_SECONDS[info["generation"]] += time.perf_counter() - _GC_BEGAN[0]
        _GC_PASSES[info["generation"]] += 1


def _write(name: str, text: str, mode: str = "a") -> None:
    if _DIR:
        Path(_DIR).mkdir(parents=True, exist_ok=True)
        with open(Path(_DIR) / f"{name}.{os.getpid()}.{'tsv' if name == 'tests' else 'txt'}", mode) as f:
            f.write(text)


def pytest_configure(config: pytest.Config) -> None:
    if _DIR:
        gc.callbacks.append(_time_gc)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    own, children = _cpu()
    began = time.time()
    yield
    own_after, children_after = _cpu()
    _write("tests", f"{own_after - own:.2f}\t{children_after - children:.2f}\t{time.time() - began:.2f}\t"
                    f"{item.nodeid}\t{began - _START:.1f}\n")


def pytest_collection_finish(session: pytest.Session) -> None:
    _write("tests", f"{sum(_cpu()):.2f}\t0\t0\tCOLLECTION\t{time.time() - _START:.1f}\n")


def pytest_sessionfinish(session: pytest.Session) -> None:
    _write("gc", f"{' '.join(f'{s:.2f}' for s in _GC_SECONDS)}\t{' '.join(map(str, _GC_PASSES))}\n", "w")


def summary(folder: Path, top: int = 30) -> None:
    """Print the CPU seconds per worker, per module and of the costliest tests."""
    tests: list[tuple[float, float, str]] = []
    for path in sorted(folder.glob("tests.*.tsv")):
        rows = [line.split("\t") for line in path.read_text().splitlines()]
        print(f"worker {path.stem.split('.')[1]}: {sum(float(r[0]) + float(r[1]) for r in rows):.1f} CPU-s, "
              f"collection {next((r[0] for r in rows if r[3] == 'COLLECTION'), '?')} CPU-s, "
              f"last test began at {max(float(r[4]) for r in rows):.0f} s")
        tests += [(float(r[0]), float(r[1]), r[3]) for r in rows if r[3] != "COLLECTION"]
    for path in sorted(folder.glob("gc.*.txt")):
        seconds, passes = path.read_text().split("\t")
        print(f"garbage collector, process {path.stem.split('.')[1]}: {seconds} s, {passes.strip()} passes "
              "(generations 0 1 2)")
    print(f"tests: {sum(a + b for a, b, _ in tests):.1f} CPU-s, of which subprocesses "
          f"{sum(b for _, b, _ in tests):.1f}")
    modules: Counter[str] = Counter()
    for own, children, name in tests:
        modules[name.split("::")[0]] += own + children
    for module, seconds in modules.most_common(15):
        print(f"{seconds:7.1f}  {module}")
    for own, children, name in sorted(tests, key=lambda t: -(t[0] + t[1]))[:top]:
        print(f"{own + children:7.2f}  ({children:5.2f} in subprocesses)  {name}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python bench/studies/pytest_cpu.py PYTEST_CPU_DIR")
    summary(Path(sys.argv[1]))
