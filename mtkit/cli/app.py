"""The `mtkit` command line: parse options, call one stage function, print errors as one line.

Stage modules are imported inside the commands so `mtkit --help` stays fast."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import typer

from mtkit import __version__
from mtkit.cli.bpe import bpe_app
from mtkit.cli.clean import clean_command
from mtkit.cli.interop import export_command, import_hf_command
from mtkit.cli.serve import serve_command
from mtkit.cli.translate import translate_command
from mtkit.device import bound_kernel_caches, short_openmp_spin
from mtkit.errors import MtkitError, OutputClosed

app = typer.Typer(
    help="mtkit: neural machine translation from the command line "
    "(BPE → prepare → train → translate → score).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(bpe_app, name="bpe")  # `mtkit bpe train|encode|decode`: mtkit/cli/bpe.py

_DEBUG = {"on": False}

SET_HELP = "Override a config key, e.g. --set training.lr=0.001 (repeatable)."


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mtkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version."),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
) -> None:
    _DEBUG["on"] = debug


app.command("clean")(clean_command)  # `mtkit clean`: options in mtkit/cli/clean.py


# ------------------------------------------------------------------------------------------- prepare
@app.command()
def prepare(
    config: Path = typer.Argument(..., help="Experiment YAML."),
    set: list[str] = typer.Option([], "--set", help=SET_HELP),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the outputs are up to date."),
) -> None:
    """Validate, filter and binarize parallel data (trains BPE if needed)."""
    from mtkit.config.experiment import load_config
    from mtkit.data.prepare import prepare as run_prepare

    run_prepare(load_config(config, set), force=force)


# --------------------------------------------------------------------------------------------- train
@app.command()
def train(
    config: Path = typer.Argument(..., help="Experiment YAML."),
    set: list[str] = typer.Option([], "--set", help=SET_HELP),
    resume: bool | None = typer.Option(
        None, "--resume/--no-resume",
        help="Continue from the model dir's last checkpoint (default: resume when one exists).",
    ),
    device: str | None = typer.Option(None, help="auto, cpu, cuda, cuda:N, mps."),
    max_steps: int | None = typer.Option(None, help="Stop after N updates."),
    max_epochs: int | None = typer.Option(None, help="Stop after N epochs."),
    max_time: float | None = typer.Option(None, help="Stop after N minutes."),
    init_from: str | None = typer.Option(
        None, "--init-from",
        help="Start from a trained model's weights (a model directory or checkpoint): fine-tuning.",
    ),
    keep: str | None = typer.Option(
        None, "--keep", help="With --init-from, also carry over: any of optimizer,schedule,step."
    ),
) -> None:
    """Train a model (RNN or Transformer) on prepared data."""
    from mtkit.config.experiment import load_config
    from mtkit.train.trainer import train as run_train

    overrides = list(set)
    for key, value in (("device", device), ("max_steps", max_steps), ("max_epochs", max_epochs),
                       ("max_time", max_time), ("init_from", init_from)):
        if value is not None:
            overrides.append(f"training.{key}={value}")
    if keep is not None:
        overrides.append(f"training.init_keep=[{keep}]")
    run_train(load_config(config, overrides), resume=resume)


app.command("translate")(translate_command)  # `mtkit translate`: options in mtkit/cli/translate.py


@app.command("merge-shards")
def merge_shards(
    inputs: list[str] = typer.Argument(..., help="Shard outputs of `translate --shard K/N`, any order."),
    output: str | None = typer.Option(None, "--output", "-o", help="Output file (default stdout)."),
) -> None:
    """Restore input order from the outputs of `mtkit translate --shard K/N`, checking the counts."""
    from mtkit.translate import merge_shard_outputs

    merge_shard_outputs(inputs, output)


app.command("serve")(serve_command)  # `mtkit serve`: its many options live in mtkit/cli/serve.py


# ------------------------------------------------------------------------------------------- distill
@app.command()
def distill(
    source: Path = typer.Option(..., "--source", help="The source lines the teacher translated."),
    translations: Path = typer.Option(..., "--translations",
        help="The teacher's output of `mtkit translate --scores` (text TAB confidence TAB log-prob)."),
    out_source: Path = typer.Option(..., "--out-source", help="Source side of the student's corpus."),
    out_target: Path = typer.Option(..., "--out-target", help="Target side: the kept translations."),
    original_target: Path | None = typer.Option(None, "--original-target",
        help="The human translations of --source (with --mix-original: added after the distilled pairs)."),
    mix_original: bool = typer.Option(False, "--mix-original", help="Add the original pairs too."),
    min_confidence: float = typer.Option(0.0, "--min-confidence",
        help="Drop translations whose teacher confidence (0-1) is lower."),
    max_length_ratio: float = typer.Option(3.0, "--max-length-ratio",
        help="Drop pairs whose lengths in characters differ by more than this factor."),
    copy_min_chars: int = typer.Option(20, "--copy-min-chars",
        help="Drop untranslated copies of sources at least this long (shorter copies stay)."),
    report: Path | None = typer.Option(None, "--report", help="Write the counts (JSON) here too."),
) -> None:
    """Turn a teacher's translations of the training source into a student's corpus (docs/distill.md)."""
    from mtkit.train.distill import DistillOptions, run_distill

    opts = DistillOptions(min_confidence, max_length_ratio, copy_min_chars, mix_original)
    result = run_distill(source, translations, out_source, out_target, opts, original_target, report)
    typer.echo(result.summary(), err=True)


app.command("export")(export_command)  # `mtkit export` and `mtkit import-hf`: mtkit/cli/interop.py
app.command("import-hf")(import_hf_command)


# ------------------------------------------------------------------------------------------- average
@app.command()
def average(
    model_dir: Path = typer.Argument(..., help="Model directory."),
    last: int | None = typer.Option(None, "--last", min=1, help="Average the N most recent checkpoints."),
    best: int | None = typer.Option(None, "--best", min=1, help="Average the N best step checkpoints."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="Output checkpoint (default MODEL_DIR/checkpoint_avg.pt)."
    ),
) -> None:
    """Average the parameters of the last or best N checkpoints into one."""
    from mtkit.train.average import average_checkpoints

    path = average_checkpoints(model_dir, last=last, best=best, output=output)
    typer.echo(f"wrote {path}", err=True)


# ---------------------------------------------------------------------------------------------- plot
@app.command()
def plot(
    model_dir: Path = typer.Argument(..., help="Model directory (reads its metrics.jsonl)."),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="PNG file (default MODEL_DIR/curves.png)."
    ),
) -> None:
    """Plot learning curves (train/dev loss, dev BLEU and chrF over updates) as a PNG."""
    from mtkit.plots import plot_curves

    path = plot_curves(model_dir, output)
    typer.echo(f"wrote {path}", err=True)


# --------------------------------------------------------------------------------------------- score
@app.command()
def score(
    hyp: list[str] = typer.Option(..., "--hyp", help="System output (file or -); repeat to compare systems."),
    ref: list[str] = typer.Option(..., "--ref", help="Reference file; repeat for several references."),
    metrics: str = typer.Option("bleu,chrf", "--metrics", "-m", help="Comma-separated: bleu chrf ter wer."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
    tokenize: str | None = typer.Option(
        None, "--tokenize", help="BLEU tokenizer, as sacrebleu's: 13a (default), intl, zh, char, none..."
    ),
    bootstrap: int = typer.Option(
        1000, "--bootstrap", min=0, help="Paired bootstrap samples when comparing systems (0 = no test)."
    ),
) -> None:
    """Score translations: BLEU, chrF, TER (sacrebleu) and WER; paired bootstrap across systems."""
    from mtkit.score import score as run_score

    run_score(hyp, ref, metrics, json_out=json_out, tokenize=tokenize, bootstrap=bootstrap)


# -------------------------------------------------------------------------------------------- config
@app.command("config-keys")
def config_keys(
    markdown: bool = typer.Option(False, "--markdown", help="Markdown tables (what docs/config.md holds)."),
) -> None:
    """List every config key with its type, default and meaning."""
    if markdown:
        from mtkit.config.docs import render_markdown

        typer.echo(render_markdown(), nl=False)
        return
    from rich.console import Console
    from rich.table import Table

    from mtkit.config.docs import describe_keys

    table = Table("key", "type", "default", "applies to", "meaning")
    for row in describe_keys():
        table.add_row(*row)
    Console().print(table)


# -------------------------------------------------------------------------------------------- params
@app.command()
def params(
    config: Path = typer.Argument(..., help="Experiment YAML."),
    set: list[str] = typer.Option([], "--set", help=SET_HELP),
    src_vocab: int | None = typer.Option(
        None, "--src-vocab", min=4,
        help="Source vocabulary size (default: data.dir/meta.json, else bpe.vocab_size).",
    ),
    tgt_vocab: int | None = typer.Option(None, "--tgt-vocab", min=4,
                                         help="Target vocabulary size (default as for --src-vocab)."),
    joint: bool | None = typer.Option(None, "--joint/--no-joint",
                                      help="Joint vocabulary (default: data.dir/meta.json, else bpe.joint)."),
) -> None:
    """Print the parameter count of the model a config describes, per component and in total."""
    from rich.console import Console
    from rich.table import Table

    from mtkit.config.experiment import load_config
    from mtkit.data.meta import read_meta
    from mtkit.models.summary import build_on_meta, parameter_breakdown

    cfg = load_config(config, set)
    try:
        meta = read_meta(cfg.data.dir)
        prepared = (meta.joint, meta.src_vocab_size, meta.tgt_vocab_size)
    except MtkitError:  # not prepared yet: the sizes the config asks for
        prepared = (cfg.bpe.joint, cfg.bpe.vocab_size, cfg.bpe.vocab_size)
    joint = joint if joint is not None else prepared[0]
    src_vocab = src_vocab or prepared[1]
    tgt_vocab = tgt_vocab or prepared[2]
    if joint and src_vocab != tgt_vocab:
        raise MtkitError(f"--joint needs equal vocabularies, got --src-vocab {src_vocab} and "
                         f"--tgt-vocab {tgt_vocab}")
    try:
        model = build_on_meta(cfg.model, src_vocab, tgt_vocab, joint)
    except ValueError as exc:  # e.g. dot attention with mismatched sizes
        raise MtkitError(f"{config}: {exc}") from None
    table = Table("component", "parameters", "note",
                  title=f"{cfg.model.arch}: vocab {src_vocab}→{tgt_vocab}{' (joint)' if joint else ''}")
    for label, count, note in parameter_breakdown(model):
        table.add_row(label, f"{count:,}", note)
    total = model.num_parameters()
    table.add_row("total", f"{total:,}", f"{total / 1e6:.1f}M", style="bold")
    Console().print(table)


def main() -> None:
    bound_kernel_caches()  # before any command computes (or loads torch): the CLI owns its process
    short_openmp_spin(sys.argv[1:])
    try:
        app()
    except OutputClosed:
        _quiet_stdout()
        sys.exit(0)
    except MtkitError as exc:
        if _DEBUG["on"]:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:  # downstream closed the pipe (e.g. `| head`): a normal end
        _quiet_stdout()
        sys.exit(0)
    except OSError as exc:  # the environment refused a file operation (read-only directory, full disk …)
        if _DEBUG["on"]:
            traceback.print_exc()
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"error: {where}{exc.strerror or exc}", file=sys.stderr)
        sys.exit(5)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again on a closed pipe
    (and turn the exit status into 120)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    main()
