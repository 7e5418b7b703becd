"""The recipes: their configs are valid and consistent, and their Makefiles do the right amount of work.

The Makefile behaviour is checked with a stand-in for `mtkit` (MTKIT=..., a shell script) that writes the
files each stage would write and logs its calls, so a whole recipe runs in a second: the first run does every
stage, the second does nothing, and changing one input redoes exactly what depends on it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mtkit.config.experiment import load_config, to_dict

RECIPES = Path(__file__).resolve().parents[1] / "recipes"
DEB = ("deb-en-de", "deb-en-es")

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


# -------------------------------------------------------------------------------------------- configs
@pytest.mark.parametrize("path", sorted(RECIPES.glob("*/*.yaml")), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_recipe_config_is_valid(path: Path) -> None:
    load_config(path)


@pytest.mark.parametrize("recipe", DEB)
def test_deb_configs_share_data_and_bpe_so_one_data_bin_serves_both(recipe: str) -> None:
    transformer = to_dict(load_config(RECIPES / recipe / "transformer.yaml"))
    rnn = to_dict(load_config(RECIPES / recipe / "rnn.yaml"))
    assert transformer["data"] == rnn["data"]
    assert transformer["bpe"] == rnn["bpe"]
    tgt = recipe.rsplit("-", 1)[1]
    assert transformer["data"]["tgt_lang"] == tgt and transformer["data"]["train_tgt"].endswith(f".{tgt}.gz")
    assert transformer["training"]["model_dir"] == "work/transformer"
    assert rnn["training"]["model_dir"] == "work/rnn"


@pytest.mark.parametrize("recipe", DEB)
def test_deb_models_are_the_documented_architectures(recipe: str) -> None:
    t = load_config(RECIPES / recipe / "transformer.yaml")
    assert (t.model.arch, t.model.d_model, t.model.encoder_layers, t.model.decoder_layers, t.model.heads,
            t.model.d_ff) == ("transformer", 256, 3, 3, 4, 1024)
    assert (t.bpe.joint, t.bpe.vocab_size, t.training.max_tokens) == (True, 8000, 4096)
    r = load_config(RECIPES / recipe / "rnn.yaml")
    assert (r.model.arch, r.model.rnn_type, r.model.bidirectional) == ("rnn", "lstm", True)
    assert (r.model.attention, r.model.attention_style) == ("additive", "bahdanau")


@pytest.mark.parametrize("recipe", DEB)
def test_deb_transformers_keep_the_settings_measured_best_in_35_minutes(recipe: str) -> None:
    """No dropout and a 20% cooldown to 0 beat dropout 0.1 without a cooldown by 5.2-8.2 BLEU on deb-en-de
    (docs/notebook/budget.md#the-35-minute-deb-en-de-recipe-2026-11-29)."""
    t = load_config(RECIPES / recipe / "transformer.yaml")
    assert (t.model.dropout, t.training.schedule, t.training.cooldown_fraction) == (0.0, "inverse_sqrt", 0.2)
    assert (t.training.lr, t.training.warmup_steps, t.model.size) == (0.002, 500, "fixed")


# ------------------------------------------------------------------------------------------ Makefiles
FAKE_MTKIT = r"""#!/bin/sh
# Stand-in for `mtkit`: writes what each stage writes, and logs the call. A shell script, as starting
# Python for each of a recipe's hundreds of calls would cost more than the recipe logic under test;
# prepare and train read the experiment config (with its --set overrides) through mtkit: fake_stages.py.
printf '%s\n' "$*" >> "$FAKE_LOG"
opt() {  # opt NAME ARGS...: the value after the first NAME in ARGS (empty if none)
    name=$1; shift
    while [ $# -gt 1 ]; do
        if [ "$1" = "$name" ]; then printf '%s' "$2"; return; fi
        shift
    done
}
set -e
case $1 in
prepare|train) exec "$FAKE_PYTHON" "$(dirname "$0")/fake_stages.py" "$@" ;;
translate)
    model=$(opt --model "$@"); src=$(opt -i "$@"); out=$(opt -o "$@"); plots=$(opt --attention-plot "$@")
    test -f "$model/checkpoint_best.pt"
    case " $* " in
    *" --json "*)  # a record per line, with a made-up confidence
        awk '{ t = $0; gsub(/\\/, "\\\\", t); gsub(/"/, "\\\"", t)
               printf "{\"text\": \"%s\", \"confidence\": %s}\n", t, (length($0) % 7) / 10 }' \
            "$src" > "$out" ;;
    *) cp "$src" "$out" ;;
    esac
    if [ -n "$plots" ]; then printf png > "$plots/attention-000000.png"; fi ;;
score)
    table=TABLE
    for arg in "$@"; do case $arg in work*) table="$table $arg" ;; esac; done
    echo "$table" ;;
export)  # a directory the stand-in's translate takes, with a shortlist when asked
    out=$(opt -o "$@"); shortlist=$(opt --shortlist "$@")
    mkdir -p "$out"
    cp "$(opt --model "$@")/checkpoint_best.pt" "$out/checkpoint_best.pt"
    rm -f "$out/vmap.txt"
    if [ -n "$shortlist" ]; then
        printf '{"shortlist": "%s"}' "$shortlist" > "$out/mtkit_export.json"
        printf '\t.\n' > "$out/vmap.txt"
    else
        printf '{"shortlist": null}' > "$out/mtkit_export.json"
    fi ;;
distill)
    cp "$(opt --source "$@")" "$(opt --out-source "$@")"
    cp "$(opt --translations "$@")" "$(opt --out-target "$@")"
    printf '{"pairs": 1, "kept": 1, "dropped": {}}' > "$(opt --report "$@")" ;;
esac
"""

FAKE_STAGES = r'''
"""The stand-in's prepare and train: what they write depends on the experiment config."""
import os, sys
from pathlib import Path
from mtkit.config.experiment import load_config

args = sys.argv[1:]
cmd = args[0]

def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default

def config():
    sets = [args[i + 1] for i, a in enumerate(args) if a == "--set"]
    return load_config(args[1], sets)

if cmd == "prepare":  # like mtkit: meta.json is rewritten only when the inputs changed
    cfg = config()
    out = Path(cfg.data.dir)
    files = ([p for c in cfg.data.corpora for p in (c.train_src, c.train_tgt)] if cfg.data.corpora
             else [cfg.data.train_src, cfg.data.train_tgt])
    inputs = [os.path.realpath(p) for p in files]
    stamp = "".join(f"{p}:{os.stat(p).st_mtime_ns}" for p in inputs)
    if not (out / "meta.json").is_file() or (out / "meta.json").read_text() != stamp:
        out.mkdir(parents=True, exist_ok=True)
        (out / "meta.json").write_text(stamp)
elif cmd == "train":
    cfg = config()
    model = Path(cfg.training.model_dir)
    model.mkdir(parents=True, exist_ok=True)
    (model / "checkpoint_best.pt").write_text(opt("--max-time", "0"))
'''


def _fake_mtkit(root: Path) -> Path:
    """Write the stand-in for `mtkit` into `root`; returns the command to give as MTKIT."""
    (root / "fake_stages.py").write_text(FAKE_STAGES)
    fake = root / "fake_mtkit"
    fake.write_text(FAKE_MTKIT)
    fake.chmod(0o755)
    return fake


FAKE_SACREBLEU = r"""#!/bin/sh
# Stand-in for the recipe's Python where it runs sacrebleu's command line (one line per output, with the
# length ratio); every other script runs in the real interpreter. With REAL_SACREBLEU_ONCE set, the first
# of those runs (the one that makes that directory) is sacrebleu's own.
if [ "$1 $2 $4" = "-m sacrebleu -i" ]; then
    test -f "$3" && test -f "$5"
    if [ -n "$REAL_SACREBLEU_ONCE" ] && mkdir "$REAL_SACREBLEU_ONCE" 2>/dev/null; then
        exec "$FAKE_PYTHON" "$@"
    fi
    echo "BLEU = 10.00 40.0/20.0/10.0/5.0 (BP = 1.000 ratio = 1.000 hyp_len = 10 ref_len = 10)"
    exit
fi
exec "$FAKE_PYTHON" "$@"
"""


def _fake_sacrebleu(root: Path) -> Path:
    """Write the stand-in for the recipe's sacrebleu runs into `root`; returns the command for PYTHON."""
    python = root / "fake_python"
    python.write_text(FAKE_SACREBLEU)
    python.chmod(0o755)
    return python


def _make_env(log: Path) -> dict[str, str]:
    """The environment of a recipe's make: a user's (not a sub-make's), the stand-in's log and Python."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return {**env, "FAKE_LOG": str(log), "FAKE_PYTHON": sys.executable}


def _copy_recipe(name: str, root: Path) -> Path:
    (root / "recipes").mkdir(parents=True)
    for shared in ("common.mk", "deb.mk", "train.mk", "student.mk", "head_pairs.py", "student_table.py"):
        shutil.copy(RECIPES / shared, root / "recipes" / shared)
    target = root / "recipes" / name
    shutil.copytree(RECIPES / name, target, ignore=shutil.ignore_patterns("work", "__pycache__"))
    return target


def _make(recipe: Path, log: Path, fake: Path, *variables: str, path: Path | None = None) -> list[str]:
    """Run make in `recipe` with the stand-in; return the mtkit commands it ran (first word each).
    A run with nothing to do must also print nothing (no links re-made, no stamps rewritten)."""
    log.write_text("")
    env = _make_env(log)
    if path is not None:
        env["PATH"] = f"{path}{os.pathsep}{env['PATH']}"
    proc = subprocess.run(["make", "--no-print-directory", f"MTKIT={fake}", f"PYTHON={sys.executable}",
                           *variables], cwd=recipe, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [line.split()[0] for line in log.read_text().splitlines()]
    if not calls:
        assert proc.stdout.strip() in ("", "make: Nothing to be done for 'all'."), proc.stdout
    return calls


def _fake_corpus(root: Path, src: str, tgt: str) -> Path:
    data = root / "corpus"
    data.mkdir()
    for split in ("train", "dev", "test"):
        for lang in (src, tgt):
            suffix = ".gz" if split == "train" else ""
            (data / f"{split}.{lang}{suffix}").write_text(f"a short {split} sentence in {lang} here\n")
    return data


def _deb_en_de(root: Path) -> tuple[Path, Path, Path, Path]:
    """The deb-en-de recipe copied under `root` with the mtkit stand-in, its call log and a tiny corpus:
    (recipe, fake, log, data)."""
    recipe = _copy_recipe("deb-en-de", root)
    fake = _fake_mtkit(root)
    return recipe, fake, root / "calls.log", _fake_corpus(root, "en", "de")


def _bump(path: Path) -> None:
    """Touch `path`, making it newer than everything made so far (but not in the future)."""
    time.sleep(0.05)
    os.utime(path)


@needs_make
def test_deb_recipe_runs_every_stage_once_then_nothing(tmp_path: Path) -> None:
    recipe, fake, log, data = _deb_en_de(tmp_path)

    calls = _make(recipe, log, fake, f"DATA={data}", "TIME=1")
    # one prepare, a training per model, greedy + beam + attention sample per model, one score
    assert sorted(calls) == sorted(["prepare", "train", "train", *["translate"] * 6, "score"])
    assert (recipe / "work" / "data" / "train.en.gz").resolve() == data / "train.en.gz"
    assert sorted(p.name for p in (recipe / "work" / "hyp").iterdir()) == [
        "rnn.beam5.de", "rnn.greedy.de", "transformer.beam5.de", "transformer.greedy.de"]
    assert "TABLE" in (recipe / "work" / "scores.txt").read_text()
    assert list((recipe / "work" / "attention" / "rnn").glob("*.png"))

    assert _make(recipe, log, fake, f"DATA={data}", "TIME=1") == []  # finished: nothing to do

    # a longer budget retrains (resuming) and redoes what depends on the model, not prepare
    calls = _make(recipe, log, fake, f"DATA={data}", "TIME=2", "MODELS=transformer")
    assert sorted(calls) == sorted(["train", "translate", "translate", "translate", "score"])
    assert (recipe / "work" / "transformer" / "checkpoint_best.pt").read_text() == "2"

    # editing one model's config retrains that model only; prepare runs but leaves meta.json alone
    _bump(recipe / "rnn.yaml")
    calls = _make(recipe, log, fake, f"DATA={data}", "TIME=2", "MODELS=rnn")
    assert sorted(calls) == sorted(["train", "translate", "translate", "translate", "score"])
    _bump(recipe / "transformer.yaml")  # the config prepare reads: prepare runs, the RNN is not retrained
    calls = _make(recipe, log, fake, f"DATA={data}", "TIME=2")
    assert sorted(calls) == sorted(["prepare", "train", "translate", "translate", "translate", "score"])
    assert _make(recipe, log, fake, f"DATA={data}", "TIME=2") == []

    # new training data: prepare rewrites meta.json, so the model starts again from scratch
    _bump(data / "train.de.gz")
    calls = _make(recipe, log, fake, f"DATA={data}", "TIME=2", "MODELS=rnn")
    assert sorted(calls) == sorted(["prepare", "train", "translate", "translate", "translate", "score"])

    # the corpus elsewhere (even with older files): the links follow and everything is redone
    moved = tmp_path / "moved"
    shutil.copytree(data, moved, copy_function=shutil.copy2)
    calls = _make(recipe, log, fake, f"DATA={moved}", "TIME=2")
    assert sorted(calls) == sorted(["prepare", "train", "train", *["translate"] * 6, "score"])
    assert (recipe / "work" / "data" / "dev.de").resolve() == moved / "dev.de"
    assert _make(recipe, log, fake, f"DATA={moved}", "TIME=2") == []


@pytest.mark.slow
@needs_make
def test_student_recipe_distils_trains_exports_scores_and_reruns_only_what_is_stale(tmp_path: Path) -> None:
    recipe, fake, log, data = _deb_en_de(tmp_path)
    work = recipe / "work" / "student"
    common = ("student", f"DATA={data}", "TIME=1", "SPEED_RUNS=1")
    # the teacher (prepare + train), its int8 export and translation of the training source, the
    # distilled corpus, both corpora prepared, three students (two distilled, the first also on the
    # original pairs: the control), 8 exports (4 systems, with and without shortlist), 16 test
    # translations and 4 scores, then the table's 16 timed runs
    calls = _make(recipe, log, fake, *common, "STUDENT_TIME=1")
    assert sorted(calls) == sorted(["prepare", "train", "export", "translate", "distill", "prepare",
                                    "prepare", "train", "train", "train", *["export"] * 7,
                                    *["translate"] * 32, *["score"] * 4])
    assert sorted(p.name for p in (work / "export").iterdir()) == sorted(
        f"{m}-int8{sl}" for m in ("teacher", "student-base-distilled", "student-tiny-distilled",
                                  "student-base-original") for sl in ("", "-sl"))
    assert (work / "export" / "student-tiny-distilled-int8-sl" / "vmap.txt").is_file()
    assert not (work / "export" / "student-tiny-distilled-int8" / "vmap.txt").exists()
    assert (work / "distilled.de").read_text() == (work / "teacher.hyp").read_text()
    table = (work / "table.md").read_text()
    assert "| teacher-int8 | greedy |" in table and "| student-base-original-int8-sl | beam5 |" in table
    assert _make(recipe, log, fake, *common, "STUDENT_TIME=1", "SPEED_RUNS=1") == []

    # a longer student budget: the students resume; the teacher and the corpus stay
    calls = _make(recipe, log, fake, *common, "STUDENT_TIME=2")
    assert sorted(calls) == sorted(["train"] * 3 + ["export"] * 6 + ["translate"] * (12 + 16) + ["score"] * 4)
    assert (work / "student-tiny-distilled" / "checkpoint_best.pt").read_text() == "2"
    # another shortlist: only the shortlisted exports and what follows them
    calls = _make(recipe, log, fake, *common, "STUDENT_TIME=2", "SHORTLIST=20")
    assert sorted(calls) == sorted(["export"] * 4 + ["translate"] * (8 + 16) + ["score"] * 4)
    # fewer lines to distil: the teacher translates again, the students start afresh
    calls = _make(recipe, log, fake, *common, "STUDENT_TIME=2", "SHORTLIST=20", "STUDENT_LINES=1")
    assert sorted(calls) == sorted(["translate", "distill", "prepare", "prepare", "train", "train", "train",
                                    *["export"] * 6, *["translate"] * (12 + 16), *["score"] * 4])
    assert _make(recipe, log, fake, *common, "STUDENT_TIME=2", "SHORTLIST=20", "STUDENT_LINES=1") == []
    # another filter: distil again (not translate), retrain the distilled students, not the control
    now = (*common, "STUDENT_TIME=2", "SHORTLIST=20", "STUDENT_LINES=1", "DISTILL_ARGS=--min-confidence 0.5")
    calls = _make(recipe, log, fake, *now)
    assert sorted(calls) == sorted(["distill", "prepare", "train", "train", *["export"] * 4,
                                    *["translate"] * (8 + 16), *["score"] * 4])
    assert _make(recipe, log, fake, *now) == []


@pytest.mark.slow
@needs_make
def test_deb_mrt_recipe_tunes_three_stages_scores_them_and_reruns_nothing(tmp_path: Path) -> None:
    recipe, fake, log, data = _deb_en_de(tmp_path)
    shutil.copy(RECIPES / "confidence.py", recipe.parent / "confidence.py")

    fake_python = _fake_sacrebleu(tmp_path)

    def make(*variables: str, real_sacrebleu: bool = False) -> list[str]:
        """Run make; with ``real_sacrebleu``, sacrebleu's own command line scores the first output it is
        asked to (the one run that shows the recipe's call works), a stand-in every other."""
        log.write_text("")
        env = _make_env(log)
        if real_sacrebleu:
            env["REAL_SACREBLEU_ONCE"] = str(tmp_path / "real-sacrebleu-ran")
        proc = subprocess.run(["make", "--no-print-directory", f"MTKIT={fake}", f"PYTHON={fake_python}",
                               f"DATA={data}", "MODELS=transformer", "TIME=1", *variables], cwd=recipe,
                              env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return sorted(line.split()[0] for line in log.read_text().splitlines())

    # the parent and its beam output; stage 1's two fine-tunes, the anneal, stage 2's three fine-tunes,
    # stage 3's one, and their outputs (stage 3 and the anneal also at MRT3_LENGTH_PENALTY); nine tables
    assert make("mrt", real_sacrebleu=True) == sorted(
        ["prepare", *["train"] * 8, *["translate"] * 10, *["score"] * 9])
    assert (tmp_path / "real-sacrebleu-ran").is_dir()
    scores = (recipe / "work" / "mrt-scores.txt").read_text()
    hyp = "work/hyp/{}.beam5.de".format
    # sacrebleu's own line for the first output: its score of the stand-in's copied source, not the fake's
    sacrebleu_lines = [line for line in scores.splitlines() if "ratio = " in line]
    assert sacrebleu_lines[0].startswith(f"{hyp('transformer')}: BLEU|nrefs:1|"), sacrebleu_lines[0]
    assert "BLEU = 10.00 40.0/20.0/10.0/5.0" not in sacrebleu_lines[0]
    assert all("BLEU = 10.00 40.0/20.0/10.0/5.0" in line for line in sacrebleu_lines[1:])
    for table in (("transformer", "mrt-control", "mrt"), ("mrt-control", "mrt"), ("transformer", "anneal"),
                  ("anneal", "mrt2-control", "mrt2", "anneal-continued"), ("mrt2-control", "mrt2"),
                  ("anneal-continued", "mrt2"), ("anneal", "mrt3")):
        assert "TABLE " + " ".join(map(hyp, table)) + " work/data/test.de" in scores
    assert scores.count("TABLE ") == 7
    assert scores.count("ratio = ") == 8  # each output's length ratio
    assert make("mrt") == []
    assert make("mrt3") == []
    stage3_tables = (recipe / "work" / "mrt3-scores.txt").read_text()
    assert "TABLE " + " ".join(map(hyp, ("anneal", "mrt3"))) in stage3_tables
    lp_hyp = "work/hyp/{}.beam5.lp1.5.de".format  # both decoded at the length penalty MRT3_LENGTH_PENALTY
    assert "TABLE " + " ".join(map(lp_hyp, ("anneal", "mrt3"))) in stage3_tables
    assert stage3_tables.count("ratio = ") == 4
    assert make("mrt3", "MRT3_TIME=5") == sorted(  # stage 3 resumes, alone
        ["train", "translate", "translate", "score", "score"])
    assert (recipe / "work" / "mrt3" / "checkpoint_best.pt").read_text() == "5"
    # a longer budget for stage 1: its two fine-tunes resume, stages 2 and 3 are left alone
    stage3 = "MRT3_TIME=5"
    assert make("mrt", "MRT_TIME=2", stage3) == sorted([*["train"] * 2, *["translate"] * 2, *["score"] * 7])
    assert (recipe / "work" / "mrt" / "checkpoint_best.pt").read_text() == "2"
    _bump(recipe / "mrt.yaml")  # a new MRT config: that fine-tune alone starts again
    assert make("mrt", "MRT_TIME=2", stage3) == sorted(["train", "translate", *["score"] * 7])
    _bump(recipe / "mrt-control.yaml")  # a new stage-1 control: no other model stands on it
    assert make("mrt", "MRT_TIME=2", stage3) == sorted(["train", "translate", *["score"] * 7])
    # the anneal resumes, stages 2 and 3 restart
    assert make("mrt", "MRT_TIME=2", "MRT_ANNEAL_TIME=3", stage3) == sorted(
        [*["train"] * 5, *["translate"] * 7, *["score"] * 9])
    assert make("mrt", "MRT_TIME=2", "MRT_ANNEAL_TIME=3", "MRT2_TIME=4", stage3) == sorted(  # stage 2 resumes
        [*["train"] * 3, *["translate"] * 3, *["score"] * 7])
    assert (recipe / "work" / "mrt2" / "checkpoint_best.pt").read_text() == "4"
    _bump(recipe / "mrt3.yaml")  # a new stage-3 config: that fine-tune alone starts again
    assert make("mrt", "MRT_TIME=2", "MRT_ANNEAL_TIME=3", "MRT2_TIME=4", stage3) == sorted(
        ["train", "translate", "translate", *["score"] * 9])
    _bump(recipe / "transformer.yaml")  # a new parent: everything on top of it starts again
    assert make("mrt", "MRT_TIME=2", "MRT_ANNEAL_TIME=3", "MRT2_TIME=4", stage3) == sorted(
        ["prepare", *["train"] * 8, *["translate"] * 10, *["score"] * 9])
    assert make("mrt", "MRT_TIME=2", "MRT_ANNEAL_TIME=3", "MRT2_TIME=4", stage3) == []
    assert make("confidence", "MRT_TIME=2", "MRT_ANNEAL_TIME=3", "MRT2_TIME=4") == ["translate", "translate"]
    assert "Spearman" in (recipe / "work" / "confidence.txt").read_text()
    assert make("confidence", "MRT_TIME=2", "MRT_ANNEAL_TIME=3", "MRT2_TIME=4") == []


FAKE_APERTIUM = """#!/bin/sh
# stand-in for Debian's apertium: lists its pairs, "translates" by upper-casing
if [ "$1" = "-l" ]; then printf '  eng-spa\\n  spa-eng\\n'; exit 0; fi
[ "$1" = "-u" ] && [ "$2" = "eng-spa" ] || exit 2
tr a-z A-Z
"""


@needs_make
def test_en_es_recipe_scores_apertium_when_it_is_installed(tmp_path: Path) -> None:
    recipe = _copy_recipe("deb-en-es", tmp_path)
    fake = _fake_mtkit(tmp_path)
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "apertium").write_text(FAKE_APERTIUM)
    (tools / "apertium").chmod(0o755)
    data = _fake_corpus(tmp_path, "en", "es")
    log = tmp_path / "calls.log"

    calls = _make(recipe, log, fake, f"DATA={data}", "MODEL=rnn", path=tools)
    assert sorted(calls) == sorted(["prepare", "train", "translate", "translate", "translate", "score"])
    assert (recipe / "work" / "hyp" / "apertium.es").read_text() == (data / "test.en").read_text().upper()
    assert "work/hyp/apertium.es" in (recipe / "work" / "scores.txt").read_text()
    assert _make(recipe, log, fake, f"DATA={data}", "MODEL=rnn", path=tools) == []


@needs_make
def test_deb_recipe_names_a_missing_corpus(tmp_path: Path) -> None:
    recipe = _copy_recipe("deb-en-es", tmp_path)
    proc = subprocess.run(["make", "--no-print-directory", f"DATA={tmp_path / 'nowhere'}", "data"],
                          cwd=recipe, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert f"{tmp_path / 'nowhere'}/train.en.gz not found; set DATA=" in proc.stderr


@needs_make
def test_deb_recipe_rejects_an_unknown_model(tmp_path: Path) -> None:
    recipe = _copy_recipe("deb-en-de", tmp_path)
    proc = subprocess.run(["make", "-n", "MODEL=lstm"], cwd=recipe, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode != 0 and "no lstm.yaml" in proc.stderr


@needs_make
def test_recipes_insist_on_running_in_their_directory(tmp_path: Path) -> None:
    recipe = _copy_recipe("deb-en-de", tmp_path)
    proc = subprocess.run(["make", "-n", "-f", str(recipe / "Makefile")], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode != 0 and "make -C" in proc.stderr


@needs_make
@pytest.mark.parametrize(("mtkit", "python"), [
    ("{venv}/bin/python -m mtkit", "{venv}/bin/python"),  # the interpreter that runs mtkit runs the helpers
    ("{venv}/bin/mtkit", "{venv}/bin/python3"),  # a venv's script: that venv's interpreter
    ("mtkit", "python3"),  # from the PATH: the PATH's interpreter
    ("", "python3"),
])
def test_recipes_run_their_helpers_with_the_python_that_runs_mtkit(tmp_path: Path, mtkit: str,
                                                                   python: str) -> None:
    """A venv that is not first on the PATH (MTKIT=.venv/bin/python -m mtkit) is used for the tables and
    sacrebleu too, not the PATH's python3, which may lack mtkit's dependencies."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name in ("python", "python3", "mtkit"):
        (venv / "bin" / name).touch()
    recipe = _copy_recipe("deb-en-de", tmp_path)
    given = [f"MTKIT={mtkit.format(venv=venv)}"] if mtkit else []
    inherited = ("MAKELEVEL", "MAKEFLAGS", "MFLAGS", "PYTHON", "MTKIT")
    env = {k: v for k, v in os.environ.items() if k not in inherited}
    proc = subprocess.run(["make", "--no-print-directory", *given, "--eval", "show-python: ; @echo $(PYTHON)",
                           "show-python"], cwd=recipe, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == python.format(venv=venv)


@needs_make
def test_demo_recipe_scores_against_the_copy_baseline_and_reruns_nothing(tmp_path: Path) -> None:
    recipe = _copy_recipe("demo", tmp_path)
    fake = _fake_mtkit(tmp_path)
    log = tmp_path / "calls.log"
    data = recipe / "work" / "en-es" / "data"  # as fetch_bible.py leaves it (no download in tests)
    data.mkdir(parents=True)
    for split in ("train", "dev", "test"):
        for lang in ("en", "es"):
            (data / f"{split}.{lang}").write_text(f"a {split} verse in {lang} with enough words here\n")
    (data / "SOURCE.txt").write_text("test corpus\n")

    calls = _make(recipe, log, fake, "SRC=en", "TGT=es", "TIME=1")
    assert sorted(calls) == sorted(["prepare", "train", "translate", "translate", "score"])
    scores = (recipe / "work" / "en-es" / "scores.txt").read_text()
    # the copy-the-source baseline is scored first, as the baseline of the significance test
    assert scores.index("copy-source.es") < scores.index("mtkit.beam5.es")
    baseline = recipe / "work" / "en-es" / "hyp" / "copy-source.es"
    assert baseline.read_text() == (data / "test.en").read_text()
    assert _make(recipe, log, fake, "SRC=en", "TGT=es", "TIME=1") == []


@needs_make
def test_deb_gpu_mrt_recipe_tunes_four_side_by_side_from_the_anneal(tmp_path: Path) -> None:
    recipe, fake, log, data = _deb_en_de(tmp_path)

    def make(*variables: str) -> list[str]:
        return sorted(_make(recipe, log, fake, f"DATA={data}", "MODELS=transformer", "TIME=1", "mrt-gpu",
                            *variables))

    # the parent, its anneal, the four GPU fine-tunes; five outputs (the anneal's too); three tables
    assert make() == sorted(["prepare", *["train"] * 6, *["translate"] * 5, *["score"] * 3])
    commands = log.read_text()
    assert "--set training.model_dir=work/gpu-mrt2-lr1e-4" in commands
    assert commands.count("--set training.max_tokens=16384") == 4
    assert commands.count("--set training.lr=0.0001") == 1
    assert commands.count("--device cuda --precision fp32") == 5
    scores = (recipe / "work" / "mrt-gpu-scores.txt").read_text()
    assert "TABLE work/hyp/gpu-anneal.beam5.de work/hyp/gpu-mrt2.beam5.de" in scores
    assert make() == []
    # a new time budget: the four start afresh and are translated and scored again; the anneal stays
    assert make("MRT_GPU_TIME=2") == sorted([*["train"] * 4, *["translate"] * 4, *["score"] * 3])
    assert (recipe / "work" / "gpu-mrt2" / "checkpoint_best.pt").read_text() == "2"


# ------------------------------------------------------------------------------------- multilingual
def _deb_pair(data: Path, lang: str, words: dict[str, str]) -> None:
    """A tiny deb-en-LANG corpus: ten English sentences shared with the other corpus, one of its own."""
    import gzip

    d = data / f"deb-en-{lang}"
    d.mkdir(parents=True)
    english = [f"shared sentence number {i}" for i in range(10)] + [f"only in {lang}"]
    with gzip.open(d / "train.en.gz", "wt") as f:
        f.write("".join(f"{e}\n" for e in english))
    with gzip.open(d / f"train.{lang}.gz", "wt") as f:
        f.write("".join(f"{words[lang]} {e}\n" for e in english))
    for split in ("dev", "test"):  # the first shared sentence is held out by this corpus
        (d / f"{split}.en").write_text("shared sentence number 0\n")
        (d / f"{split}.{lang}").write_text(f"{words[lang]} 0\n")


@pytest.mark.slow
@needs_make
def test_multi_recipe_runs_every_stage_once_then_nothing(tmp_path: Path) -> None:
    pytest.importorskip("py3langid")  # the off-target rate (mtkit.langid)
    recipe = _copy_recipe("deb-multi", tmp_path)
    fake, log, data = _fake_mtkit(tmp_path), tmp_path / "calls.log", tmp_path / "shared"
    for lang, word in (("de", "Satz"), ("es", "frase")):
        _deb_pair(data, lang, {lang: word})
    args = (f"DATA={data}", "TIME=1", "TEST_SENTENCES=3", "DEV_SENTENCES=2")

    calls = _make(recipe, log, fake, *args)
    # five data-bins and models; four directions each by two systems, two zero-shot ones direct and
    # through English; a table per direction
    assert sorted(calls) == sorted(["prepare"] * 5 + ["train"] * 5 + ["translate"] * 12 + ["score"] * 6)
    counts = json.loads((recipe / "work" / "data" / "counts.json").read_text())
    assert counts["test"] == 3 and counts["en-de"]["kept"] == 11 - 1 - 5  # held out: original 0, 3way 5
    test_en = (recipe / "work" / "data" / "test.3way.en").read_text().splitlines()
    assert len(test_en) == 3 and "shared sentence number 0" not in test_en
    kept = (recipe / "work" / "data" / "train.en-es.en").read_text().splitlines()
    assert not set(kept) & set(test_en) and "only in es" in kept
    assert (recipe / "work" / "multi" / "checkpoint_best.pt").read_text() == "4"  # 4 × TIME
    scores = (recipe / "work" / "scores.txt").read_text()
    assert scores.count("TABLE") == 6 and scores.count("off-target") == 4
    # one offtarget.py run for the table, each file against the language its direction writes
    assert scores.count("lines not es;") == scores.count("lines not de;") == 2

    assert _make(recipe, log, fake, *args) == []  # finished: nothing to do
    calls = _make(recipe, log, fake, *args[:1], "TIME=2", *args[2:])  # a longer budget resumes all five
    assert sorted(calls) == sorted(["train"] * 5 + ["translate"] * 12 + ["score"] * 6)
    assert (recipe / "work" / "multi" / "checkpoint_best.pt").read_text() == "8"
    # the tag as the decoder's first input, against the source tag: one more model at MULTI_TIME
    calls = _make(recipe, log, fake, *args[:1], "TIME=2", *args[2:], "tags")
    assert sorted(calls) == sorted(["prepare", "train"] + ["translate"] * 6 + ["score"] * 6)
    assert (recipe / "work" / "multi-decoder" / "checkpoint_best.pt").read_text() == "8"
    tags = (recipe / "work" / "tags.txt").read_text()
    assert tags.count("TABLE") == 6 and tags.count("off-target") == 2
