"""Suite-wide settings: tiny models run fastest (and most repeatably) on one thread; the longest modules
start first; a trained model that several modules need is trained once per run."""

from __future__ import annotations

import fcntl
import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# OpenMP threads that wait for work sleep instead of spinning: the default spin burned whole CPU-seconds
# per command when a test's threads and the other worker's shared the two cores (the first CPU-bound
# kernel reads it, so it is set before torch is imported; subprocesses inherit it).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# torch is imported where it is used, not here: pytest-xdist's controller loads this file too and runs
# no test, and importing torch there held back both workers' start by about 3 s (2026-11-28).

# pytest caches its assertion-rewritten test modules as bytecode unless told not to write any
# (PYTHONDONTWRITEBYTECODE): without the cache each worker compiles every test module again, about
# 6 of its 15 CPU-seconds of collecting (2026-11-28). The caches go to tests/__pycache__ (ignored by git).
sys.dont_write_bytecode = False

sys.path.insert(0, str(Path(__file__).parent))


def _own_cores() -> None:
    """Each pytest-xdist worker runs on its share of the allowed cores (one each for 2 workers on 2
    cores), it and the commands it starts: `mtkit translate` and the other commands default to every
    allowed core (mtkit.cpus), so a command in one worker would otherwise run 2 threads against the
    other worker's 2 on 2 cores, spending several times the CPU-seconds of one thread on a tiny model."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not worker or not count or not hasattr(os, "sched_setaffinity"):
        return
    allowed = sorted(os.sched_getaffinity(0))
    share = allowed[int(worker.removeprefix("gw")) % int(count)::int(count)]
    if share and len(share) < len(allowed):
        for thread in os.listdir("/proc/self/task"):  # threads started already keep their own mask
            os.sched_setaffinity(int(thread), share)


_own_cores()


@contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


@pytest.fixture(autouse=True, scope="session")
def _one_thread_for_shared_fixtures() -> Iterator[None]:
    """Module-scoped fixtures (models built once per file) run on one thread too."""
    with _torch_threads(1):
        yield


@pytest.fixture(autouse=True)
def _one_thread() -> Iterator[None]:
    """Each test starts on one thread, and a test that changes the count does not leak it."""
    with _torch_threads(1):
        yield


# ------------------------------------------------------------------------------------------ ordering
# `make test` hands whole modules to its pytest-xdist workers (--dist loadscope --no-loadscope-reorder),
# in the order collected: the modules that take longest go first, so that no worker is left alone with a
# long module at the end while the other idles. Ranked by CPU-seconds per module in a 2-worker run
# (each worker on its own core, 2026-11-28); every other module follows in its usual order.
LONGEST_FIRST = (
    "test_hf.py", "test_trainer.py", "test_translate_jobs.py", "test_mrt.py", "test_recipes.py",
    "test_serve.py", "test_corpora.py", "test_config_keys.py", "test_translator.py",
    "test_corpora_decoder.py", "test_finetune.py", "test_distributed.py", "test_resume.py",
    "test_formats_html.py", "test_imports.py", "test_formats_po_random.py", "test_shortlist.py",
    "test_export.py", "test_score.py", "test_serve_browser.py", "test_formats_placeholders.py",
    "test_pivot.py", "test_serve_pivot.py", "test_formats_po.py", "test_compat.py", "test_search.py",
    "test_confidence.py", "test_runtime.py", "test_glossary.py", "test_serve_fuzz.py", "test_rnn.py",
    "test_distill.py", "test_cli.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (rank.get(item.path.name, len(rank)), order[id(item)]))


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collecting imported (torch, transformers, every test module: millions of objects) stays for
    the whole run, so Python's garbage collector stops scanning it (gc.freeze), and collects less often
    (a young generation of 10,000 objects, not 700): a worker spent 4-8 CPU-seconds in the collector,
    0.2-0.3 s for each full pass, and the suite's CPU time fell by about 5% (2026-11-28). Cyclic
    garbage is still collected, only later."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


# ---------------------------------------------------------------------------------- shared fixtures
def _run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This run's temporary directory, the same for every pytest-xdist worker of the run."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def copy_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a Transformer trained for a few seconds to copy its input (``model/``), its
    training data (``data/``, the copy task of tests/train_helpers.py) and text (``corpus.txt``): the
    same model for tests/test_export.py and tests/test_shortlist.py, trained by whichever worker asks
    first while the other waits. Treat it as read-only."""
    from train_helpers import make_data_dir, tiny_config

    from mtkit.train.trainer import train

    root = _run_root(tmp_path_factory) / "shared-copy-model"
    with open(f"{root}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (root / "done").is_file():
            data = make_data_dir(root, n_train=600, n_dev=20, random_ids=(3, 10), vocab_size=24)
            train(tiny_config(data, root / "model", max_steps=300, validate_every=1000, log_every=1000))
            (root / "done").touch()
    return root
