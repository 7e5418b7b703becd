"""mtkit: a command-line toolkit for neural machine translation, and the library behind it.

The library API is importable from the package itself::

    from mtkit import Translator
    tr = Translator("runs/en-de", device="cpu", beam_size=5)

These names are imported on first use (PEP 562 ``__getattr__``), not here: ``import mtkit`` and
``mtkit --help`` (which imports this package) load neither PyTorch nor the translator. The table
names strings, not imports, so this package depends on nothing statically (tests/test_imports.py).

Modules that moved into a package (``mtkit.translator`` is now ``mtkit.decode.translator``) still
import under their old names, as the very same module object, with a DeprecationWarning: a user's
script written against the old layout keeps working (``_MOVED`` below, docs/architecture.md).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

__version__ = "0.1.0"

#: public name → the module that defines it
_LAZY = {
    "Translator": "mtkit.decode.translator",
    "PivotTranslator": "mtkit.decode.pivot",
    "LoadOptions": "mtkit.options",
    "SearchOptions": "mtkit.options",
    "MtkitError": "mtkit.errors",
    "ConfigError": "mtkit.errors",
    "DataError": "mtkit.errors",
    "CheckpointError": "mtkit.errors",
}

__all__ = ["__version__", *_LAZY]

#: old module name → where it lives now (the package layout of docs/architecture.md)
_MOVED = {
    **{f"mtkit.{name}": f"mtkit.decode.{name}" for name in (
        "translator", "engine", "torch_engine", "ct2", "search", "constrained", "glossary", "segment",
        "streaming", "translation", "loader", "review", "shortlist")},
    **{f"mtkit.{name}": f"mtkit.data.{name}" for name in ("prepare", "corpora", "bpe")},
    **{f"mtkit.{name}": f"mtkit.train.{name}" for name in ("average", "distill")},
    "mtkit.config_data": "mtkit.config.data_sections",
    "mtkit.config_checks": "mtkit.config.checks",
    "mtkit.config_docs": "mtkit.config.docs",
    "mtkit.cli_translate": "mtkit.cli.translate",
    "mtkit.cli_serve": "mtkit.cli.serve",
    # model interchange, gathered in one package (docs/architecture.md)
    "mtkit.export": "mtkit.interop.export",
    "mtkit.hf": "mtkit.interop.hf",
    "mtkit.decode.exported": "mtkit.interop.manifest",
    "mtkit.models.marian": "mtkit.interop.marian",
    "mtkit.data.spm_proto": "mtkit.interop.spm_proto",
    # modules named for what they hold
    "mtkit.decode.langid": "mtkit.langid",
    "mtkit.translate.documents": "mtkit.translate.protected",
    # formats by family, the placeholder machinery a package of its own (mtkit/formats/__init__.py)
    **{f"mtkit.formats.{name}": f"mtkit.formats.gettext.{name}" for name in ("po", "po_read", "plurals")},
    **{f"mtkit.formats.{name}": f"mtkit.formats.xml.{name}" for name in (
        "markup", "html", "xml_runs", "xml_paragraph", "xml_dialects")},
    **{f"mtkit.formats.{name}": f"mtkit.formats.zipped.{name}" for name in (
        "ziparts", "office", "opendocument", "epub")},
    **{f"mtkit.formats.{name}": f"mtkit.formats.captions.{name}" for name in ("subtitles", "subtitle_text")},
    **{f"mtkit.formats.{name}": f"mtkit.formats.interchange.{name}" for name in ("xliff", "xliff_inline")},
    "mtkit.formats.plaintext": "mtkit.formats.text.plaintext",
    "mtkit.formats.placeholders": "mtkit.placeholders.strings",
    **{f"mtkit.formats.{name}": f"mtkit.placeholders.{name}" for name in ("masking", "syntaxes", "icu")},
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module name as the module that now holds its code (the same object, so
    monkeypatching and isinstance see one module)."""

    def find_spec(self, fullname: str, path: Any = None,
                  target: Any = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(fullname, self) if fullname in _MOVED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # a placeholder module; exec_module puts the real one in its place

    def exec_module(self, module: ModuleType) -> None:
        new = _MOVED[module.__name__]
        warnings.warn(f"{module.__name__} is now {new}", DeprecationWarning, stacklevel=2)
        sys.modules[module.__name__] = importlib.import_module(new)  # the import system returns this one


if not any(isinstance(finder, _MovedModuleFinder) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mtkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
