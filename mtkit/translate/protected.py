"""`mtkit translate` on structured files and with placeholders kept: a gettext catalog or an HTML page
read whole, translated (mtkit.formats) and written whole; plain lines with `--placeholders`; and the
options that cannot go with either, refused in one line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mtkit.decode.formats_adapter import search_functions
from mtkit.decode.translation import one_line
from mtkit.decode.translator import LoadOptions, SearchOptions, Translator
from mtkit.errors import ConfigError
from mtkit.formats.documents import Format
from mtkit.placeholders.strings import placed_by_guess, translate_strings
from mtkit.textio import read_bytes, warn, write_bytes
from mtkit.translate.options import OutputOptions
from mtkit.translate.progress import GrowingBar


def check_protected(doc: str, search: SearchOptions, out: OutputOptions, ranks: bool) -> None:
    """Documents and --placeholders write translated text alone: refuse what would not fit there."""
    what = f"--format {doc}" if doc != "text" else "--encoding" if out.encoding else "--placeholders"
    for flag, on in (("--nbest", search.nbest > 1), ("--json", out.json), ("--json-input", out.json_input),
                     ("--alignment", out.alignment), ("--scores", out.scores), ("--flag-file", out.flag_file),
                     ("--attention-plot", out.attention_plot), ("--sample", search.sample),
                     *((("--resume", out.resume), ("--shard", out.shard), ("torchrun", ranks))
                       if doc != "text" or out.encoding else ())):
        if on:
            raise ConfigError(f"{flag} does not combine with {what}: it writes the translated text alone")
    if doc != "text" and out.placeholders is False:
        raise ConfigError(f"--no-placeholders does not combine with {what}: a catalog or page is never "
                          "written with a broken placeholder or tag")


def protected_lines(translator: Translator, chunk: list[tuple[int, str]], name: str) -> list[str]:
    """--placeholders on plain text: each line's translation, or the line itself where a placeholder
    would break (reported)."""
    outcomes = translate_strings([line for _, line in chunk], *search_functions(translator, name))
    for (i, _), outcome in zip(chunk, outcomes, strict=True):
        if outcome.text is None:
            warn(f"{name}:{i + 1}: left untranslated: {outcome.problem}")
        elif placed_by_guess(outcome):
            warn(f"{name}:{i + 1}: placeholders put by guessed position: review it")
    return [one_line(o.text if o.text is not None else line)
            for o, (_, line) in zip(outcomes, chunk, strict=True)]


def translate_document_file(model: str | Path, input: str, output: str | None, doc: Format,
                            load: LoadOptions, search: SearchOptions, out: OutputOptions) -> int:
    """A catalog or page read whole, translated, written whole (mtkit.formats.documents)."""
    name = "<stdin>" if input == "-" else input
    data = read_bytes(input)
    translator = Translator(model, load, search)
    show = out.progress if out.progress is not None else output is not None and sys.stderr.isatty()
    bar = GrowingBar("strings") if show else None
    try:
        result = translator.translate_bytes(data, name, doc, retranslate=out.retranslate, fuzzy=out.fuzzy,
                                            encoding=out.encoding, progress=bar)
    finally:
        if bar is not None:
            bar.stop()
    write_bytes(output, result.data)
    for line in result.left:
        warn(line)
    print(result.summary, file=sys.stderr)
    return 1
