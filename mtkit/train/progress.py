"""What the user sees while training: a rich progress bar on a terminal, plain log lines otherwise."""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from mtkit.train.state import Validation


class TrainingDisplay:
    """Progress bar (stderr, only on a terminal) with loss, lr, tokens/s and ETA, plus log lines.

    The bar runs towards max_steps (or the updates of max_epochs) when given, else towards max_time.
    """

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.by_time = False
        self.console = Console(stderr=True, highlight=False)
        self.progress: Progress | None = None

    def start(self, total_updates: int | None, done_updates: int, time_limit_s: float | None = None,
              elapsed_s: float = 0.0) -> None:
        """Show the bar (on a terminal) from ``done_updates`` towards the run's limit."""
        self.by_time = total_updates is None and bool(time_limit_s)
        if self.enabled and self.console.is_terminal and self.progress is None:
            self.progress = Progress(
                TextColumn("[bold]train[/] update {task.fields[step]}"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[stats]}"),
                TimeRemainingColumn(),
                console=self.console,
            )
            total = time_limit_s if self.by_time else total_updates
            completed = elapsed_s if self.by_time else done_updates
            self.task = self.progress.add_task("train", total=total, completed=completed, step=done_updates,
                                               stats="")
            self.progress.start()

    def advance(self, step: int, elapsed_s: float, stats: str | None = None) -> None:
        if self.progress is None:
            return
        fields = {"step": step} if stats is None else {"step": step, "stats": stats}
        self.progress.update(self.task, completed=elapsed_s if self.by_time else step, **fields)

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


def hms(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def train_line(event: dict) -> str:
    ppl = event["ppl"] if event["ppl"] is not None else float("nan")
    parts = [f"step {event['step']}", f"epoch {event['epoch']}", f"loss {event['loss']:.3f}",
             f"nll {event['nll']:.3f}", f"ppl {ppl:.2f}", f"lr {event['lr']:.3e}",
             f"risk {event['risk']:.4f}" if event.get("risk") is not None else "",
             f"{event['tokens_per_s']:,.0f} tgt tok/s",
             f"MFU {100 * event['mfu']:.1f}%" if event.get("mfu") is not None else "",
             f"pad {100 * event['padding']:.1f}%",
             _memory(event), hms(event["elapsed"])]
    return " | ".join(part for part in parts if part)


def _memory(event: dict) -> str:
    """"rss 1,402 MiB (peak 1,715)" — the process's resident memory now and at its highest."""
    if event.get("peak_rss_mib") is None:
        return ""
    now = f"{event['rss_mib']:,} MiB " if event.get("rss_mib") is not None else ""
    return f"rss {now}(peak {event['peak_rss_mib']:,})"


def valid_line(step: int, valid: dict, best: Validation | None, metric: str,
               memory: dict | None = None) -> str:
    """The validation's scores, the best so far, and (``memory``: rss_mib, peak_rss_mib) the resident
    memory after it."""
    parts = [f"valid | step {step}"]
    for key, digits in (("dev_loss", 3), ("dev_ppl", 2), ("dev_bleu", 2), ("dev_chrf", 2)):
        if valid.get(key) is not None:
            parts.append(f"{key[4:]} {valid[key]:.{digits}f}")
        by_direction = valid.get(f"{key}_by_direction")
        if by_direction:  # a multilingual model's mean, then each direction
            parts[-1] += " (" + ", ".join(f"{d} {v:.2f}" for d, v in by_direction.items()) + ")"
    if best is not None:
        parts.append(f"best {metric} {best.score:.3f} @ {best.step}")
    parts.append(_memory(memory or {}))
    return " | ".join(part for part in parts if part)
