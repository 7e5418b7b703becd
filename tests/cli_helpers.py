"""Run the `mtkit` command line inside the test process, as a user's `python -m mtkit ...` would run it
but without the 2-3 CPU-seconds a new interpreter spends importing torch.

``run_mtkit`` goes through ``mtkit.cli.app.main``, the function `python -m mtkit` calls, so a test sees
what a user sees: the exit status (``sys.exit`` caught), stdout and stderr apart (the one-line `error:`
of a bad input included), warnings printed on stderr. What a command changes in the process is put
back afterwards: environment variables (the CLI sets oneDNN's cache sizes), the working directory,
PyTorch's thread count, sys.argv and sys.modules["__main__"], warning filters, the SIGINT and SIGTERM
handlers. Tests where the process itself is the subject (the `python -m mtkit` entry point, a closed
pipe, a signal, torchrun) keep a real subprocess.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from click.testing import CliRunner

import mtkit.__main__ as entry_point
from mtkit.cli.app import main


@dataclass(frozen=True)
class Result:
    """What a finished command left: the fields of ``subprocess.CompletedProcess`` a test reads."""

    returncode: int
    stdout: str
    stderr: str


@contextmanager
def _process_state_restored(cwd: Path | str | None) -> Iterator[None]:
    """Put back what a command may change in the process it runs in."""
    environ = dict(os.environ)
    here = os.getcwd()
    threads = torch.get_num_threads()
    argv, main_module = sys.argv, sys.modules["__main__"]
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        if cwd is not None:
            os.chdir(cwd)
        with warnings.catch_warnings():
            yield
    finally:
        os.chdir(here)
        sys.argv, sys.modules["__main__"] = argv, main_module
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        for name in set(os.environ) - set(environ):
            del os.environ[name]
        for name, value in environ.items():
            if os.environ.get(name) != value:
                os.environ[name] = value


def _print_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """Warnings go to the command's stderr, as in a process of its own (not to pytest's record)."""
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def run_mtkit(*args: str | Path, input: str | bytes | None = None,
              env: Mapping[str, str | None] | None = None, cwd: Path | str | None = None) -> Result:
    """Run `mtkit ARGS...` in this process with ``input`` on stdin (empty if None), ``env`` added to
    the environment (a None value removes a variable) and ``cwd`` as the working directory."""
    with _process_state_restored(cwd), CliRunner().isolation(input=input, env=env) as (out, err, _):
        warnings.simplefilter("default")
        warnings.showwarning = _print_warning
        sys.argv = [entry_point.__file__, *map(str, args)]
        sys.modules["__main__"] = entry_point  # usage lines name `python -m mtkit`, as for a user
        try:
            main()
            code: int | str | None = 0
        except SystemExit as exit_:
            code = exit_.code
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
        if isinstance(code, str):  # sys.exit("message"): the message on stderr, status 1
            err.write((code + "\n").encode())
            code = 1
        return Result(code or 0, out.getvalue().decode(), err.getvalue().decode(errors="backslashreplace"))


def run_mtkit_process(*args: str | Path, input: str | None = None, env: Mapping[str, str] | None = None,
                      cwd: Path | str | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `python -m mtkit ARGS...` as a process of its own: for tests of the process itself."""
    return subprocess.run([sys.executable, "-m", "mtkit", *map(str, args)], input=input,
                          capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


def assert_one_error_line(result: Result | subprocess.CompletedProcess, *fragments: str) -> str:
    """Exactly one non-empty stderr line, starting with `error:`, holding every fragment; a non-zero
    exit and no traceback. Returns the line."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
