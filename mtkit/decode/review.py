"""Lines for a person to review first: `mtkit translate --min-confidence X --flag-file F`.

While a job translates, every input line whose translation has a confidence below X (`Candidate.
confidence`: the geometric mean of the probabilities of its tokens) is kept; at the end F is written
(atomically) as tab-separated lines, the least confident first:

    LINE <TAB> CONFIDENCE <TAB> SOURCE <TAB> TRANSLATION

LINE is the input line's number (1-based, as in ``file:line``), CONFIDENCE has four decimals, SOURCE
is the cleaned input line. Only the lines below X are held in memory. The list belongs to one whole
job: it is refused with --resume (a resumed run has not seen the earlier lines) and with shards.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mtkit.decode.translation import Translation, one_line
from mtkit.errors import ConfigError
from mtkit.textio import output_file


def check_review_options(flag_file: str | None, min_confidence: float | None, resume: bool,
                         sharded: bool) -> None:
    """Refuse a --min-confidence / --flag-file combination that cannot give one whole list."""
    if (flag_file is None) != (min_confidence is None):
        raise ConfigError("--min-confidence X and --flag-file FILE go together: the lines whose confidence "
                          "is below X are listed in FILE")
    if min_confidence is None:
        return
    if not 0.0 <= min_confidence <= 1.0:
        raise ConfigError(f"--min-confidence {min_confidence}: a confidence is between 0 and 1")
    for wanted, what in ((resume, "--resume"), (sharded, "--shard or torchrun")):
        if wanted:
            raise ConfigError(f"--flag-file lists the lines of a whole job and cannot be used with {what}: "
                              "translate in one run, or rank the --json output's confidence afterwards")


class ReviewList:
    """The translations below ``threshold``, written to ``path`` by ``write`` (no path: a list that
    keeps and writes nothing)."""

    def __init__(self, path: str | Path | None, threshold: float):
        self.path, self.threshold = (Path(path) if path is not None else None), threshold
        self.flagged: list[tuple[float, int, str, str]] = []
        self.seen = 0

    def add(self, tr: Translation) -> None:
        if self.path is None:
            return
        self.seen += 1
        if tr.confidence < self.threshold:  # a TAB inside a field would shift the columns
            fields = (one_line(text).replace("\t", " ") for text in (tr.source, tr.text))
            self.flagged.append((tr.confidence, tr.index + 1, *fields))

    def write(self) -> int:
        """Write the list (least confident first) and say on stderr how many lines it holds."""
        if self.path is None:
            return 0
        with output_file(self.path) as f:
            for confidence, line, source, text in sorted(self.flagged):
                f.write(f"{line}\t{confidence:.4f}\t{source}\t{text}\n")
        share = f" ({100 * len(self.flagged) / self.seen:.1f}%)" if self.seen else ""
        print(f"{len(self.flagged):,} of {self.seen:,} lines{share} have a confidence below "
              f"{self.threshold}: listed in {self.path}, least confident first", file=sys.stderr, flush=True)
        return len(self.flagged)


__all__ = ["ReviewList", "check_review_options"]
