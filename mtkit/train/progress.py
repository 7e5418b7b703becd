"""What the user sees while training: a rich progress bar on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn


class TrainingDisplay:
    """Progress bar (stderr, only on a terminal) with loss, lr, tokens/s and ETA, plus log lines."""

    def __init__(self, enabled: bool, total_updates: int | None, done_updates: int):
        self.enabled = enabled
        self.console = Console(stderr=True, highlight=False)
        self.progress: Progress | None = None
        if enabled and self.console.is_terminal:
            self.progress = Progress(
                TextColumn("[bold]train[/]"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeRemainingColumn(),
                console=self.console,
                transient=False,
            )
            self.task = self.progress.add_task("train", total=total_updates, completed=done_updates, stats="")
            self.progress.start()

    def advance(self, step: int, stats: str | None = None) -> None:
        if self.progress is not None:
            if stats is None:
                self.progress.update(self.task, completed=step)
            else:
                self.progress.update(self.task, completed=step, stats=stats)

    def log(self, line: str) -> None:
        if not self.enabled:
            return
        if self.progress is not None:
            self.progress.console.print(line, markup=False)
        else:
            print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
