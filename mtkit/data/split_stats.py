"""What `mtkit prepare` did to each split (kept, dropped by reason, tokens, time), as kept in meta.json
and printed as the stage's summary, with the progress display it shows while encoding."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

REASONS = ("empty", "too_long", "too_short", "ratio")
REASON_TEXT = {
    "empty": "an empty side",
    "too_long": "more than data.max_len tokens",
    "too_short": "fewer than data.min_len tokens",
    "ratio": "length ratio above data.max_len_ratio",
}


@dataclass
class SplitStats:
    """What happened to one split: the numbers in the summary and in meta.json."""

    input_sentences: int = 0
    sentences: int = 0
    src_tokens: int = 0
    tgt_tokens: int = 0
    dropped: Counter = field(default_factory=Counter)
    kept_by_group: list[int] = field(default_factory=list)  # per corpus of a multilingual training split
    empty_kept: int = 0  # dev/test pairs with an empty side, kept so line numbers match the raw files
    seconds: float = 0.0

    def as_meta(self) -> dict[str, Any]:
        return {
            "sentences": self.sentences,
            "src_tokens": self.src_tokens,
            "tgt_tokens": self.tgt_tokens,
            "input_sentences": self.input_sentences,
            "dropped": {r: self.dropped[r] for r in REASONS if self.dropped[r]},
            "empty_kept": self.empty_kept,
        }


class LinesPerSecond(ProgressColumn):
    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} lines/s" if speed else "", style="progress.data.speed")


def progress_display(console: Console) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), LinesPerSecond(),
        TimeElapsedColumn(),
        console=console, disable=not console.is_terminal,
    )


def print_summary(console: Console, out: Path, stats: dict[str, SplitStats], bpe_seconds: float,
             seconds: float) -> None:
    """Plain lines rather than a table: they read the same in a terminal and in a log file."""
    console.print(f"[bold]prepared {out}[/bold]")
    for name, st in stats.items():
        dropped = ", ".join(f"{r} {st.dropped[r]:,}" for r in REASONS if st.dropped[r]) or "none"
        rate = st.input_sentences / st.seconds if st.seconds > 0 else 0.0
        line = (f"  {name}: {st.input_sentences:,} pairs, kept {st.sentences:,} (dropped: {dropped}); "
                f"{st.src_tokens:,} src / {st.tgt_tokens:,} tgt tokens; {rate:,.0f} lines/s")
        if st.empty_kept:
            line += f"; {st.empty_kept:,} with an empty side kept"
        console.print(line, highlight=False)
    reasons = [r for r in REASONS if any(st.dropped[r] for st in stats.values())]
    if reasons:
        console.print("  dropped = " + "; ".join(f"{r}: {REASON_TEXT[r]}" for r in reasons), highlight=False)
    total = sum(st.input_sentences for st in stats.values())
    encode_seconds = sum(st.seconds for st in stats.values())
    console.print(f"  done in {seconds:.1f} s (BPE {bpe_seconds:.1f} s; encoding {encode_seconds:.1f} s, "
                  f"{total / max(encode_seconds, 1e-9):,.0f} lines/s)", highlight=False)


__all__ = ["REASONS", "REASON_TEXT", "SplitStats", "print_summary", "progress_display"]
