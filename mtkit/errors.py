"""User-facing errors: stages raise them, only the CLI prints them (one line, non-zero exit)."""

from __future__ import annotations


class MtkitError(Exception):
    """An error caused by the user's input or environment, with a message fit to print as is."""

    exit_code = 1


class ConfigError(MtkitError):
    """The configuration is invalid (unknown key, wrong type, value out of range)."""

    exit_code = 2


class DataError(MtkitError):
    """An input file is missing, unreadable, or malformed; the message names the file and line."""

    exit_code = 3


class CheckpointError(MtkitError):
    """A checkpoint is missing, truncated or corrupt."""

    exit_code = 4


class OutputClosed(MtkitError):
    """The reader of our stdout went away (``mtkit translate ... | head``): a normal end, exit 0.

    Not an OSError on purpose: click turns a broken pipe into exit status 1 before we could see it."""

    exit_code = 0
