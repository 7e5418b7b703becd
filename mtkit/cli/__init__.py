"""Floor 1, the command line: the Typer app (app.py) and the options of its larger commands.

Parses options, calls one stage, turns an MtkitError into one line on stderr and an exit code.
``main`` is re-exported because installs made before this package existed run ``mtkit.cli:main``.
"""

from mtkit.cli.app import main

__all__ = ["main"]
