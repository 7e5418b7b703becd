"""The typed experiment config (experiment.py), its data and bpe sections, value checks, and the
renderer of docs/config.md: YAML in, validated dataclasses out.

``from mtkit.config import Config`` (the path before this was a package) still works: the names of
experiment.py are looked up on first use, so importing a submodule does not load them all.
"""

from __future__ import annotations

import importlib
from typing import Any


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    experiment = importlib.import_module("mtkit.config.experiment")
    try:
        return getattr(experiment, name)
    except AttributeError:
        raise AttributeError(f"module 'mtkit.config' has no attribute {name!r}") from None
