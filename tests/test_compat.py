"""What a user has keeps working across the move of model interchange into mtkit.interop: scripts that
import the old module names (with a DeprecationWarning naming the new one), and the options of
`mtkit export`, `mtkit import-hf` and `mtkit translate` as they were at 0fe384c. That exported and
imported models still translate is test_export.py's and test_hf.py's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer.main
from typer.testing import CliRunner

from mtkit.cli.app import app

ROOT = Path(__file__).resolve().parents[1]

#: each command's options at 0fe384c (before mtkit.interop)
OPTIONS_0FE384C = {
    "export": ["--checkpoint", "--format", "--model", "--output", "--pair", "--quantization", "--shortlist",
               "--shortlist-data", "--shortlist-frequent", "--shortlist-sentences", "-m", "-o"],
    "import-hf": ["--output", "-o"],
    "translate": [
        "--alignment", "--attention-head", "--attention-layer", "--attention-plot", "--attention-plot-max",
        "--beam", "--checkpoint", "--device", "--engine", "--ensemble", "--flag-file", "--format",
        "--fuzzy", "--no-fuzzy", "--glossary", "--glossary-ignore-case", "--greedy", "--input", "--int8",
        "--json", "--json-input", "--length-norm", "--length-penalty", "--max-len-a", "--max-len-b",
        "--max-tokens", "--min-confidence", "--min-len", "--model", "--nbest", "--no-repeat-ngram",
        "--no-shortlist", "--output", "--pivot", "--pivot-model", "--placeholders", "--no-placeholders",
        "--precision", "--resume", "--retranslate", "--sample", "--scores", "--set", "--shard",
        "--soft-constraints", "--tgt-lang", "--threads", "--top-k", "--top-p", "-b", "-f", "-i", "-m", "-o"],
}

#: old module → names a script may have imported from it
OLD_NAMES = {
    "mtkit.export": ["run_export", "ShortlistOptions", "FORMATS", "QUANTIZATIONS", "argos_sbd_note",
                     "check_expressible", "position_rows", "transformer_spec", "write_ct2"],
    "mtkit.hf": ["import_hf", "export_hf", "check_marian"],
    "mtkit.decode.exported": ["MANIFEST", "is_exported", "read_manifest", "require_ctranslate2"],
    "mtkit.models.marian": ["model_settings", "to_hf", "to_mtkit", "vocab_order"],
    "mtkit.data.spm_proto": ["read_pieces", "reorder"],
    "mtkit.decode.langid": ["LanguageIdentifier", "Guess", "NEEDS"],
    "mtkit.translate.documents": ["check_protected", "protected_lines", "translate_document_file"],
}


def test_old_module_names_import_with_a_warning_that_names_the_new_one():
    """A script written against an older layout keeps working: each of mtkit._MOVED's old names (the
    flat layout's ``mtkit.translator``, ``mtkit.config``, the ``mtkit.cli:main`` entry point of older
    installs, and the modules that went into mtkit.interop) is the new module itself, with a
    DeprecationWarning naming it, and still holds the names a script imported from it. One fresh
    process checks them all: importing an old name must be the first import of it."""
    code = ("import importlib, sys, warnings, mtkit\n"
            "bad = []\n"
            "for old, new in mtkit._MOVED.items():\n"
            "    with warnings.catch_warnings(record=True) as caught:\n"
            "        warnings.simplefilter('always')\n"
            "        module = importlib.import_module(old)\n"
            "    if module is not importlib.import_module(new) or sys.modules[old] is not module:\n"
            "        bad.append(old)\n"
            "    if not any(f'{old} is now {new}' in str(w.message) for w in caught):\n"
            "        bad.append(old + ' (no warning)')\n"
            f"for old, names in {OLD_NAMES!r}.items():\n"
            "    module = importlib.import_module(old)\n"
            "    bad += [f'{old}.{n}' for n in names if not hasattr(module, n)]\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    from mtkit.placeholders.strings import search_functions\n"
            "from mtkit.decode.formats_adapter import search_functions as moved\n"
            "assert search_functions is moved\n"
            "assert any('mtkit.decode.formats_adapter' in str(w.message) for w in caught)\n"
            "from mtkit.translator import Translator\n"
            "from mtkit.decode import translator\n"
            "from mtkit.config import Config, load_config\n"
            "from mtkit.config.experiment import Config as C2, load_config as l2\n"
            "from mtkit.cli import main\n"
            "from mtkit.cli.app import main as m2\n"
            "assert Translator is translator.Translator and Config is C2 and load_config is l2\n"
            "assert main is m2\n"
            "print(len(mtkit._MOVED), bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "51 []"  # every moved name (the formats by family: 21 of them)


def test_the_commands_keep_every_option_they_had():
    commands = typer.main.get_command(app).commands
    for name, options in OPTIONS_0FE384C.items():
        params = commands[name].params
        now = {o for p in params for o in (*p.opts, *getattr(p, "secondary_opts", []))}
        assert set(options) <= now, f"mtkit {name} lost {sorted(set(options) - now)}"


def test_help_of_the_interchange_commands_still_renders():
    runner = CliRunner()
    for name in ("export", "import-hf", "translate"):
        result = runner.invoke(app, [name, "--help"])
        assert result.exit_code == 0, result.output
        assert "--output" in result.output
