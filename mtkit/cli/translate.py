"""The options of `mtkit translate` (registered as a command by `mtkit.cli.app`; apart because they are
many). The stage is imported only when the command runs, so `mtkit --help` stays fast."""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.errors import MtkitError


def translate_command(
    model: Path = typer.Option(..., "--model", "-m", help="Model directory (or a checkpoint file)."),
    input: str = typer.Option("-", "--input", "-i", help="Input file (plain or .gz; default stdin)."),
    output: str | None = typer.Option(None, "--output", "-o", help="Output file (default stdout)."),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best, last, or a checkpoint path."),
    beam: int | None = typer.Option(None, "--beam", "-b",
        help="Beam size (default: from the model's config)."),
    nbest: int = typer.Option(1, "--nbest",
        help="Write the N best as index<TAB>score<TAB>text (N lines/input)."),
    greedy: bool = typer.Option(False, "--greedy", help="Greedy search (beam size 1)."),
    sample: bool = typer.Option(False, "--sample",
        help="Sample instead of searching (with --nbest: N samples)."),
    temperature: float | None = typer.Option(None, help="Sampling temperature."),
    top_k: int | None = typer.Option(None, "--top-k", help="Sample from the K most likely tokens (0 = all)."),
    top_p: float | None = typer.Option(None, "--top-p", help="Nucleus sampling mass."),
    seed: int | None = typer.Option(None, help="Seed of the sampler (reproducible samples)."),
    length_penalty: float | None = typer.Option(None, "--length-penalty", help="GNMT length penalty α."),
    length_norm: str | None = typer.Option(None, "--length-norm", help="gnmt, average or none."),
    max_len_a: float | None = typer.Option(None, "--max-len-a", help="Max output length = a·src_len + b."),
    max_len_b: int | None = typer.Option(None, "--max-len-b", help="See --max-len-a."),
    min_len: int | None = typer.Option(None, "--min-len", help="Shortest output in tokens."),
    no_repeat_ngram: int | None = typer.Option(None, "--no-repeat-ngram", help="Forbid repeated n-grams."),
    max_tokens: int = typer.Option(0, "--max-tokens",
        help="Batch budget: source tokens × beam (a runtime setting, never stored in the model); "
             "0 = auto: 16,000 on a CPU, 256,000 on a GPU, a whole chunk for the ct2 engine on a CPU "
             "(halved where a batch does not fit)."),
    json_out: bool = typer.Option(False, "--json", help="JSON lines: text, score, tokens, alignment."),
    alignment: bool = typer.Option(False, "--alignment", help="Append TAB + Pharaoh subword alignment i-j."),
    scores: bool = typer.Option(False, "--scores",
        help="Append TAB confidence (0-1) TAB mean log-probability to each translation."),
    min_confidence: float | None = typer.Option(None, "--min-confidence",
        help="With --flag-file: list the lines whose confidence is below this (0-1)."),
    flag_file: str | None = typer.Option(None, "--flag-file",
        help="Write the lines below --min-confidence here (line TAB confidence TAB source TAB "
             "translation, least confident first), for review."),
    attention_plot: str | None = typer.Option(None, "--attention-plot",
        help="Write attention heatmaps (PNG) here."),
    attention_plot_max: int = typer.Option(0, "--attention-plot-max",
        help="Plot only the first K sentences (0 = all)."),
    attention_layer: int = typer.Option(-1, "--attention-layer",
        help="Decoder layer of the attention (-1 = last)."),
    attention_head: str = typer.Option("avg", "--attention-head", help="Head number or avg."),
    ensemble: list[Path] = typer.Option([], "--ensemble",
        help="Another model dir to ensemble with (repeatable)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N, mps."),
    int8: bool = typer.Option(False, "--int8", help="Dynamic int8 quantization of linear layers (CPU)."),
    precision: str = typer.Option("auto", "--precision",
        help="auto, fp32, bf16, fp16 or int8 (auto: bf16 on GPUs and on CPUs with native bf16, else fp32; "
             "int8: int8 linear layers, CPU only, the same as --int8)."),
    threads: int = typer.Option(0, "--threads", help="CPU threads (0 = all allowed cores)."),
    set: list[str] = typer.Option([], "--set",
        help="Override a decoding key, e.g. --set decoding.beam_size=4."),
    resume: bool = typer.Option(False, "--resume",
        help="Continue a partial OUTPUT (checked to be a prefix) from the next input line."),
    shard: str | None = typer.Option(None, "--shard",
        help="K/N: translate only shard K of N (merge the outputs with `mtkit merge-shards`)."),
    engine: str = typer.Option("auto", "--engine",
        help="auto, torch or ct2 (auto: ct2 for an exported CTranslate2 directory)."),
    no_shortlist: bool = typer.Option(False, "--no-shortlist",
        help="ct2 engine: ignore the export's vocabulary shortlist (vmap.txt) and search every subword."),
    glossary: Path | None = typer.Option(None, "--glossary",
        help="Terms the translation must use: source TAB target, one a line (torch engine)."),
    glossary_ignore_case: bool = typer.Option(False, "--glossary-ignore-case",
        help="Match the glossary's source terms in any case."),
    soft_constraints: float | None = typer.Option(None, "--soft-constraints",
        help="Glossary terms and constraints as a bonus per subword (this much log-probability), "
             "not a rule."),
    tgt_lang: str = typer.Option("", "--tgt-lang",
        help="Language to translate into (needed where the model knows several; docs/multilingual.md)."),
    pivot: str = typer.Option("", "--pivot",
        help="Translate through this language: into it, then from it into the target (one line per "
             "line still; docs/translate.md#pivot-translation)."),
    pivot_model: Path | None = typer.Option(None, "--pivot-model",
        help="The second leg's model (pivot → target); default: --model itself (a multilingual model)."),
    json_input: bool = typer.Option(False, "--json-input",
        help='Each input line is JSON: {"text": ..., "constraints": [target strings]}.'),
    format: str = typer.Option("auto", "--format", "-f",
        help="text, po (gettext catalog), html, srt, vtt, xliff, docx, pptx, xlsx, odt, odp or epub; auto: "
             "by the input's extension (docs/formats.md)."),
    placeholders: bool | None = typer.Option(None, "--placeholders/--no-placeholders",
        help="Keep printf/brace/dollar placeholders, tags, entities, escapes, accelerators: a line whose "
             "translation would break one is left as it is and reported (default: on for po and html)."),
    retranslate: bool = typer.Option(False, "--retranslate",
        help="po: translate the entries that already have a translation too."),
    fuzzy: bool = typer.Option(True, "--fuzzy/--no-fuzzy",
        help="po: flag machine translations fuzzy, for translators to review."),
    encoding: str = typer.Option("", "--encoding",
        help="The charset of a text or SubRip file (cp1252, cp1251 …), written back in it; without it a "
             "file that is not UTF-8 is read in its language's usual charset where its text looks right "
             "(said on stderr). Text is then translated as one document."),
) -> None:
    """Translate text with greedy or beam search (stdin → stdout by default)."""
    from mtkit.decode.translator import LoadOptions, SearchOptions
    from mtkit.translate import OutputOptions, run_translate

    overrides = list(set)
    if greedy and beam not in (None, 1):
        raise MtkitError("--greedy and --beam conflict: greedy search is beam size 1")
    for key, value in (("beam_size", 1 if greedy else beam), ("temperature", temperature), ("top_k", top_k),
                       ("top_p", top_p), ("length_penalty", length_penalty), ("length_norm", length_norm),
                       ("max_len_a", max_len_a), ("max_len_b", max_len_b), ("min_len", min_len),
                       ("no_repeat_ngram", no_repeat_ngram)):
        if value is not None:
            overrides.append(f"decoding.{key}={value}")
    load = LoadOptions(device=device, checkpoint=checkpoint, precision=precision, int8=int8, threads=threads,
                       ensemble=ensemble, engine=engine, shortlist=not no_shortlist)
    search = SearchOptions(overrides=overrides, nbest=nbest, sample=sample, seed=seed,
                           attention_layer=attention_layer, max_tokens=max_tokens, glossary=glossary,
                           glossary_ignore_case=glossary_ignore_case, soft_bonus=soft_constraints,
                           tgt_lang=tgt_lang,
                           # exact scores only where shown or ranked (the ct2 engine saves a pass)
                           scores=scores or json_out or nbest > 1 or flag_file is not None)
    out = OutputOptions(json=json_out, alignment=alignment, scores=scores, min_confidence=min_confidence,
                        flag_file=flag_file, attention_plot=attention_plot,
                        attention_plot_max=attention_plot_max, attention_head=attention_head,
                        resume=resume, shard=shard, json_input=json_input, format=format,
                        placeholders=placeholders, retranslate=retranslate, fuzzy=fuzzy, encoding=encoding,
                        pivot=pivot, pivot_model=str(pivot_model) if pivot_model is not None else None)
    run_translate(model, input, output, load, search, out)
