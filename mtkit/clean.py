"""`mtkit clean`: noisy parallel corpora (Moses pairs, TSV, TMX) in, the pairs fit to train on out.

    mtkit clean -i crawl.tmx.gz -i dict.tsv -i train.en -i train.de --src-lang en --tgt-lang de -o clean

writes ``clean.en`` and ``clean.de`` (a Moses pair, the kept pairs in input order) and
``clean.report.json`` (counts by corpus and by reason, a few dropped pairs of each reason). The filters
and their settings are the ``clean`` section of the experiment config (``--set clean.KEY=VALUE``;
docs/cleaning.md); `mtkit prepare` runs the same ones when ``clean.enabled`` is set.

``--shard K/N`` (K from 0, as `mtkit translate --shard` counts) keeps the pairs whose normalised
source hashes to piece K of N: N such runs (a Slurm
array, N machines) write pieces that together hold the pairs one run would keep, since every copy of a
sentence lands in the same piece.
"""

from __future__ import annotations

import contextlib
import re
import time
from pathlib import Path

from rich.console import Console

from mtkit.config.clean_section import CleanConfig
from mtkit.data.cleaning import CleanReport, Corpus, run_cleaner, write_report
from mtkit.data.readers import CorpusSpec, corpus_format
from mtkit.data.split_stats import progress_display
from mtkit.errors import ConfigError
from mtkit.textio import output_file, parse_shard, same_file

SCORE_CHUNK = 20_000  # pairs scored per call: sorted by length within, for dense batches
_ONE_FILE = re.compile(r"\.(tsv|tab|tmx)(\.gz)?\Z", re.IGNORECASE)


def group_inputs(inputs: list[str], src_lang: str, tgt_lang: str, src_column: str = "", tgt_column: str = "",
                 quoting: str = "csv") -> list[CorpusSpec]:
    """``-i`` arguments → corpora: a .tsv or .tmx file (optionally .gz) is one; other files go in pairs,
    the source first, unless their names end in the languages (train.de, train.en: source en)."""
    specs: list[CorpusSpec] = []
    waiting: list[str] = []
    for path in inputs:
        if _ONE_FILE.search(path):
            if waiting:
                raise ConfigError(f"-i {waiting[0]}: a Moses corpus is two files, the source and the target "
                                  f"(-i train.{src_lang} -i train.{tgt_lang}); the next input is {path}")
            specs.append(CorpusSpec((path,), src_lang, tgt_lang, src_column, tgt_column, quoting=quoting))
            continue
        waiting.append(path)
        if len(waiting) == 2:
            specs.append(CorpusSpec(_source_first(waiting, src_lang, tgt_lang), src_lang, tgt_lang))
            waiting = []
    if waiting:
        raise ConfigError(f"-i {waiting[0]}: a Moses corpus is two files, the source and the target "
                          f"(-i train.{src_lang} -i train.{tgt_lang}); a TSV or TMX file ends in .tsv, .tmx")
    for spec in specs:
        corpus_format(spec.paths)  # refuses what no reader reads, before anything is read
    return specs


def _source_first(pair: list[str], src_lang: str, tgt_lang: str) -> tuple[str, str]:
    def language(path: str) -> str:
        return re.sub(r"\.gz\Z", "", path).rsplit(".", 1)[-1]
    a, b = pair
    if language(a) == tgt_lang and language(b) == src_lang:
        return b, a
    return a, b


def output_paths(prefix: str, src_lang: str, tgt_lang: str) -> tuple[Path, Path, Path]:
    """PREFIX.src_lang, PREFIX.tgt_lang, PREFIX.report.json."""
    if src_lang == tgt_lang:
        raise ConfigError(f"--src-lang and --tgt-lang are both {src_lang!r}: the outputs would be one file")
    return Path(f"{prefix}.{src_lang}"), Path(f"{prefix}.{tgt_lang}"), Path(f"{prefix}.report.json")


def clean(inputs: list[str], src_lang: str, tgt_lang: str, prefix: str, settings: CleanConfig,
          src_column: str = "", tgt_column: str = "", quoting: str = "csv", shard: str = "",
          decisions: str = "", score_models: tuple[str, str] | None = None, device: str = "auto",
          console: Console | None = None) -> CleanReport:
    """The stage: clean ``inputs`` into PREFIX.src_lang / PREFIX.tgt_lang and PREFIX.report.json;
    with ``score_models`` (a src→tgt and a tgt→src model directory), the pairs the rules keep are
    then scored by dual conditional cross-entropy and the worst dropped (clean.score_min/score_keep)."""
    if score_models and settings.score_min > 0 and settings.score_keep < 1:
        raise ConfigError("clean.score_min and clean.score_keep both choose which scored pairs go: set one")
    console = console or Console(stderr=True, soft_wrap=True)
    piece = parse_shard(shard or None)
    specs = group_inputs(inputs, src_lang, tgt_lang, src_column, tgt_column, quoting)
    outputs = output_paths(prefix, src_lang, tgt_lang)
    if decisions:
        outputs = (*outputs, Path(decisions))
    for spec in specs:
        for path in spec.paths:
            if not Path(path).is_file():
                raise ConfigError(f"-i {path}: file not found")
            for out in outputs:
                if same_file(path, out):
                    raise ConfigError(f"{out} is an input (-i {path}): choose another output prefix")
    corpora = [Corpus(spec, settings) for spec in specs]
    with contextlib.ExitStack() as stack:  # the decisions, like the outputs, only whole
        decisions_file = stack.enter_context(output_file(decisions)) if decisions else None
        report = run_cleaner(corpora, settings.workers, outputs[0], outputs[1], console,
                             piece, decisions_file)
    if score_models:
        score_pairs(report, score_models, settings, outputs[0], outputs[1], device, console,
                    Path(decisions) if decisions else None)
    write_report(report, outputs[2])
    console.print(f"{prefix}: {report.summary()}; {report.seconds:.1f} s, "
                  f"{report.read / max(report.seconds, 1e-9):,.0f} pairs/s on {report.workers} worker(s)")
    console.print(f"wrote {outputs[0]}, {outputs[1]} and {outputs[2]}")
    return report


def score_pairs(report: CleanReport, models: tuple[str, str], settings: CleanConfig, src_path: Path,
                tgt_path: Path, device: str, console: Console, decisions: Path | None) -> None:
    """Score the kept pairs (``src_path`` / ``tgt_path``) with the two models and rewrite both files
    without those below the threshold (clean.score_min, or the one that keeps clean.score_keep of
    them); the report and the decisions file say "score" for each."""
    import numpy as np

    from mtkit.decode.forced import ForcedScorer, dual_conditional_cross_entropy

    started = time.perf_counter()
    forward, backward = (ForcedScorer(m, device) for m in models)
    sources = src_path.read_text(encoding="utf-8").split("\n")[:-1]
    targets = tgt_path.read_text(encoding="utf-8").split("\n")[:-1]
    scores: list[float] = []
    with progress_display(console) as progress:
        task = progress.add_task("score", total=len(sources))
        for at in range(0, len(sources), SCORE_CHUNK):
            chunk = slice(at, at + SCORE_CHUNK)
            scores += dual_conditional_cross_entropy(forward, backward, sources[chunk], targets[chunk])
            progress.advance(task, len(sources[chunk]))
    values = np.array(scores)
    if settings.score_min > 0:
        threshold = settings.score_min
    else:  # the score of the last pair kept when the best score_keep of them are kept
        threshold = float(np.quantile(values, 1 - settings.score_keep)) if len(values) else 0.0
    keep = values >= threshold
    with output_file(src_path) as fs, output_file(tgt_path) as ft:
        for src, tgt, kept in zip(sources, targets, keep.tolist(), strict=True):
            if kept:
                fs.write(src + "\n")
                ft.write(tgt + "\n")
    dropped = int((~keep).sum())
    report.dropped["score"] += dropped
    report.kept -= dropped
    report.written -= dropped
    report.scoring = {"models": list(models), "threshold": round(threshold, 6), "dropped": dropped,
                      "seconds": round(time.perf_counter() - started, 1),
                      "pairs_per_s": round(len(values) / max(time.perf_counter() - started, 1e-9), 1)}
    order = np.argsort(values)[: settings.examples]
    report.examples["score"] = [{"src": sources[i], "tgt": targets[i], "score": round(float(values[i]), 4)}
                                for i in order.tolist() if not keep[i]]
    if decisions is not None:  # the k-th "keep" of the decisions is the k-th pair scored
        verdicts = iter(keep.tolist())
        lines = decisions.read_text(encoding="utf-8").split("\n")[:-1]
        with output_file(decisions) as f:
            f.writelines(f"{'keep' if next(verdicts) else 'score'}\n" if line == "keep" else f"{line}\n"
                         for line in lines)


__all__ = ["clean", "group_inputs", "output_paths"]
