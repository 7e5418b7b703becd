"""`python -m mtkit ...` (and `torchrun -m mtkit train ...`) enter the CLI here."""

from mtkit.cli.app import main

if __name__ == "__main__":
    main()
