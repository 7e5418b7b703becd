"""The command line as a user meets it: bad input gives one `error:` line on stderr and a non-zero exit,
never a traceback; the bpe/prepare/score commands work end to end. The commands run in-process
(tests/cli_helpers.py); the tests of the process itself (`python -m mtkit`, a closed pipe) start one."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_helpers import Result, assert_one_error_line, run_mtkit, run_mtkit_process

WORDS = ["wind", "rain", "sun", "snow", "cloud", "storm", "sky", "sea", "land", "hill"]


def mtkit(*args: str, stdin: str | None = None, cwd: Path | None = None) -> Result:
    return run_mtkit(*args, input=stdin, cwd=cwd)


assert_error = assert_one_error_line


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def experiment(tmp_path: Path) -> Path:
    """A tiny parallel corpus and a config for it; returns the config path (the cwd for relative paths)."""
    rng = random.Random(0)
    for split, n in (("train", 60), ("dev", 8)):
        pairs = [(" ".join(rng.choices(WORDS, k=rng.randint(2, 6))),
                  " ".join(rng.choices(WORDS, k=rng.randint(2, 6)))) for _ in range(n)]
        write_lines(tmp_path / f"{split}.en", [a for a, _ in pairs])
        write_lines(tmp_path / f"{split}.de", [b for _, b in pairs])
    config = {"data": {"train_src": "train.en", "train_tgt": "train.de", "dev_src": "dev.en",
                       "dev_tgt": "dev.de", "dir": "data-bin"},
              "bpe": {"vocab_size": 60}}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def test_prepare_end_to_end_and_up_to_date(experiment: Path) -> None:
    first = mtkit("prepare", str(experiment.name), cwd=experiment.parent)
    assert first.returncode == 0, first.stderr
    assert (experiment.parent / "data-bin" / "meta.json").is_file()
    assert "train: 60 pairs" in first.stderr
    second = mtkit("prepare", str(experiment.name), cwd=experiment.parent)
    assert second.returncode == 0 and "up to date" in second.stderr


def test_mismatched_line_counts(experiment: Path) -> None:
    de = experiment.parent / "train.de"
    write_lines(de, de.read_text(encoding="utf-8").splitlines()[:-1])
    proc = mtkit("prepare", experiment.name, cwd=experiment.parent)
    line = assert_error(proc)
    assert line == "error: train.en has 60 lines but train.de has 59"  # the files named as given


def test_python_m_mtkit_exits_with_the_errors_status_and_one_line(experiment: Path) -> None:
    """The entry point a user runs: the error's exit status and its one line reach the shell."""
    (experiment.parent / "dev.de").unlink()
    proc = run_mtkit_process("prepare", experiment.name, cwd=experiment.parent)
    assert assert_error(proc) == "error: file not found: dev.de" and proc.returncode == 3


def test_unknown_config_key(experiment: Path) -> None:
    proc = mtkit("prepare", str(experiment), "--set", "training.lr_rate=0.1")
    assert_error(proc, "unknown key 'training.lr_rate'", "did you mean 'lr'?")
    assert proc.returncode == 2
    config = yaml.safe_load(experiment.read_text(encoding="utf-8"))
    config["data"]["max_lenght"] = 10
    experiment.write_text(yaml.safe_dump(config), encoding="utf-8")
    assert_error(mtkit("prepare", str(experiment)), "unknown key 'data.max_lenght'", "'max_len'")


def test_missing_files(experiment: Path, tmp_path: Path) -> None:
    assert_error(mtkit("prepare", str(tmp_path / "nope.yaml")), "config file not found", "nope.yaml")
    (experiment.parent / "dev.de").unlink()
    assert_error(mtkit("prepare", experiment.name, cwd=experiment.parent), "file not found: dev.de")
    ref = write_lines(tmp_path / "ref.txt", ["a b"])
    assert_error(mtkit("score", "--hyp", str(tmp_path / "hyp.txt"), "--ref", str(ref)),
                 "file not found", "hyp.txt")


def test_invalid_utf8_names_file_and_line(experiment: Path) -> None:
    bad = experiment.parent / "dev.en"
    bad.write_bytes(b"wind rain\nsun\nsnow \xff\n" + b"sea\n" * 5)
    assert_error(mtkit("prepare", experiment.name, cwd=experiment.parent),
                 "dev.en:3: invalid UTF-8")
    assert_error(mtkit("score", "--hyp", str(bad), "--ref", str(bad)), "dev.en:3: invalid UTF-8")


def test_bpe_commands_round_trip(tmp_path: Path) -> None:
    rng = random.Random(1)
    text = write_lines(tmp_path / "text.txt", [" ".join(rng.choices(WORDS, k=5)) for _ in range(100)])
    trained = mtkit("bpe", "train", "-i", str(text), "--vocab-size", "50",
                    "--model-prefix", str(tmp_path / "m"))
    assert trained.returncode == 0, trained.stderr
    model = str(tmp_path / "m.model")
    sample = "sun and sky\n\nstorm  over   the hill\n"
    for fmt in ("pieces", "ids"):
        enc = mtkit("bpe", "encode", "-m", model, "--format", fmt, stdin=sample)
        assert enc.returncode == 0, enc.stderr
        assert len(enc.stdout.splitlines()) == 3 and enc.stdout.splitlines()[1] == ""
        dec = mtkit("bpe", "decode", "-m", model, "--format", fmt, stdin=enc.stdout)
        assert dec.returncode == 0, dec.stderr
        # unseen letters become ⁇, whitespace is collapsed; known words come back unchanged
        assert dec.stdout.splitlines()[0].startswith("sun ")
        assert len(dec.stdout.splitlines()) == 3 and dec.stdout.splitlines()[1] == ""
    out = tmp_path / "enc.txt"
    assert mtkit("bpe", "encode", "-m", model, "-i", str(text), "-o", str(out)).returncode == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) == 100


def test_bpe_errors(tmp_path: Path) -> None:
    assert_error(mtkit("bpe", "encode", "-m", str(tmp_path / "missing.model"), stdin="x\n"),
                 "BPE model not found", "missing.model")
    text = write_lines(tmp_path / "t.txt", ["abc def"] * 10)
    assert_error(mtkit("bpe", "train", "-i", str(text), "--vocab-size", "5", "--model-prefix",
                       str(tmp_path / "m")), "Vocabulary size is smaller than required_chars")
    assert mtkit("bpe", "train", "-i", str(text), "--vocab-size", "20", "--model-prefix",
                 str(tmp_path / "m")).returncode == 0
    assert_error(mtkit("bpe", "decode", "-m", str(tmp_path / "m.model"), "--format", "ids", stdin="4 5\nx\n"),
                 "<stdin>:2: expected space-separated integer ids")


def test_bpe_output_safety(tmp_path: Path) -> None:
    """The input is never the output (not even through a link); a failing run leaves the output as it
    was; a reader that closes the pipe early (`| head`) is a normal end."""
    text = write_lines(tmp_path / "t.txt", ["sun and sky", "rain on the hill"] * 20)
    assert mtkit("bpe", "train", "-i", str(text), "--vocab-size", "30", "--model-prefix",
                 str(tmp_path / "m")).returncode == 0
    model = str(tmp_path / "m.model")
    before = text.read_bytes()
    assert_error(mtkit("bpe", "encode", "-m", model, "-i", str(text), "-o", str(text)), "is the input file")
    (tmp_path / "link.txt").symlink_to(text)
    assert_error(mtkit("bpe", "encode", "-m", model, "-i", str(text), "-o", str(tmp_path / "link.txt")),
                 "is the input file")
    assert text.read_bytes() == before
    out = write_lines(tmp_path / "out.txt", ["precious"])
    assert_error(mtkit("bpe", "decode", "-m", model, "--format", "ids", "-i",
                       str(write_lines(tmp_path / "bad.txt", ["4 5", "x"])), "-o", str(out)), "bad.txt:2")
    assert out.read_text() == "precious\n"
    proc = subprocess.Popen([sys.executable, "-m", "mtkit", "bpe", "encode", "-m", model],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # like `| head -0`: the reader is gone before the first line
    _, err = proc.communicate(("sun and sky\n" * 50_000).encode())
    assert proc.returncode == 0 and b"Traceback" not in err, err


def test_score_errors(tmp_path: Path) -> None:
    ref = write_lines(tmp_path / "ref.txt", ["a b c"] * 4)
    hyp = write_lines(tmp_path / "hyp.txt", ["a b c"] * 3)
    assert_error(mtkit("score", "--hyp", str(hyp), "--ref", str(ref)),
                 f"hypothesis {hyp} has 3 lines but reference {ref} has 4")
    assert_error(mtkit("score", "--hyp", str(ref), "--ref", str(ref), "--metrics", "bleu,meteor"),
                 "unknown metric 'meteor'")


def test_unwritable_places_are_one_line_errors(tmp_path: Path) -> None:
    """A directory that cannot be made (here: under a file) is one line naming it, for every stage."""
    blocker = write_lines(tmp_path / "afile", ["x"])
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"training": {"model_dir": str(blocker / "model")}}), encoding="utf-8")
    assert_error(mtkit("train", str(config)), str(blocker))
    metrics = tmp_path / "m"
    metrics.mkdir()
    (metrics / "metrics.jsonl").write_text('{"event": "train", "step": 1, "loss": 1.0, "nll": 1.0}\n')
    assert_error(mtkit("plot", str(metrics), "-o", str(blocker / "curves.png")), str(blocker))
