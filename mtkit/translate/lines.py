"""The `mtkit translate` stage: read a file or stdin, drive a `Translator`, write text, n-best lists
or JSON lines (and attention heatmaps); split a job into shards (`--shard K/N`, torchrun ranks),
merge shard outputs back into input order, and continue a killed run (`--resume`).

A file output is written one of two ways, because they promise different things:
- by default to a temporary file renamed at the end (`mtkit.textio.output_file`): a failure or a
  kill never leaves an existing OUT empty or half-written; a killed run writes nothing;
- with --resume to OUT itself, appended and flushed chunk by chunk in input order: a kill loses at
  most the chunk in flight and leaves a valid prefix, which the next --resume run checks and extends.
stdout streams: each chunk is written as soon as it is translated. stdin streams too: a chunk is
every line that has arrived when the next read would block (`mtkit.decode.streaming`), so a program that
writes a line into the pipe gets its answer at once, while a file piped in still gets full chunks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

from mtkit.decode.pivot import NO_ATTENTION, NO_NBEST, PivotTranslator, open_translator
from mtkit.decode.review import ReviewList, check_review_options
from mtkit.decode.streaming import stdin_chunks
from mtkit.decode.translation import OutputFormat, format_translation
from mtkit.decode.translator import LoadOptions, SearchOptions, Translator
from mtkit.device import dist_info_from_env
from mtkit.errors import ConfigError, DataError, MtkitError
from mtkit.formats.documents import document_format
from mtkit.textio import chunked, count_lines, output_file, parse_shard, read_lines, same_file, warn
from mtkit.translate.options import OutputOptions
from mtkit.translate.progress import progress_bar
from mtkit.translate.protected import check_protected, protected_lines, translate_document_file
from mtkit.translate.shards import SIDECAR, merge_shard_outputs


def _invalid_reporter(path: str) -> Callable[[int], None]:
    name = "<stdin>" if path == "-" else path

    def report(lineno: int) -> None:
        warn(f"{name}:{lineno}: invalid UTF-8 replaced by U+FFFD")

    return report


def read_input(path: str) -> Iterator[str]:
    """Lines of a file or '-' (stdin); invalid UTF-8 is replaced (U+FFFD) with a warning naming the
    line, so one bad byte never stops a long translation job."""
    report = _invalid_reporter(path)
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
    lines translated (by this process). Under torchrun (WORLD_SIZE > 1) every rank translates shard
    RANK/WORLD_SIZE and rank 0 merges the shards into ``output``."""
    load, search, out = load or LoadOptions(), search or SearchOptions(), out or OutputOptions()
    output = None if output == "-" else output
    if output is not None and same_file(input, output):
        raise DataError(f"--output {output} is the input file: translating would destroy it; "
                        "write to another file")
    out.head()
    if out.attention_plot_max < 0:
        raise ConfigError("--attention-plot-max must be 0 (all) or more")
    job = dist_info_from_env()
    check_review_options(out.flag_file, out.min_confidence, out.resume, out.shard is not None or job.enabled)
    doc = document_format(input, out.format)
    if out.pivot or out.pivot_model is not None:
        _check_pivot(doc, search, out)
    if doc != "text" or out.placeholders or out.encoding:
        check_protected(doc, search, out, job.enabled)
    if doc != "text" or out.encoding:  # a text file in a charset of its own: one document, bytes in and out
        return translate_document_file(model, input, output, doc, load, search, out)
    if job.enabled:
        return _run_ranks(model, input, output, load, search, out, job.rank, job.world_size,
                          job.local_rank, job.local_world_size)
    return _translate(model, input, output, load, search, out)


def _check_pivot(doc: str, search: SearchOptions, out: OutputOptions) -> None:
    """What a pivot (mtkit.decode.pivot) cannot do, refused in one line before any model loads."""
    if doc != "text" or out.placeholders:
        raise ConfigError("--pivot translates plain text lines; catalogs, pages and --placeholders are "
                          "not translated through a pivot")
    if search.nbest > 1:
        raise ConfigError(NO_NBEST)
    if out.alignment or out.attention_plot is not None:
        raise ConfigError(NO_ATTENTION)


def _translate(model: str | Path, input: str, output: str | None, load: LoadOptions,
               search: SearchOptions, out: OutputOptions) -> int:
    """One process's job: all input lines, or those of one shard, from the resume point on."""
    shard = parse_shard(out.shard)
    for flag, wanted in (("--resume", out.resume), ("--shard", shard is not None)):
        if wanted and output is None:
            raise ConfigError(f"{flag} needs a file output (-o FILE), not stdout")
        if wanted and input == "-":
            raise ConfigError(f"{flag} needs a file input (-i FILE), not stdin: lines are found by position")
    if out.resume and str(output).endswith(".gz"):
        raise ConfigError(f"--resume cannot append to a compressed output ({output}): write plain text")
    fmt: OutputFormat = "json" if out.json else ("nbest" if search.nbest > 1 else "text")
    per_input = search.nbest if fmt == "nbest" else 1
    lines = read_input(input) if input != "-" else None  # stdin is read as a stream: stdin_chunks
    progress = out.progress
    if progress is None:
        progress = input != "-" and not sys.stdout.isatty() and sys.stderr.isatty()
    total = count_lines(input) if input != "-" and (shard or out.resume or progress) else None
    k, n = shard or (0, 1)
    todo = range(k, total, n) if total is not None else None
    done = keep = 0
    if out.resume:
        assert output is not None and todo is not None
        done, keep = _resume_point(output, todo, per_input, fmt, _what(input, shard))
    sidecar = Path(f"{output}{SIDECAR}") if shard else None
    if sidecar is not None:
        sidecar.unlink(missing_ok=True)  # present only while the shard output is complete
    count = 0
    sink = _append(str(output), keep) if out.resume else output_file(output)
    if todo is not None and done == len(todo) and (out.resume or shard):
        with sink:
            pass  # nothing left: an empty shard, or a complete OUT (a torn line after it is dropped)
    else:
        first = todo[done] if todo is not None else 0
        pairs = ((i, line) for i, line in enumerate(lines or ()) if i >= first and i % n == k)
        chunks = ((lambda size: stdin_chunks(size, _invalid_reporter("-"))) if lines is None
                  else (lambda size: chunked(pairs, size)))
        count = _run_chunks(model, load, search, out, fmt, chunks, sink, shard,
                            "<stdin>" if input == "-" else input,
                            len(todo) - done if progress and todo is not None else None)
    if sidecar is not None:
        record = {"shard": k, "of": n, "input": str(Path(input).resolve()), "input_lines": total,
                  "lines_per_input": per_input, "format": fmt}
        with output_file(sidecar) as f:
            f.write(json.dumps(record) + "\n")
    return count


def _run_chunks(model: str | Path, load: LoadOptions, search: SearchOptions, out: OutputOptions,
                fmt: OutputFormat, chunks: Callable[[int], Iterator[list[tuple[int, str]]]], sink: Any,
                shard: tuple[int, int] | None, name: str, bar_total: int | None) -> int:
    """Translate chunks of (input index, line) pairs, made by ``chunks(most lines)`` once the model is
    loaded; write and flush each chunk in order."""
    head = out.head()
    translator = open_translator(model, load, search, out.pivot, out.pivot_model)
    pivoted = isinstance(translator, PivotTranslator)  # refused with what it cannot do: _check_pivot
    if isinstance(head, int) and isinstance(translator, Translator):
        heads = translator.backend.num_attention_heads
        if not -heads <= head < heads:
            raise ConfigError(f"--attention-head {head}: the model has {heads} heads (0..{heads - 1})")
    m = (translator.second if pivoted else translator).config.model  # the last leg writes the text
    if out.attention_plot is not None and m.arch == "rnn" and m.attention == "none":
        raise ConfigError("--attention-plot: this RNN has no attention (model.attention: none), so "
                          "there is nothing to plot")
    need_attention = not pivoted and (out.alignment or out.json or out.attention_plot is not None)
    # a chunk holds at most the lines one batch could hold were each one subword long: at least a full
    # batch to sort by length, and the unit --resume can lose (translator.chunk_lines caps it)
    chunk_size = max(1, min(translator.chunk_lines,
                            translator.max_tokens // max(1, translator.rows_per_sentence)))
    plot_dir = Path(out.attention_plot) if out.attention_plot is not None else None
    count = 0
    review = ReviewList(out.flag_file, out.min_confidence or 0.0)  # without a flag file: does nothing
    bar, task = progress_bar(bar_total) if bar_total is not None else (None, None)
    if shard:
        name = f"{name} [shard {shard[0]}/{shard[1]}]"  # warnings then count the shard's lines
    try:
        with sink as f:
            for chunk in chunks(chunk_size):
                index = chunk[0][0]
                start = (index - shard[0]) // shard[1] if shard else index
                lines, constraints = ([line for _, line in chunk], None) if not out.json_input else \
                    _json_lines(chunk, name)
                if out.placeholders and isinstance(translator, Translator):  # text alone (check_protected)
                    text = protected_lines(translator, chunk, name)
                    f.write("".join(line + "\n" for line in text))
                    count += len(chunk)
                    if bar is not None:
                        bar.advance(task, len(chunk))
                    continue
                translations = translator.translate_chunk(lines, start, need_attention, name, constraints)
                text = []
                for tr, (i, _) in zip(translations, chunk, strict=True):
                    tr.index = i  # the input line, also in a shard
                    text.extend(format_translation(tr, fmt, search.nbest, out.alignment, out.scores))
                    review.add(tr)
                    if plot_dir is not None and (out.attention_plot_max == 0 or i < out.attention_plot_max):
                        from mtkit.plots import plot_translation  # matplotlib only when plots are asked for

                        plot_translation(tr, plot_dir, head, search.attention_layer)
                f.write("".join(line + "\n" for line in text))
                f.flush()
                count += len(chunk)
                if bar is not None:
                    bar.advance(task, len(chunk))
        review.write()
    finally:
        if bar is not None:
            bar.stop()
    return count


def _json_lines(chunk: list[tuple[int, str]], name: str) -> tuple[list[str], list[list[str]]]:
    """--json-input: each line {"text": "...", "constraints": ["target string", ...]} (constraints
    optional); anything else is one error naming the line."""
    texts, constraints = [], []
    for i, raw in chunk:
        try:
            item = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DataError(f"{name}:{i + 1}: not JSON ({exc.msg})") from None
        wanted = item.get("constraints", []) if isinstance(item, dict) else None
        ok = isinstance(wanted, list) and all(isinstance(c, str) for c in wanted)
        if not ok or not isinstance(item.get("text"), str):
            raise DataError(f'{name}:{i + 1}: expected {{"text": "...", "constraints": ["...", ...]}}')
        texts.append(item["text"])
        constraints.append(wanted)
    return texts, constraints


def _what(input: str, shard: tuple[int, int] | None) -> str:
    return f"shard {shard[0]}/{shard[1]} of {input}" if shard else input


def _resume_point(output: str, todo: range, per_input: int, fmt: OutputFormat, what: str) -> tuple[int, int]:
    """(input lines already translated, bytes of OUT to keep) for a partial OUT, checked to be a
    prefix of this job's output: whole lines of whole n-best groups; not more than ``todo``; in
    n-best and JSON output the last one names the input line it should. Changes nothing."""
    path = Path(output)
    if not path.exists():
        return 0, 0
    if path.is_dir():
        raise DataError(f"cannot write {output}: it is a directory")
    lines = offset = keep = 0
    unit_first = last_first = b""
    try:
        with open(path, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break  # torn by a kill: redone
                if lines % per_input == 0:
                    unit_first = raw
                lines, offset = lines + 1, offset + len(raw)
                if lines % per_input == 0:
                    keep, last_first = offset, unit_first
    except OSError as exc:
        raise DataError(f"--resume: cannot read {output}: {exc.strerror or exc}") from None
    done = lines // per_input
    if lines > len(todo) * per_input:
        per = f", {per_input} lines each" if per_input > 1 else ""
        raise DataError(f"--resume: {output} has {lines} lines, more than the translations of {what} "
                        f"({len(todo)}{per}): it is not a partial output of this input (nothing changed)")
    if done and fmt != "text":
        try:
            got = json.loads(last_first)["index"] if fmt == "json" else int(last_first.split(b"\t", 1)[0])
        except (ValueError, KeyError, TypeError):
            got = None
        if got != todo[done - 1]:
            raise DataError(f"--resume: {output}:{(done - 1) * per_input + 1} is not the {fmt} "
                            f"translation of input line {todo[done - 1] + 1} of {what}: not a partial "
                            "output of this job (nothing changed)")
    return done, keep


@contextlib.contextmanager
def _append(output: str, keep: int) -> Iterator[IO[str]]:
    """OUT cut to its checked prefix (``keep`` bytes) and opened for appending."""
    path = Path(output)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            os.truncate(path, keep)
        f = open(path, "a", encoding="utf-8")  # noqa: SIM115
    except OSError as exc:
        raise DataError(f"cannot write {output}: {exc.strerror or exc}") from None
    with f:
        yield f


# --------------------------------------------------------------------------------------------- shards
# ------------------------------------------------------------------------------------------- torchrun
def _part(output: str | None, input: str, rank: int, world: int) -> Path:
    """Rank ``rank``'s shard file beside OUT (in the working directory for stdout): a fixed name, so
    a rerun with --resume finds it; plain text even for a .gz OUT."""
    base = Path(output) if output is not None else Path(f"mtkit-translate-{Path(input).name}")
    return base.with_name(f".{base.name}.rank{rank}of{world}.part")


def _run_ranks(model: str | Path, input: str, output: str | None, load: LoadOptions, search: SearchOptions,
               out: OutputOptions, rank: int, world: int, local_rank: int, local_world: int) -> int:
    """torchrun: rank R translates shard R/WORLD into its part file on cuda:LOCAL_RANK (when the
    device resolves to a GPU), all ranks meet at a gloo barrier, then rank 0 merges the parts."""
    from mtkit.device import resolve_device, thread_count

    if out.shard is not None:
        raise ConfigError("--shard cannot be used under torchrun: rank R translates shard R/WORLD_SIZE")
    if input == "-":
        raise ConfigError("under torchrun the input must be a file (-i FILE): every rank reads it")
    device = resolve_device(load.device, local_rank)
    threads = load.threads or (thread_count(0, local_world) if device.type == "cpu" else 0)
    load = dataclasses.replace(load, device=str(device), threads=threads)
    mine = dataclasses.replace(out, shard=f"{rank}/{world}", progress=out.progress if rank == 0 else False)
    count = _translate(model, input, str(_part(output, input, rank, world)), load, search, mine)
    _barrier(rank, world)
    if rank == 0:
        parts = [str(_part(output, input, r, world)) for r in range(world)]
        merge_shard_outputs(parts, output)
        for part in parts:
            Path(part).unlink(missing_ok=True)
            Path(f"{part}{SIDECAR}").unlink(missing_ok=True)
    return count


def _barrier(rank: int, world: int) -> None:
    """Wait until every rank has written its part (gloo, just for this barrier). The timeout is
    long: after a --resume one rank may have nothing left while another has hours of work."""
    import torch.distributed as dist

    try:
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=timedelta(days=7))
        dist.barrier()
    except (RuntimeError, ValueError) as exc:
        raise MtkitError(f"torchrun: rank {rank} cannot meet the other ranks: {exc}") from None
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


__all__ = ["SIDECAR", "OutputOptions", "merge_shard_outputs", "parse_shard", "read_input", "run_translate"]
