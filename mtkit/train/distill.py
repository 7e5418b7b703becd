"""The `mtkit distill` stage: a teacher's translations of the training source → a corpus for a student.

Sequence-level knowledge distillation (Kim & Rush 2016): a small student learns from what a larger
teacher outputs with beam search, rather than from the human references — output that is more
regular, and easier for a small model to imitate. The teacher's translations come from
`mtkit translate --scores` (each line ``translation<TAB>confidence<TAB>mean log-probability``), run with
``--resume`` and ``--shard`` like any long translation; this stage pairs them with their sources, drops
what a student should not imitate, and writes a parallel corpus that `mtkit prepare` takes:

- ``empty``: an empty translation of a non-empty source;
- ``confidence``: the teacher's confidence (its geometric-mean token probability, 0-1) below
  ``min_confidence`` — likely wrong or degenerate output;
- ``length_ratio``: translation and source lengths (in characters) more than ``max_length_ratio``
  apart — a truncated or looping output;
- ``copy``: the translation equals a source of at least ``copy_min_chars`` characters that contains
  a letter — the teacher did not translate (short strings, numbers and commands are often copied
  rightly, and stay).

With ``original_target`` the original pairs are added after the distilled ones (``mix_original``), or
only used to check that the three files hold one line per pair. Each output goes to a temporary file
and is renamed into place; the report (JSON) says how many pairs were read, kept and dropped, and why.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mtkit.errors import ConfigError, DataError
from mtkit.textio import output_file, read_lines, same_file

REASONS = ("empty", "confidence", "length_ratio", "copy")


@dataclass
class DistillOptions:
    """What `mtkit distill` drops (see the module docstring) and whether it mixes the original in."""

    min_confidence: float = 0.0
    max_length_ratio: float = 3.0
    copy_min_chars: int = 20
    mix_original: bool = False


@dataclass
class DistillReport:
    pairs: int = 0
    kept: int = 0
    dropped: dict[str, int] = field(default_factory=lambda: dict.fromkeys(REASONS, 0))
    original_added: int = 0
    settings: dict[str, object] = field(default_factory=dict)

    def summary(self) -> str:
        why = ", ".join(f"{n:,} {r.replace('_', ' ')}" for r, n in self.dropped.items() if n) or "none"
        extra = f"; {self.original_added:,} original pairs added" if self.original_added else ""
        return f"distill: {self.kept:,} of {self.pairs:,} pairs kept (dropped: {why}){extra}"


def _parse(line: str, name: str, lineno: int) -> tuple[str, float]:
    """A `mtkit translate --scores` line: the translation and its confidence."""
    parts = line.split("\t")
    if len(parts) != 3:
        raise DataError(f"{name}:{lineno}: expected translation<TAB>confidence<TAB>log-probability, as "
                        "`mtkit translate --scores` writes (got {} field{})".format(
                            len(parts), "" if len(parts) == 1 else "s"))
    try:
        return parts[0], float(parts[1])
    except ValueError:
        raise DataError(f"{name}:{lineno}: the confidence {parts[1]!r} is not a number") from None


def drop_reason(source: str, translation: str, confidence: float, opts: DistillOptions) -> str | None:
    """Why a (source, teacher translation) pair is left out of the student's corpus (None: kept)."""
    src, hyp = source.strip(), translation.strip()
    if not src:
        return None  # an empty line stays an empty pair (prepare decides about those)
    if not hyp:
        return "empty"
    if confidence < opts.min_confidence:
        return "confidence"
    if max(len(src), len(hyp)) > opts.max_length_ratio * min(len(src), len(hyp)):
        return "length_ratio"
    if hyp == src and len(src) >= opts.copy_min_chars and any(c.isalpha() for c in src):
        return "copy"
    return None


def run_distill(source: str | Path, translations: str | Path, out_source: str | Path, out_target: str | Path,
                opts: DistillOptions | None = None, original_target: str | Path | None = None,
                report: str | Path | None = None) -> DistillReport:
    """Pair ``source`` with the teacher's ``translations`` line by line, filter, and write the corpus."""
    opts = opts or DistillOptions()
    if opts.max_length_ratio < 1.0:
        raise ConfigError(f"--max-length-ratio must be at least 1, not {opts.max_length_ratio}")
    if opts.mix_original and original_target is None:
        raise ConfigError("--mix-original needs --original-target (the human translations of --source)")
    inputs = [Path(p) for p in (source, translations, original_target) if p is not None]
    for out in (out_source, out_target, report):
        if out is not None and any(Path(p).exists() and same_file(p, out) for p in inputs):
            raise ConfigError(f"{out} is also an input: an input is never an output")
    result = DistillReport(settings=asdict(opts))
    originals: list[tuple[str, str]] = []
    src_iter = read_lines(source)
    hyp_iter = read_lines(translations)
    ref_iter = read_lines(original_target) if original_target is not None else None
    with output_file(out_source) as fs, output_file(out_target) as ft:
        for n, src in enumerate(src_iter, start=1):
            hyp_line = next(hyp_iter, None)
            if hyp_line is None:
                raise DataError(f"{translations}: {n - 1} lines, but {source} has more (line {n}): "
                                "finish the translation (mtkit translate --resume) first")
            ref = next(ref_iter, None) if ref_iter is not None else None
            if ref_iter is not None and ref is None:
                raise DataError(f"{original_target}: {n - 1} lines, but {source} has more (line {n})")
            text, confidence = _parse(hyp_line, str(translations), n)
            result.pairs += 1
            why = drop_reason(src, text, confidence, opts)
            if why is not None:
                result.dropped[why] += 1
            else:
                fs.write(src + "\n")
                ft.write(text + "\n")
                result.kept += 1
            if opts.mix_original and ref is not None:
                originals.append((src, ref))
        if next(hyp_iter, None) is not None:
            raise DataError(f"{translations}: more lines than {source} ({result.pairs}): not its translation")
        if ref_iter is not None and next(ref_iter, None) is not None:
            raise DataError(f"{original_target}: more lines than {source} ({result.pairs})")
        for src, ref in originals:
            fs.write(src + "\n")
            ft.write(ref + "\n")
        result.original_added = len(originals)
    if report is not None:
        with output_file(report) as f:
            f.write(json.dumps(asdict(result), indent=2) + "\n")
    return result


__all__ = ["REASONS", "DistillOptions", "DistillReport", "drop_reason", "run_distill"]
