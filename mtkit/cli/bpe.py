"""`mtkit bpe train|encode|decode`: the sentencepiece sub-commands (added to the app by `mtkit.cli.app`).

sentencepiece and the stage code are imported inside each command, so `mtkit --help` stays fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from mtkit.vocab import BPE_SAMPLE_SENTENCES

bpe_app = typer.Typer(help="Sentencepiece BPE: train a model, encode or decode text.", no_args_is_help=True)


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


def _filter_command(encode: bool, doc: str):
    """`mtkit bpe encode` or `decode`: the same options, one direction."""
    def command(
        model: str = typer.Option(..., "--model", "-m", help="PREFIX.model"),
        input: str = typer.Option("-", "--input", "-i", help="Input file (default stdin)."),
        output: str | None = typer.Option(None, "--output", "-o", help="Output file (default stdout)."),
        fmt: str = typer.Option("pieces", "--format", help="pieces or ids."),
    ) -> None:
        _filter(model, input, output, fmt, encode=encode)

    command.__doc__ = doc
    return command


bpe_app.command("encode")(_filter_command(
    True, "Segment text into subwords, one output line per input line."))
bpe_app.command("decode")(_filter_command(
    False, "Join subwords back into text, one output line per input line."))
