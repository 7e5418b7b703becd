"""The `mtkit translate` stage: read a file or stdin, drive a `Translator`, write text, n-best lists
or JSON lines (and attention heatmaps), with a progress bar on a terminal.

Everything that can be checked is checked before the output is touched: the options, the model, and
that the output is not the input. A file output is written to a temporary file and renamed at the end
(`mtkit.textio.output_file`), so a failure never leaves an existing file empty or half-written.
stdout streams: each translation is written as soon as it is made.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtkit.errors import ConfigError, DataError
from mtkit.textio import count_lines, output_file, read_lines, same_file, warn
from mtkit.translation import Translation, format_translation
from mtkit.translator import LoadOptions, SearchOptions, Translator


@dataclass
class OutputOptions:
    """What `mtkit translate` writes besides the translations' text."""

    json: bool = False  # JSON lines: text, score, tokens, alignment
    alignment: bool = False  # TAB + Pharaoh subword alignment after each translation
    attention_plot: str | None = None  # directory for attention heatmaps (PNG)
    attention_plot_max: int = 0  # plot only the first K sentences (0 = all)
    attention_head: str = "avg"  # a head number or avg
    progress: bool | None = None  # None: a bar when a file is translated on a terminal

    def head(self) -> int | str:
        if self.attention_head == "avg":
            return "avg"
        try:
            return int(self.attention_head)
        except ValueError:
            raise ConfigError(f"--attention-head {self.attention_head!r}: expected a head number or "
                              "'avg'") from None


def read_input(path: str) -> Iterator[str]:
    """Lines of a file or '-' (stdin); invalid UTF-8 is replaced (U+FFFD) with a warning naming the
    line, so one bad byte never stops a long translation job."""
    name = "<stdin>" if path == "-" else path

    def report(lineno: int) -> None:
        warn(f"{name}:{lineno}: invalid UTF-8 replaced by U+FFFD")

    if path != "-":
        if not Path(path).exists():
            raise DataError(f"input file not found: {path}")
        if Path(path).is_dir():
            raise DataError(f"input {path} is a directory, not a file")
    return read_lines(path, strict=False, on_invalid=report)


def run_translate(model: str | Path, input: str = "-", output: str | None = None,
                  load: LoadOptions | None = None, search: SearchOptions | None = None,
                  out: OutputOptions | None = None) -> int:
    """Translate ``input`` ('-' = stdin) into ``output`` (None or '-' = stdout); returns the number of
    lines translated."""
    load, search, out = load or LoadOptions(), search or SearchOptions(), out or OutputOptions()
    if output not in (None, "-") and same_file(input, output):
        raise DataError(f"--output {output} is the input file: translating would destroy it; "
                        "write to another file")
    head = out.head()
    if out.attention_plot_max < 0:
        raise ConfigError("--attention-plot-max must be 0 (all) or more")
    lines = read_input(input)
    translator = Translator(model, load, search)
    if isinstance(head, int):
        heads = translator.model.num_attention_heads
        if not -heads <= head < heads:
            raise ConfigError(f"--attention-head {head}: the model has {heads} heads (0..{heads - 1})")
    fmt = "json" if out.json else ("nbest" if search.nbest > 1 else "text")
    need_attention = out.alignment or out.json or out.attention_plot is not None
    interactive = input == "-" and sys.stdin.isatty()
    name = "<stdin>" if input == "-" else input
    stream = translator.translate_stream(lines, chunk_size=1 if interactive else 1000,
                                         need_attention=need_attention, name=name)
    progress = out.progress
    if progress is None:
        progress = input != "-" and not sys.stdout.isatty() and sys.stderr.isatty()
    plot_dir = Path(out.attention_plot) if out.attention_plot is not None else None
    count = 0
    bar, task = _progress_bar(count_lines(input)) if progress else (None, None)
    try:
        with output_file(output) as sink:
            for tr in stream:
                sink.write("".join(line + "\n" for line in format_translation(tr, fmt, search.nbest,
                                                                               out.alignment)))
                plot_this = out.attention_plot_max == 0 or tr.index < out.attention_plot_max
                if plot_dir is not None and plot_this:
                    _plot(tr, plot_dir, head, search.attention_layer)
                count += 1
                if bar is not None:
                    bar.advance(task)
    finally:
        if bar is not None:
            bar.stop()
    return count


def _progress_bar(total: int) -> tuple[Any, Any]:
    """A rich progress bar on stderr (file input only: a stream has no known length)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("translating"), BarColumn(), MofNCompleteColumn(), TextColumn("lines"),
                   TimeRemainingColumn(), console=Console(stderr=True))
    task = bar.add_task("translating", total=total)
    bar.start()
    return bar, task


def _plot(tr: Translation, plot_dir: Path, head: int | str, layer: int) -> None:
    from mtkit.plots import head_label, plot_attention

    if not tr.hypotheses or tr.hypotheses[0].attention is None:
        return
    best = tr.hypotheses[0]
    label = head_label(head, layer, best.attention.size(0))
    plot_attention(best.attention, tr.source_tokens, best.tokens, plot_dir / f"attention-{tr.index:06d}.png",
                   title=f"sentence {tr.index} ({label})", head=head)


__all__ = ["OutputOptions", "read_input", "run_translate"]
