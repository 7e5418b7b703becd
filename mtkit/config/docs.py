"""docs/config.md, rendered from the typed config so the key tables cannot go stale.

``render_markdown()`` is what ``mtkit config-keys --markdown`` prints: one Markdown table per config
section (key | type | default | applies to | meaning), built from ``describe_keys()`` and the
sections' own docstrings and value ranges. "applies to" comes from each field's ``when`` conditions
(mtkit.config.checks), the same data that refuses a key set where it has no effect.
tests/test_docs.py checks that docs/config.md equals it.
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from typing import Literal

from mtkit.config import experiment as config
from mtkit.config.checks import applies_to

COMMAND = "mtkit config-keys --markdown > docs/config.md"

_INTRO = """\
Every key of the experiment YAML, with its type, default and meaning. Each section is optional and
every key has a default; `--set section.key=value` overrides a key on the command line (values are
read as YAML scalars). A range after the type is checked when the config is loaded. How the config
file works in general: [data.md](data.md#the-config-file-in-general); what the keys do, stage by
stage: [data.md](data.md), [models.md](models.md), [training.md](training.md),
[translate.md](translate.md)."""


def describe_keys() -> list[tuple[str, str, str, str, str]]:
    """(key, type, default, applies to, doc) for every config key: the source of docs/config.md."""
    rows = []
    fields_of = {s: {f.name: f for f in dataclasses.fields(c)} for s, c in config.SECTIONS.items()}
    for section, cls in config.SECTIONS.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            tp = hints[f.name]
            if typing.get_origin(tp) is Literal:
                tname = "|".join(map(str, typing.get_args(tp)))
            else:
                tname = getattr(tp, "__name__", str(tp))
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
            rows.append((f"{section}.{f.name}", tname, repr(default), applies_to(section, f, fields_of),
                         f.metadata.get("doc", "")))
    return rows


def _cell(text: str) -> str:
    """One table cell: no line breaks, `|` escaped (also inside code spans, as GFM tables need)."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(text: str) -> str:
    """A default as the user writes it in YAML: strings unquoted, "" for the empty string."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return f"`{text}`"
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{text}`"


def _ranges() -> dict[str, str]:
    """``key -> "≥ 1"`` / ``"in [0.9, 1.0]"`` from the fields' ``min`` / ``max`` metadata."""
    out: dict[str, str] = {}
    for section, cls in getattr(config, "SECTIONS", {}).items():
        for f in dataclasses.fields(cls):
            lo, hi = f.metadata.get("min"), f.metadata.get("max")
            if lo is not None and hi is not None:
                out[f"{section}.{f.name}"] = f"in [{lo}, {hi}]"
            elif lo is not None:
                out[f"{section}.{f.name}"] = f"≥ {lo}"
            elif hi is not None:
                out[f"{section}.{f.name}"] = f"≤ {hi}"
    return out


def _section_docs() -> dict[str, str]:
    sections: dict[str, type] = getattr(config, "SECTIONS", {})
    return {name: " ".join((cls.__doc__ or "").split()) for name, cls in sections.items()}


def render_markdown() -> str:
    """docs/config.md: a header, then one table per section, in the order of the config."""
    rows = describe_keys()
    ranges, section_docs = _ranges(), _section_docs()
    by_section: dict[str, list[tuple[str, str, str, str, str]]] = {}
    for row in rows:
        by_section.setdefault(row[0].split(".", 1)[0], []).append(row)
    lines = [
        "# Config keys",
        "",
        f"*Generated from the typed config (mtkit/config/experiment.py) by `{COMMAND}`: edit the code, "
        "not this page.*",
        "",
        _INTRO,
        "",
        "Sections: " + ", ".join(f"[`{name}`](#{name})" for name in by_section) + ".",
    ]
    for section, section_rows in by_section.items():
        lines += ["", f"## {section}", ""]
        if section_docs.get(section):
            lines += [section_docs[section], ""]
        lines += ["| key | type | default | applies to | meaning |", "| --- | --- | --- | --- | --- |"]
        for key, tname, default, applies, doc in section_rows:
            tcell = f"`{tname}`" + (f" {ranges[key]}" if key in ranges else "")
            lines.append(f"| `{_cell(key)}` | {_cell(tcell)} | {_cell(_default(default))} | {_cell(applies)} "
                         f"| {_cell(doc)} |")
    return "\n".join(lines) + "\n"

