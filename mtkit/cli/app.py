"""The `mtkit` command line: parse options, call one stage function, print errors as one line.
Stage modules are imported inside the commands so `mtkit --help` stays fast."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

import typer

from mtkit import __version__
from mtkit.cli.serve import serve_command
from mtkit.cli.translate import translate_command
from mtkit.device import bound_kernel_caches, short_openmp_spin
from mtkit.errors import MtkitError, OutputClosed
from mtkit.vocab import BPE_SAMPLE_SENTENCES

app = typer.Typer(
    help="mtkit: neural machine translation from the command line "
    "(BPE → prepare → train → translate → score).",
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
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Show the version."),
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors."),
) -> None:
    _DEBUG["on"] = debug


# ----------------------------------------------------------------------------------------------- bpe
@bpe_app.command("train")
def bpe_train(
    input: list[str] = typer.Option(
        ..., "--input", "-i", help="Training text (plain or .gz); repeat for a joint model."
    ),
    vocab_size: int = typer.Option(8000, "--vocab-size", help="Vocabulary size."),
    model_prefix: str = typer.Option(..., "--model-prefix", help="Writes PREFIX.model and PREFIX.vocab."),
    character_coverage: float = typer.Option(1.0, help="Share of characters covered (0.9995 for CJK)."),
    input_sentence_size: int = typer.Option(BPE_SAMPLE_SENTENCES,
                                            help="Sample at most this many sentences (0 = all)."),
    seed: int = typer.Option(1, help="Sampling seed."),
) -> None:
    """Train a BPE model (joint over several inputs). Ids: pad=0 unk=1 bos=2 eos=3."""
    from mtkit.data.bpe import Bpe, train_bpe

    path = train_bpe(input, model_prefix, vocab_size, character_coverage, input_sentence_size, seed)
    typer.echo(f"wrote {path} ({len(Bpe(path))} pieces) and {Path(model_prefix + '.vocab')}", err=True)


def _filter(model: str, input: str, output: str | None, fmt: str, encode: bool) -> None:
    from mtkit.data.bpe import Bpe, decode_stream, encode_stream
    from mtkit.errors import DataError
    from mtkit.textio import output_file, read_lines, same_file

    if output not in (None, "-") and same_file(input, output):
        raise DataError(f"--output {output} is the input file: write to another file")
    bpe = Bpe(model)
    lines = read_lines(input, strict=True)
    chunk = 1 if input == "-" and sys.stdin.isatty() else 1000
    stream = (encode_stream(bpe, lines, fmt, chunk) if encode
              else decode_stream(bpe, lines, fmt, "<stdin>" if input == "-" else input, chunk))
    with output_file(output) as out:
        for line in stream:
            out.write(line + "\n")


@bpe_app.command("encode")
def bpe_encode(
    model: str = typer.Option(..., "--model", "-m", help="PREFIX.model"),
    input: str = typer.Option("-", "--input", "-i", help="Input file (default stdin)."),
    output: str | None = typer.Option(None, "--output", "-o", help="Output file (default stdout)."),
    fmt: str = typer.Option("pieces", "--format", help="pieces or ids."),
) -> None:
    """Segment text into subwords, one output line per input line."""
    _filter(model, input, output, fmt, encode=True)


@bpe_app.command("decode")
def bpe_decode(
    model: str = typer.Option(..., "--model", "-m", help="PREFIX.model"),
    input: str = typer.Option("-", "--input", "-i", help="Input file (default stdin)."),
    output: str | None = typer.Option(None, "--output", "-o", help="Output file (default stdout)."),
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


# -------------------------------------------------------------------------------------------- export
@app.command()
def export(
    model: Path = typer.Option(..., "--model", "-m", help="Model directory (or a checkpoint file)."),
    output: Path = typer.Option(..., "--output", "-o",
                                help="Output directory (ct2, hf) or .argosmodel file."),
    fmt: str = typer.Option("ct2", "--format", help="ct2 (a CTranslate2 model directory), argos, or hf (a "
                            "MarianMT directory for Hugging Face Transformers, docs/hf.md)."),
    quantization: str = typer.Option("float32", "--quantization",
        help="float32, int8, int8_float32, bfloat16 or float16."),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best, last, or a checkpoint path."),
    shortlist: int = typer.Option(0, "--shortlist", min=0,
        help="Write a vocabulary shortlist (vmap.txt): this many target subwords per source subword "
             "(0 = none; ct2 format)."),
    shortlist_frequent: int = typer.Option(500, "--shortlist-frequent", min=0,
        help="Most frequent target subwords, always in the shortlist."),
    shortlist_data: Path | None = typer.Option(None, "--shortlist-data",
        help="Prepared data directory to count the shortlist on (default: the model's data.dir)."),
    shortlist_sentences: int = typer.Option(0, "--shortlist-sentences", min=0,
        help="Count only the first N training pairs (0 = all)."),
    pair: str = typer.Option("", "--pair",
        help="argos: the direction of a multilingual model to package, e.g. en-de (one package per pair)."),
    license: str = typer.Option("unknown", "--license",
        help="hf: the model card's license (a Hub license id, e.g. cc-by-4.0)."),
    card_scores: Path | None = typer.Option(None, "--card-scores",
        help="hf: test scores for the model card: the output of `mtkit score --json` (its first system) "
             "or a JSON object such as {\"BLEU\": 27.1}."),
) -> None:
    """Export a trained Transformer to CTranslate2, an Argos Translate package or Hugging Face MarianMT."""
    if fmt == "hf":
        from mtkit.interop.hf import export_hf, read_card_scores

        if quantization != "float32" or shortlist or pair:
            raise MtkitError("--format hf writes float32 weights for all pairs without a shortlist: drop "
                             "--quantization, --shortlist and --pair")
        scores = read_card_scores(card_scores) if card_scores else None
        typer.echo(f"wrote {export_hf(model, output, checkpoint, license=license, scores=scores)}", err=True)
        return
    if license != "unknown" or card_scores:
        raise MtkitError("--license and --card-scores are for --format hf (the model card)")
    from mtkit.interop.export import ShortlistOptions, run_export

    lists = ShortlistOptions(shortlist, shortlist_frequent, shortlist_data, shortlist_sentences)
    path = run_export(model, output, fmt=fmt, quantization=quantization, checkpoint=checkpoint,
                      shortlist=lists, pair=pair)
    typer.echo(f"wrote {path}", err=True)


@app.command("import-hf")
def import_hf(
    source: Path = typer.Argument(..., help="A MarianMT, Pegasus, M2M100 or NLLB model directory."),
    output: Path = typer.Option(..., "--output", "-o", help="The mtkit model directory to write (new)."),
    src_lang: str | None = typer.Option(None, "--src-lang", help="M2M100/NLLB: the source language."),
) -> None:
    """Import a Hugging Face translation model as an mtkit model directory (docs/hf.md)."""
    from mtkit.interop.hf import import_hf as run_import

    typer.echo(f"wrote {run_import(source, output, src_lang=src_lang)}", err=True)


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
