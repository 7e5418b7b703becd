"""mtkit: a command-line toolkit for neural machine translation, and the library behind it.

The library API is importable from the package itself::

    from mtkit import Translator
    tr = Translator("runs/en-de", device="cpu", beam_size=5)

These names are imported on first use (PEP 562 ``__getattr__``), not here: ``import mtkit`` and
``mtkit --help`` (which imports this package) load neither PyTorch nor the translator. The table
names strings, not imports, so this package depends on nothing statically (tests/test_imports.py).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

#: public name → the module that defines it
_LAZY = {
    "Translator": "mtkit.translator",
    "LoadOptions": "mtkit.options",
    "SearchOptions": "mtkit.options",
    "MtkitError": "mtkit.errors",
    "ConfigError": "mtkit.errors",
    "DataError": "mtkit.errors",
    "CheckpointError": "mtkit.errors",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mtkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
