"""The checks behind mtkit.config.experiment: value types, key suggestions, and which keys apply to
which config.

A key that applies only under a condition (to one architecture, to one LR schedule, …) says so in its
field's ``metadata["when"]``: ``{"arch": ("rnn",)}``, ``{"schedule": ("plateau",)}``,
``{"init_from": Not("")}``; a condition names a key of the same section, or ``section.key`` of
another. ``check_applicable`` refuses a config that sets such a key where it would have no effect,
since a user who sees no error believes the setting was applied; ``applies_to`` renders the same
conditions for ``mtkit config-keys``. This module knows nothing of the sections themselves, so
mtkit.config.experiment (which defines them) can import it.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import typing
from dataclasses import dataclass
from typing import Any, Literal

from mtkit.errors import ConfigError


@dataclass(frozen=True)
class Not:
    """A ``when`` condition: the other key holds anything but ``value`` (``Not("")``: it is set)."""

    value: Any


#: ``when`` values: the allowed values of the other key, or Not(the one value that switches it off)
Condition = tuple[Any, ...] | Not


# ------------------------------------------------------------------------------- values, suggestions
# names other toolkits use for a key: `learning_rate` should point at `lr` though they share few letters
_ALIASES = {"learning_rate": "lr", "batch_size": "max_tokens", "beam": "beam_size", "epochs": "max_epochs",
            "steps": "max_steps", "vocab": "vocab_size", "layers": "encoder_layers", "hidden": "hidden_size"}


def suggest(key: str, valid: list[str]) -> str:
    """The closest valid key: an alias, a spelling neighbour, or one that shares a `_`-separated prefix
    (`lr_rate` → `lr`); else the list of valid keys."""
    close = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    if not close and _ALIASES.get(key) in valid:
        close = [_ALIASES[key]]
    if not close:
        related = [v for v in valid if key.startswith(v + "_") or v.startswith(key + "_")]
        close = sorted(related, key=len, reverse=True)[:1]
    if not close:
        close = difflib.get_close_matches(key, valid, n=1, cutoff=0.5)
    return f" (did you mean '{close[0]}'?)" if close else f" (valid keys: {', '.join(valid)})"


_YAML11_MISSED_FLOAT = re.compile(r"^[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+$")


def coerce(value: Any, tp: Any, name: str) -> Any:
    """Check `value` against the annotation `tp`, converting where YAML is loose (int → float)."""
    origin = typing.get_origin(tp)
    if origin is Literal:
        choices = typing.get_args(tp)
        if isinstance(value, bool) and {"on", "off"} <= set(choices):
            value = "on" if value else "off"  # YAML 1.1 reads a bare on/off as a boolean
        if value not in choices:
            raise ConfigError(f"{name}: {value!r} is not one of {', '.join(map(str, choices))}")
        return value
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        return [coerce(v, item, f"{name}[{i}]") for i, v in enumerate(value)]
    if origin is dict:  # a mapping checked by its user (data.sources[].clean: keys of the clean section)
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: expected a mapping of keys, got {value!r}")
        return dict(value)
    if dataclasses.is_dataclass(tp):  # an item of a list of mappings (data.corpora)
        if not isinstance(value, dict):
            raise ConfigError(f"{name}: expected a mapping of keys, got {value!r}")
        hints, names = typing.get_type_hints(tp), [f.name for f in dataclasses.fields(tp)]
        for key in value:
            if key not in names:
                raise ConfigError(f"unknown key '{name}.{key}'{suggest(str(key), names)}")
        return tp(**{k: coerce(v, hints[k], f"{name}.{k}") for k, v in value.items()})
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name}: expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, str) and _YAML11_MISSED_FLOAT.match(value.strip()):
            return float(value)  # PyYAML (YAML 1.1) reads 1e-3 as a string; users mean a number
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        if not math.isfinite(value):  # NaN passes every range check, inf most
            raise ConfigError(f"{name}: expected a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if value is None:
            return ""
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise ConfigError(f"{name}: expected a string, got {value!r}")
        return str(value)
    raise ConfigError(f"{name}: unsupported type {tp}")  # pragma: no cover - a programming error


# --------------------------------------------------------------------------------------- applicability
def _field(cfg: Any, key: str) -> tuple[Any, dataclasses.Field]:
    """(value, field) of the dotted ``key`` in a config whose sections are dataclass attributes."""
    section, name = key.split(".")
    sec = getattr(cfg, section)
    return getattr(sec, name), next(f for f in dataclasses.fields(sec) if f.name == name)


def _default(f: dataclasses.Field) -> Any:
    return f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]


def conditions(section: str, f: dataclasses.Field) -> dict[str, Condition]:
    """The field's ``when`` conditions, keyed by the dotted name of the key each one is about."""
    return {(k if "." in k else f"{section}.{k}"): c for k, c in f.metadata.get("when", {}).items()}


def _holds(value: Any, cond: Condition) -> bool:
    return value != cond.value if isinstance(cond, Not) else value in cond


def unmet(cfg: Any, key: str) -> tuple[str, Condition, Any] | None:
    """The first condition of ``key`` that ``cfg`` breaks, as (other key, condition, its value), or None
    when the key applies. A condition on a key that itself does not apply is no condition (a model key
    that needs ``model.attention`` to be a scorer applies to every Transformer)."""
    _, f = _field(cfg, key)
    for other, cond in conditions(key.split(".")[0], f).items():
        if unmet(cfg, other) is not None:
            continue
        value, _ = _field(cfg, other)
        if not _holds(value, cond):
            return other, cond, value
    return None


def _why(key: str, other: str, cond: Condition, value: Any) -> str:
    if isinstance(cond, Not) and cond.value in ("", []):
        return f"{key} is set but {other} is not: it applies only with {other}"
    want = f"is not {cond.value}" if isinstance(cond, Not) else f"is {' or '.join(map(str, cond))}"
    return (f"{key} applies only when {other} {want}, and here it is {value}: remove {key} or change "
            f"{other}")


def check_applicable(cfg: Any, keys: typing.Iterable[str] | None = None) -> None:
    """Refuse a key set (to anything but its default) where it has no effect, e.g. ``model.heads`` for
    an RNN. ``keys`` limits the check to those dotted keys (e.g. the ones a command line overrode).

    "Set" means "differs from the default", not "present in the YAML": the resolved config.yaml that
    every stage writes holds every key, those of the other architecture included, and must load again."""
    wanted = None if keys is None else set(keys)
    for section in dataclasses.fields(cfg):
        for f in dataclasses.fields(getattr(cfg, section.name)):
            key = f"{section.name}.{f.name}"
            if (wanted is not None and key not in wanted) or "when" not in f.metadata:
                continue
            value, _ = _field(cfg, key)
            if value == _default(f):
                continue
            broken = unmet(cfg, key)
            if broken is not None:
                raise ConfigError(_why(key, *broken))


def applies_to(section: str, f: dataclasses.Field, fields_of: dict[str, dict[str, dataclasses.Field]]
               ) -> str:
    """Where a key takes effect, for ``mtkit config-keys``: ``all``, ``rnn``, ``transformer``, plus any
    other condition (``transformer, positions: learned``; ``schedule: plateau``; ``init_from set``).
    ``fields_of`` maps section → field name → field, to say which architecture a condition's key has."""
    parts: list[str] = []
    own = conditions(section, f)
    for other, cond in own.items():
        o_section, o_name = other.split(".")
        label = o_name if o_section == section else other
        if o_name == "arch" and not isinstance(cond, Not):
            parts.insert(0, "|".join(map(str, cond)))
            continue
        if isinstance(cond, Not):
            text = f"{label} set" if cond.value in ("", []) else f"{label} ≠ {cond.value}"
        else:
            text = f"{label}: {'|'.join(map(str, cond))}"
        arch = conditions(o_section, fields_of[o_section][o_name]).get(f"{o_section}.arch")
        if arch is not None and not isinstance(arch, Not) and arch != own.get(f"{o_section}.arch"):
            text += f" ({'|'.join(map(str, arch))})"
        parts.append(text)
    return ", ".join(parts) or "all"
