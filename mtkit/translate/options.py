"""`OutputOptions`: how `mtkit translate` reads its input and what it writes, below the modules of the
stage that all read them."""

from __future__ import annotations

from dataclasses import dataclass

from mtkit.errors import ConfigError


@dataclass
class OutputOptions:
    """How `mtkit translate` reads its input, and what it writes besides the translations' text."""

    json: bool = False  # JSON lines: text, score, tokens, alignment
    json_input: bool = False  # input lines are JSON objects: {"text": ..., "constraints": [...]}
    alignment: bool = False  # TAB + Pharaoh subword alignment after each translation
    scores: bool = False  # TAB confidence TAB mean log-probability after each translation
    min_confidence: float | None = None  # with flag_file: list the lines below this confidence there
    flag_file: str | None = None
    attention_plot: str | None = None  # directory for attention heatmaps (PNG)
    attention_plot_max: int = 0  # plot only the first K sentences (0 = all)
    attention_head: str = "avg"  # a head number or avg
    progress: bool | None = None  # None: a bar when a file is translated on a terminal
    resume: bool = False  # continue a partial output file from the next input line
    shard: str | None = None  # "K/N": translate only shard K of N
    format: str = "auto"  # text, po or html (mtkit.formats); auto: by the input's extension
    placeholders: bool | None = None  # keep placeholders and tags (formats.placeholders); None: for po/html
    retranslate: bool = False  # po: translate the entries that have a translation too
    fuzzy: bool = True  # po: flag machine translations fuzzy
    encoding: str = ""  # text and SubRip files: their charset (they do not say it); text is then one document
    pivot: str = ""  # translate into this language first, then from it into the target (decode.pivot)
    pivot_model: str | None = None  # the second leg's model (pivot → target); None: the model itself

    def head(self) -> int | str:
        if self.attention_head == "avg":
            return "avg"
        try:
            return int(self.attention_head)
        except ValueError:
            raise ConfigError(f"--attention-head {self.attention_head!r}: expected a head number or "
                              "'avg'") from None
