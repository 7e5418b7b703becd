"""mtkit: a command-line toolkit for neural machine translation."""

__version__ = "0.1.0"
