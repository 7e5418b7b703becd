"""`mtkit merge-shards`: the outputs of `mtkit translate --shard K/N` (and of the ranks of a torchrun
job) interleaved back into input order, after checking that they are one job's shards, all complete.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from mtkit.errors import ConfigError, DataError
from mtkit.textio import count_lines, output_file, read_lines, same_file

SIDECAR = ".shard.json"  # OUT + SIDECAR: written when shard OUT is complete; merge-shards reads it


def _sidecar(path: str) -> dict[str, Any]:
    sidecar = Path(f"{path}{SIDECAR}")
    if not Path(path).is_file():
        raise DataError(f"merge-shards: shard output not found: {path}")
    if not sidecar.is_file():
        raise DataError(f"merge-shards: {path} has no {sidecar.name}: not a finished shard "
                        "(`mtkit translate --shard K/N` writes it when the shard is complete)")
    try:
        info = json.loads(sidecar.read_text(encoding="utf-8"))
        if not all(isinstance(info[key], int) for key in ("shard", "of", "input_lines", "lines_per_input")):
            raise TypeError
    except (OSError, ValueError, KeyError, TypeError):
        raise DataError(f"merge-shards: {sidecar} is not a shard record of mtkit translate") from None
    return info


def merge_shard_outputs(inputs: list[str], output: str | None) -> int:
    """Interleave the outputs of `mtkit translate --shard K/N` (given in any order) back into input
    order: input line i comes from shard i mod N. Checks, before writing anything, that the N shards
    of one job are all there once and complete. Returns the number of input lines."""
    output = None if output == "-" else output
    if not inputs:
        raise ConfigError("merge-shards: name the shard outputs to merge")
    # a shell glob may catch the sidecars too: a sidecar names its shard output
    paths = list(dict.fromkeys(p[: -len(SIDECAR)] if p.endswith(SIDECAR) else p for p in map(str, inputs)))
    records = [(path, _sidecar(path)) for path in paths]
    first_path, first = records[0]
    for path, info in records[1:]:
        for key in ("of", "input", "input_lines", "lines_per_input", "format"):
            if info.get(key) != first.get(key):
                raise DataError(f"merge-shards: {path} and {first_path} are shards of different jobs "
                                f"({key}: {info.get(key)} vs {first.get(key)})")
    n, total, per_input = first["of"], first["input_lines"], first["lines_per_input"]
    by_shard: dict[int, str] = {}
    for path, info in records:
        if info["shard"] in by_shard:
            raise DataError(f"merge-shards: shard {info['shard']}/{n} given twice: {by_shard[info['shard']]} "
                            f"and {path}")
        by_shard[info["shard"]] = path
    missing = [f"{k}/{n}" for k in range(n) if k not in by_shard]
    if missing:
        raise DataError(f"merge-shards: shard {', '.join(missing)} of {first['input']} missing "
                        f"(got {len(by_shard)} of {n})")
    for k, path in sorted(by_shard.items()):
        want, got = len(range(k, total, n)) * per_input, count_lines(path)
        if got != want:
            raise DataError(f"merge-shards: {path} has {got} lines but shard {k}/{n} of {first['input']} "
                            f"({total} lines) needs {want}")
        if output is not None and same_file(path, output):
            raise DataError(f"merge-shards: --output {output} is one of the shards; write to another file")
    readers = [read_lines(by_shard[k]) for k in range(n)]
    with output_file(output) as sink:
        for i in range(total):
            reader = readers[i % n]
            sink.write("".join(next(reader) + "\n" for _ in range(per_input)))
    return total
