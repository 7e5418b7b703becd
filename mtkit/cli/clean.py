"""The options of `mtkit clean` (registered by `mtkit.cli.app`); the stage is `mtkit.clean`."""

from __future__ import annotations

from pathlib import Path

import typer


def clean_command(
    inputs: list[str] = typer.Option(..., "--input", "-i",
        help="A corpus: a .tsv or .tmx file (.gz too), or a Moses pair given as two -i (source first, or "
             "named by language: train.en train.de). Repeatable: several corpora are cleaned as one."),
    src_lang: str = typer.Option(..., "--src-lang", help="Source language code (en)."),
    tgt_lang: str = typer.Option(..., "--tgt-lang", help="Target language code (de)."),
    output: str = typer.Option(..., "--output", "-o",
        help="Output prefix: writes PREFIX.SRC_LANG, PREFIX.TGT_LANG and PREFIX.report.json."),
    config: Path | None = typer.Option(None, "--config", "-c",
        help="Experiment YAML whose clean section sets the filters (default: the defaults)."),
    set: list[str] = typer.Option([], "--set",
        help="Override a filter setting, e.g. --set clean.langid=false (repeatable; docs/cleaning.md)."),
    columns: str = typer.Option("", "--columns",
        help="TSV columns of source and target: numbers from 1 or header names, e.g. 3,4 or en,de "
             "(default 1,2)."),
    quoting: str = typer.Option("csv", "--quoting",
        help="TSV quoting: csv (a field in double quotes may hold tabs and newlines) or none."),
    shard: str = typer.Option("", "--shard",
        help="K/N (0 <= K < N, as mtkit translate counts): keep only piece K of N (by a hash of the "
             "normalised source), for cleaning in parallel jobs whose outputs are concatenated."),
    workers: int | None = typer.Option(None, "--workers",
        help="Processes for the filters (default: one per core)."),
    decisions: str = typer.Option("", "--decisions",
        help="Also write one line per input pair: keep, or the reason it was dropped."),
    score_models: list[str] = typer.Option([], "--score-models",
        help="Two model directories, source→target then target→source (give the option twice): score "
             "the pairs the rules keep by dual conditional cross-entropy and drop the worst "
             "(clean.score_keep, clean.score_min)."),
    device: str = typer.Option("auto", "--device", help="Device of the scoring models: auto, cpu, cuda …"),
) -> None:
    """Clean noisy parallel corpora: duplicates, copies, wrong language, misalignment, markup."""
    from mtkit.clean import clean
    from mtkit.config.experiment import load_config
    from mtkit.errors import ConfigError

    if quoting not in ("csv", "none"):
        raise ConfigError(f"--quoting {quoting!r}: expected csv or none")
    src_column = tgt_column = ""
    if columns:
        parts = [c.strip() for c in columns.split(",")]
        if len(parts) != 2 or not all(parts):
            raise ConfigError(f"--columns {columns!r}: expected two columns, e.g. 1,2 or en,de")
        src_column, tgt_column = parts
    overrides = [*set, *([f"clean.workers={workers}"] if workers is not None else [])]
    settings = load_config(config, overrides).clean
    if score_models and len(score_models) != 2:
        raise ConfigError("--score-models takes two model directories, source→target then target→source "
                          f"(got {len(score_models)})")
    clean(inputs, src_lang, tgt_lang, output, settings, src_column, tgt_column, quoting, shard, decisions,
          (score_models[0], score_models[1]) if score_models else None, device)
