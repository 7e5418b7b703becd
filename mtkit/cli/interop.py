"""`mtkit export` and `mtkit import-hf`: models in and out of mtkit (registered by `mtkit.cli.app`).

Apart because export's options are many; the converters in mtkit.interop load only when a command runs.
"""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.errors import MtkitError


def export_command(
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


def import_hf_command(
    source: Path = typer.Argument(..., help="A MarianMT, Pegasus, M2M100 or NLLB model directory."),
    output: Path = typer.Option(..., "--output", "-o", help="The mtkit model directory to write (new)."),
    src_lang: str | None = typer.Option(None, "--src-lang", help="M2M100/NLLB: the source language."),
) -> None:
    """Import a Hugging Face translation model as an mtkit model directory (docs/hf.md)."""
    from mtkit.interop.hf import import_hf as run_import

    typer.echo(f"wrote {run_import(source, output, src_lang=src_lang)}", err=True)
