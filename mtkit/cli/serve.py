"""The options of `mtkit serve` (registered as a command by `mtkit.cli.app`; apart because they are many).

The server itself is imported only when the command runs, so `mtkit --help` stays fast.
"""

from __future__ import annotations

from pathlib import Path

import typer


def serve_command(
    model: list[Path] = typer.Option(
        ..., "--model", "-m", help="Model directory or `mtkit export` directory; repeat for more pairs."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to listen on (0.0.0.0: every interface)."),
    port: int = typer.Option(5000, "--port", help="TCP port."),
    engine: str = typer.Option("auto", "--engine", help="auto, torch, or ct2 (an exported model)."),
    no_shortlist: bool = typer.Option(False, "--no-shortlist",
                                      help="ct2 engine: ignore an export's vocabulary shortlist (vmap.txt)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda, cuda:N, mps."),
    precision: str = typer.Option("auto", "--precision", help="auto, fp32, bf16, fp16, int8 (CPU)."),
    int8: bool = typer.Option(False, "--int8", help="Dynamic int8 quantization (torch engine, CPU)."),
    threads: int = typer.Option(0, "--threads", help="CPU threads per model (0 = all allowed cores)."),
    checkpoint: str = typer.Option("best", "--checkpoint", help="best, last, or a checkpoint path."),
    max_wait_ms: float = typer.Option(5.0, "--max-wait-ms",
                                      help="How long a batch waits for more requests (milliseconds)."),
    max_batch: int = typer.Option(256, "--max-batch",
                                  help="Sentences of several requests translated together."),
    queue: int = typer.Option(10_000, "--queue", help="Sentences waiting per model before 503 (busy)."),
    char_limit: int = typer.Option(20_000, "--char-limit", help="Characters of text per request."),
    max_body: int = typer.Option(1_048_576, "--max-body", help="Bytes per request body (413 past it)."),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds a request may wait for its translation."),
    api_keys: Path | None = typer.Option(None, "--api-keys",
                                         help="File of API keys (one a line, optional requests per minute)."),
    cors_origin: list[str] = typer.Option(
        [], "--cors-origin", help="Allow browser requests from this origin (repeatable; * = any)."),
    log_level: str = typer.Option("warning", "--log-level", help="uvicorn's: warning, info, debug."),
    glossary: Path | None = typer.Option(None, "--glossary",
                                         help="Terms every translation must use (source TAB target a line)."),
    glossary_ignore_case: bool = typer.Option(False, "--glossary-ignore-case",
                                              help="Match the glossary's source terms in any case."),
    pivot: str = typer.Option("en", "--pivot",
                              help="Answer pairs without a model through this language (none: do not)."),
    disable_files_translation: bool = typer.Option(
        False, "--disable-files-translation", help="Refuse POST /translate_file (403), as LibreTranslate."),
    files_max_size: int = typer.Option(10 * 1024 * 1024, "--files-max-size",
                                       help="Bytes of one uploaded file (413 past it)."),
    files_keep_minutes: float = typer.Option(
        30.0, "--files-keep-minutes", help="Minutes a translated file can be downloaded, then deleted."),
) -> None:
    """Serve models over HTTP: LibreTranslate's API, mtkit's /v1 API and a web page at /."""
    from mtkit.decode.translator import LoadOptions
    from mtkit.serve import ServeOptions
    from mtkit.serve import serve as run_server

    load = LoadOptions(device=device, checkpoint=checkpoint, precision=precision, int8=int8, threads=threads,
                       engine=engine, shortlist=not no_shortlist)
    options = ServeOptions(host=host, port=port, max_wait_ms=max_wait_ms, max_batch_sentences=max_batch,
                           queue_sentences=queue, char_limit=char_limit, max_body=max_body, timeout=timeout,
                           api_keys=api_keys, cors_origins=cors_origin, log_level=log_level,
                           glossary=glossary, glossary_ignore_case=glossary_ignore_case,
                           pivot=None if pivot.strip().lower() in ("", "none") else pivot.strip(),
                           files=not disable_files_translation, files_max_size=files_max_size,
                           files_keep_minutes=files_keep_minutes)
    run_server(model, load, options)
