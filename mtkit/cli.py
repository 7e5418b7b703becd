"""The `mtkit` command line: parse options, call one stage function, print errors as one line.

Stage modules are imported inside the commands so `mtkit --help` stays fast.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Optional

import typer

from mtkit import __version__
from mtkit.errors import MtkitError

app = typer.Typer(
    help="mtkit: neural machine translation from the command line (BPE → prepare → train → translate → score).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
bpe_app = typer.Typer(help="Sentencepiece BPE: train a model, encode or decode text.", no_args_is_help=True)
app.add_typer(bpe_app, name="bpe")

_DEBUG = {"on": False}

SET_HELP = "Override a config key, e.g. --set training.lr=0.001 (repeatable)."


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mtkit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
) -> None:
    _DEBUG["on"] = debug


# ----------------------------------------------------------------------------------------------- bpe
@bpe_app.command("train")
def bpe_train(
    input: list[str] = typer.Option(..., "--input", "-i", help="Training text (plain or .gz); repeat for a joint model."),
    vocab_size: int = typer.Option(8000, "--vocab-size", help="Vocabulary size."),
    model_prefix: str = typer.Option(..., "--model-prefix", help="Writes PREFIX.model and PREFIX.vocab."),
    character_coverage: float = typer.Option(1.0, help="Share of characters covered (0.9995 for CJK)."),
    input_sentence_size: int = typer.Option(1_000_000, help="Sample at most this many sentences (0 = all)."),
    seed: int = typer.Option(1, help="Sampling seed."),
) -> None:
    """Train a BPE model (joint over several inputs). Ids: pad=0 unk=1 bos=2 eos=3."""
    from mtkit.bpe import train_bpe

    path = train_bpe(input, model_prefix, vocab_size, character_coverage, input_sentence_size, seed)
    typer.echo(f"wrote {path}", err=True)


def _filter(model: str, input: str, output: Optional[str], fmt: str, encode: bool) -> None:
    from mtkit.bpe import Bpe, decode_stream, encode_stream
    from mtkit.textio import open_output, read_lines

    bpe = Bpe(model)
    lines = read_lines(input, strict=True)
    chunk = 1 if input == "-" and sys.stdin.isatty() else 1000
    stream = (encode_stream(bpe, lines, fmt, chunk) if encode
              else decode_stream(bpe, lines, fmt, "<stdin>" if input == "-" else input, chunk))
    out = open_output(output)
    try:
        for line in stream:
            out.write(line + "\n")
    finally:
        out.flush()
        if output not in (None, "-"):
            out.close()


@bpe_app.command("encode")
def bpe_encode(
    model: str = typer.Option(..., "--model", "-m", help="PREFIX.model"),
    input: str = typer.Option("-", "--input", "-i", help="Input file (default stdin)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Output file (default stdout)."),
    fmt: str = typer.Option("pieces", "--format", help="pieces or ids."),
) -> None:
    """Segment text into subwords, one output line per input line."""
    _filter(model, input, output, fmt, encode=True)


@bpe_app.command("decode")
def bpe_decode(
    model: str = typer.Option(..., "--model", "-m", help="PREFIX.model"),
    input: str = typer.Option("-", "--input", "-i", help="Input file (default stdin)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", help="Output file (default stdout)."),
    fmt: str = typer.Option("pieces", "--format", help="pieces or ids."),
) -> None:
    """Join subwords back into text, one output line per input line."""
    _filter(model, input, output, fmt, encode=False)


# ------------------------------------------------------------------------------------------- prepare
@app.command()
def prepare(
    config: Path = typer.Argument(..., help="Experiment YAML."),
    set: list[str] = typer.Option([], "--set", help=SET_HELP),
    force: bool = typer.Option(False, "--force", help="Rebuild even if the outputs are up to date."),
) -> None:
    """Validate, filter and binarize parallel data (trains BPE if needed)."""
    from mtkit.config import load_config
    from mtkit.data.prepare import prepare as run_prepare

    run_prepare(load_config(config, set), force=force)


# --------------------------------------------------------------------------------------------- train
@app.command()
def train(
    config: Path = typer.Argument(..., help="Experiment YAML."),
    set: list[str] = typer.Option([], "--set", help=SET_HELP),
    resume: Optional[bool] = typer.Option(
        None, "--resume/--no-resume",
        help="Continue from the model dir's last checkpoint (default: resume when one exists).",
    ),
    device: Optional[str] = typer.Option(None, help="auto, cpu, cuda, cuda:N, mps."),
    max_steps: Optional[int] = typer.Option(None, help="Stop after N updates."),
    max_epochs: Optional[int] = typer.Option(None, help="Stop after N epochs."),
    max_time: Optional[float] = typer.Option(None, help="Stop after N minutes."),
) -> None:
    """Train a model (RNN or Transformer) on prepared data."""
    from mtkit.config import load_config
    from mtkit.train.trainer import train as run_train

    overrides = list(set)
    for key, value in (("device", device), ("max_steps", max_steps), ("max_epochs", max_epochs),
                       ("max_time", max_time)):
        if value is not None:
            overrides.append(f"training.{key}={value}")
    run_train(load_config(config, overrides), resume=resume)


# ----------------------------------------------------------------------------------------- translate
@app.command()
def translate(
    model: Path = typer.Option(..., "--model", "-m", help="Model directory (or a checkpoint file)."),
) -> None:
    """Translate text with greedy or beam search (stdin → stdout by default)."""
    raise MtkitError("translate: not implemented yet")


# ------------------------------------------------------------------------------------------- average
@app.command()
def average(
    model_dir: Path = typer.Argument(..., help="Model directory."),
) -> None:
    """Average the parameters of the last or best N checkpoints into one."""
    raise MtkitError("average: not implemented yet")


# --------------------------------------------------------------------------------------------- score
@app.command()
def score(
    hyp: list[str] = typer.Option(..., "--hyp", help="System output (file or -); repeat to compare systems."),
    ref: list[str] = typer.Option(..., "--ref", help="Reference file; repeat for several references."),
    metrics: str = typer.Option("bleu,chrf", help="Comma-separated: bleu, chrf, ter, wer."),
    json_out: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Score translations: BLEU, chrF, TER (sacrebleu) and WER; paired bootstrap across systems."""
    raise MtkitError("score: not implemented yet")


# -------------------------------------------------------------------------------------------- config
@app.command("config-keys")
def config_keys() -> None:
    """List every config key with its type, default and meaning."""
    from rich.console import Console
    from rich.table import Table

    from mtkit.config import describe_keys

    table = Table("key", "type", "default", "meaning")
    for row in describe_keys():
        table.add_row(*row)
    Console().print(table)


def main() -> None:
    try:
        app()
    except MtkitError as exc:
        if _DEBUG["on"]:
            traceback.print_exc()
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()  # downstream closed the pipe (e.g. `| head`): not an error
        sys.exit(0)


if __name__ == "__main__":
    main()
