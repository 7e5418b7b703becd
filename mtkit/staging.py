"""Outputs built beside their target and moved into place only when the build succeeded, the one way
every stage writes a directory (`mtkit prepare`, `mtkit export`, `mtkit import-hf`): a stage that fails
half-way (a refused model, every pair filtered out, a bad file found late, a kill) never leaves a good
existing output damaged, and never leaves a half-written one.

- ``stage_beside``: a fresh directory beside the target to build in, removed whatever happens.
- ``replace_directory``: a finished directory renamed into place, replacing the target whole.
- ``staged_directory``: files built beside a directory and moved into it, the others there kept.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path


@contextlib.contextmanager
def stage_beside(target: str | Path) -> Iterator[Path]:
    """Yield a new, empty directory in ``target``'s parent (``.NAME.staging-XXXX``: hidden, and on the
    same file system, so a rename moves it) and remove it, with whatever is left in it, at the end."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{target.name}.staging-", dir=target.parent))
    try:
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def replace_directory(built: Path, target: Path) -> None:
    """Rename the finished directory ``built`` to ``target``; a directory already there is replaced
    only then (moved aside, the new one renamed in, the old one removed)."""
    if not target.exists():
        os.replace(built, target)
        return
    old = target.with_name(f".{target.name}.{os.getpid()}.old")
    os.replace(target, old)
    os.replace(built, target)
    shutil.rmtree(old, ignore_errors=True)


@contextlib.contextmanager
def staged_directory(target: Path, seed: Iterable[str] = (), stale: Iterable[str] = (),
                     last: str | None = None) -> Iterator[Path]:
    """Yield a fresh directory beside ``target`` to build in, holding copies of the files ``seed``
    names from ``target`` (what the build may reuse). On success, ``target``'s file ``last`` (the one
    whose presence marks it complete) and its ``stale`` files are removed, the built files are moved
    in, ``last`` at the very end. On failure the staging directory is removed and ``target`` is as it
    was. Other files in ``target`` are left alone."""
    target = Path(target)
    for leftover in target.parent.glob(f".{target.name}.staging-*"):  # a killed earlier run's
        shutil.rmtree(leftover, ignore_errors=True)
    with stage_beside(target) as stage:
        for name in seed:
            if (target / name).is_file():
                shutil.copy2(target / name, stage / name)
        yield stage
        target.mkdir(exist_ok=True)
        if last is not None:
            (target / last).unlink(missing_ok=True)  # first: a kill while moving leaves it incomplete
        for name in stale:
            (target / name).unlink(missing_ok=True)
        for path in sorted(stage.iterdir()):
            if path.name != last:
                os.replace(path, target / path.name)
        if last is not None and (stage / last).exists():
            os.replace(stage / last, target / last)
