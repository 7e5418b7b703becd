"""`mtkit serve`: models behind an HTTP API (LibreTranslate's and mtkit's own) and a web page.

``serve`` loads the models, builds the FastAPI application (`mtkit.serve.app`) and runs it on uvicorn
until SIGINT or SIGTERM, which stop new connections, finish the requests in flight (their sentences
already queued are translated) and exit. It needs the ``serve`` extra (FastAPI, uvicorn,
prometheus-client): ``pip install 'mtkit[serve]'``.
"""

from __future__ import annotations

import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mtkit.decode.translator import LoadOptions
from mtkit.errors import ConfigError

NEEDS = "mtkit serve needs FastAPI, uvicorn and prometheus-client: pip install 'mtkit[serve]'"


@dataclass
class ServeOptions:
    """`mtkit serve`'s options beyond the models (see its --help)."""

    host: str = "127.0.0.1"
    port: int = 5000
    max_wait_ms: float = 5.0
    max_batch_sentences: int = 256
    queue_sentences: int = 10_000
    char_limit: int = 20_000
    max_body: int = 1_048_576
    timeout: float = 60.0
    api_keys: Path | None = None
    cors_origins: list[str] = field(default_factory=list)
    log_level: str = "warning"
    glossary: Path | None = None  # terms every translation must use (mtkit.decode.glossary)
    glossary_ignore_case: bool = False
    pivot: str | None = "en"  # pairs without a model are chained through this language (None: not at all)
    files: bool = True  # POST /translate_file (False: --disable-files-translation)
    files_max_size: int = 10 * 1024 * 1024  # bytes of one uploaded file
    files_keep_minutes: float = 30.0  # how long a translated file can be downloaded


def build_app(models: list[Path], load: LoadOptions, options: ServeOptions):  # -> FastAPI
    """The application for ``models`` (loaded now), ready for any ASGI server."""
    try:
        import fastapi  # noqa: F401
        import prometheus_client  # noqa: F401
    except ImportError:
        raise ConfigError(NEEDS) from None
    from mtkit.serve.app import ServerSettings, create_app
    from mtkit.serve.models import ModelSet
    from mtkit.serve.security import KeyRing

    for value, what in ((options.max_wait_ms, "--max-wait-ms"), (options.max_batch_sentences, "--max-batch"),
                        (options.queue_sentences, "--queue"), (options.char_limit, "--char-limit"),
                        (options.max_body, "--max-body"), (options.timeout, "--timeout"),
                        (options.files_max_size, "--files-max-size"),
                        (options.files_keep_minutes, "--files-keep-minutes")):
        if value < 0 or (value == 0 and what != "--max-wait-ms"):
            raise ConfigError(f"{what} must be positive, not {value}")
    keys = KeyRing.from_file(options.api_keys) if options.api_keys is not None else KeyRing()
    model_set = ModelSet(models, load, options.max_wait_ms / 1000, options.max_batch_sentences,
                         options.queue_sentences, glossary=options.glossary,
                         glossary_ignore_case=options.glossary_ignore_case, pivot=options.pivot)
    settings = ServerSettings(char_limit=options.char_limit, max_body=options.max_body,
                              timeout=options.timeout, cors_origins=list(options.cors_origins),
                              files=options.files, files_max_size=options.files_max_size,
                              files_keep_minutes=options.files_keep_minutes)
    return create_app(model_set, settings, keys)


def serve(models: list[Path], load: LoadOptions, options: ServeOptions) -> None:
    """Run the server in the foreground until SIGINT/SIGTERM."""
    try:
        import uvicorn
    except ImportError:
        raise ConfigError(NEEDS) from None
    app = build_app(models, load, options)
    served = app.state.models.models.values()
    names = ", ".join(f"{m.name} ({m.source}→{m.target}, {m.engine})" for m in served)
    print(f"mtkit serve: http://{options.host}:{options.port}/ — {names}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, host=options.host, port=options.port, log_level=options.log_level,
                            timeout_graceful_shutdown=int(options.timeout) + 5, access_log=False)
    # uvicorn finishes the requests in flight on SIGTERM/SIGINT, then raises the signal again under the
    # handler it found: with these no-op handlers that ends the run normally (exit status 0)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    uvicorn.Server(config).run()
    print("mtkit serve: stopped", file=sys.stderr, flush=True)

