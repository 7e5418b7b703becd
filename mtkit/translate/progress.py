"""Progress bars of `mtkit translate` on stderr (rich): lines of a file, whose number is known at the
start, and the strings of a catalog or page, whose number grows as retries are found."""

from __future__ import annotations

from typing import Any


def progress_bar(total: int, unit: str = "lines") -> tuple[Any, Any]:
    """A rich progress bar on stderr (file input only: a stream has no known length), started."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("translating"), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                   TimeRemainingColumn(), console=Console(stderr=True))
    task = bar.add_task("translating", total=total)
    bar.start()
    return bar, task


class GrowingBar:
    """A bar whose total grows as work is found: ``grow`` before a search, ``advance`` after each part
    of it (decode.formats_adapter.search_functions calls both)."""

    def __init__(self, unit: str) -> None:
        self.bar, self.task = progress_bar(0, unit)
        self.total = 0

    def grow(self, n: int) -> None:
        self.total += n
        self.bar.update(self.task, total=self.total)

    def advance(self, n: int) -> None:
        self.bar.advance(self.task, n)

    def stop(self) -> None:
        self.bar.stop()
