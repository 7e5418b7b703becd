"""Build a directory of outputs beside its target and move the files in only when the build
succeeded: a stage that fails half-way (every pair filtered out, a bad file found late, a kill) never
leaves a good existing directory damaged."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path


@contextlib.contextmanager
def staged_directory(target: Path, seed: Iterable[str] = (), stale: Iterable[str] = (),
                     last: str | None = None) -> Iterator[Path]:
    """Yield a fresh directory beside ``target`` to build in, holding copies of the files ``seed``
    names from ``target`` (what the build may reuse). On success, ``target``'s file ``last`` (the one
    whose presence marks it complete) and its ``stale`` files are removed, the built files are moved
    in, ``last`` at the very end. On failure the staging directory is removed and ``target`` is as it
    was. Other files in ``target`` are left alone."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    for leftover in target.parent.glob(f".{target.name}.staging-*"):  # a killed earlier run's
        shutil.rmtree(leftover, ignore_errors=True)
    stage = target.parent / f".{target.name}.staging-{os.getpid()}"
    stage.mkdir()
    try:
        for name in seed:
            if (target / name).is_file():
                shutil.copy2(target / name, stage / name)
        yield stage
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
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
    shutil.rmtree(stage, ignore_errors=True)
