"""Long translation jobs: `--resume` after kills equals an uninterrupted run, `--shard K/N` outputs
merged by `mtkit merge-shards` equal the unsharded output, torchrun ranks equal one process.

One-thread fp32 decoding is meant not to depend on how sentences are batched, so the comparisons are
byte for byte, but for near-ties: chunks, shards and resumed runs batch sentences differently, and on
some CPU kind that rounding may break a near-tie the other way. `same_output` lets at most 1% of the
lines differ, each one a near-tie in its search (tests/near_ties.py), and nothing else.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mtkit.decode.translator import LoadOptions, SearchOptions, Translator
from mtkit.errors import ConfigError, DataError
from mtkit.translate import SIDECAR, OutputOptions, merge_shard_outputs, run_translate

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import run_mtkit  # noqa: E402
from near_ties import check_texts_same_or_near_tie  # noqa: E402
from test_translator import make_model_dir, sentences  # noqa: E402

EXACT = ["--device", "cpu", "--precision", "fp32", "--threads", "1"]
LINES = 300


def exact_load() -> LoadOptions:
    return LoadOptions(device="cpu", precision="fp32", threads=1)


def translate(model: Path, src: Path, out: Path, max_tokens: int = 16000, nbest: int = 1,
              **options) -> int:
    return run_translate(model, str(src), str(out), exact_load(),
                         SearchOptions(nbest=nbest, max_tokens=max_tokens), OutputOptions(**options))


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> dict[str, Path]:
    """A tiny model, an input of LINES lines (some empty) and its uninterrupted translation."""
    root = tmp_path_factory.mktemp("job")
    model = make_model_dir(root / "model", beam_size=3, max_len_a=1.0, max_len_b=4)
    lines = sentences(LINES, seed=5)
    for i in range(0, LINES, 37):
        lines[i] = ""
    src = root / "in.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    reference = root / "reference.txt"
    assert translate(model, src, reference) == LINES
    return {"model": model, "src": src, "reference": reference, "root": root}


def same_output(model: Path, sources: list[str], expected: bytes, got: bytes) -> None:
    """``got`` is ``expected`` (the translations of ``sources``, one line each) byte for byte, or
    differs only in near-ties (see the module docstring)."""
    if got == expected:
        return
    want, have = expected.decode("utf-8").split("\n"), got.decode("utf-8").split("\n")
    assert len(have) == len(want) == len(sources) + 1, (len(have), len(want), len(sources))
    translator = Translator(model, load=exact_load())
    check_texts_same_or_near_tie(translator, [*sources, ""], want, have,
                                 max_differing=max(1, len(sources) // 100))


def source_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]


def env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def whole_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


# ------------------------------------------------------------------------------------------- resume
@pytest.mark.slow
def test_killed_resume_runs_end_equal_to_an_uninterrupted_run(job, tmp_path):
    # the job's first 120 lines (four of them empty) and their lines of its uninterrupted translation:
    # each line costs its own search here, so more lines would only repeat what these test
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    sources = source_lines(job["src"])[:120]
    src.write_text("".join(line + "\n" for line in sources), encoding="utf-8")
    reference = b"".join(job["reference"].read_bytes().splitlines(keepends=True)[:len(sources)])
    # --max-tokens 12 with beam 3: chunks of 4 lines (and batches of one), so the output grows while the
    # job runs
    args = ["translate", "-m", str(job["model"]), "-i", str(src), "-o", str(out), "--resume",
            "--max-tokens", "12", *EXACT]
    rng = random.Random(0)
    kills, runs = [], 0
    while runs < 10 and len(kills) < 3:  # three processes killed mid-way, the last run in-process
        runs += 1
        done = whole_lines(out)
        target = rng.randint(done + 4, done + 36)
        proc = subprocess.Popen([sys.executable, "-m", "mtkit", *args], env=env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while proc.poll() is None and whole_lines(out) < target and time.monotonic() < deadline:
            time.sleep(0.005)
        if proc.poll() is None:
            proc.kill()  # SIGKILL: no cleanup runs
            proc.wait()
            kills.append(whole_lines(out))
            continue
        assert proc.returncode == 0, proc.stderr.read().decode()[-2000:]
    assert len(kills) >= 3 and all(0 < k < len(sources) for k in kills), kills
    finished = run_mtkit(*args)
    assert finished.returncode == 0, finished.stderr[-2000:]
    same_output(job["model"], sources, reference, out.read_bytes())


def test_torn_last_line_is_redone_and_only_the_rest_is_translated(job, tmp_path):
    reference = job["reference"].read_bytes()
    cut = sum(len(line) for line in reference.splitlines(keepends=True)[:120])
    out = tmp_path / "out.txt"
    out.write_bytes(reference[:cut] + b"torn half of a transl")
    assert translate(job["model"], job["src"], out, resume=True) == LINES - 120
    same_output(job["model"], source_lines(job["src"]), reference, out.read_bytes())
    out.write_bytes(reference)
    # a complete output is left as it is, without loading the model
    assert translate(tmp_path / "no-model", job["src"], out, resume=True) == 0
    assert out.read_bytes() == reference


def test_nbest_resume_counts_whole_groups(job, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("".join(job["src"].read_text(encoding="utf-8").splitlines(keepends=True)[:40]),
                   encoding="utf-8")
    reference, out = tmp_path / "reference.txt", tmp_path / "out.txt"
    translate(job["model"], src, reference, nbest=2)
    rows = reference.read_bytes().splitlines(keepends=True)
    assert len(rows) == 80
    out.write_bytes(b"".join(rows[:21]) + rows[21][:5])  # 10 groups, half a group, a torn line
    assert translate(job["model"], src, out, nbest=2, resume=True) == 30
    assert out.read_bytes() == reference.read_bytes()
    # the n-best index of the last group must be the input line it stands for
    out.write_bytes(b"".join(rows[:20]))
    with pytest.raises(DataError, match="not the nbest translation of input line 20"):
        translate(job["model"], src, out, nbest=2, resume=True, shard="1/2")


def test_output_longer_than_the_input_is_an_error_that_changes_nothing(job, tmp_path):
    out = tmp_path / "out.txt"
    content = job["reference"].read_bytes() + b"one line too many\n"
    out.write_bytes(content)
    with pytest.raises(DataError, match=f"has {LINES + 1} lines, more than the translations .*not a partial"):
        translate(job["model"], job["src"], out, resume=True)
    assert out.read_bytes() == content


def test_resume_needs_a_file_input_and_a_plain_file_output(job, tmp_path):
    for src, out, message in ((job["src"], "-", "needs a file output"),
                              ("-", tmp_path / "out.txt", "needs a file input"),
                              (job["src"], tmp_path / "out.txt.gz", "compressed")):
        with pytest.raises(ConfigError, match=message):
            translate(job["model"], src, out, resume=True)
    with pytest.raises(ConfigError, match="needs a file output"):
        translate(job["model"], job["src"], "-", shard="0/2")


def test_a_failing_run_leaves_out_untouched_without_resume_and_a_prefix_with_it(job, tmp_path, monkeypatch):
    original = Translator.translate_chunk
    calls = {"n": 0}

    def fail_third_chunk(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # what Ctrl-C raises mid-run
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate_chunk", fail_third_chunk)
    out = tmp_path / "out.txt"
    out.write_bytes(b"an earlier result\n")
    with pytest.raises(KeyboardInterrupt):
        translate(job["model"], job["src"], out, max_tokens=12)
    assert out.read_bytes() == b"an earlier result\n"  # temp file + rename: nothing written
    out.unlink()
    calls["n"] = 0
    with pytest.raises(KeyboardInterrupt):
        translate(job["model"], job["src"], out, max_tokens=12, resume=True)
    reference = job["reference"].read_bytes().splitlines(keepends=True)
    same_output(job["model"], source_lines(job["src"])[:8], b"".join(reference[:8]),  # two chunks of 4
                out.read_bytes())  # lines, flushed in order


# ------------------------------------------------------------------------------------------- shards
def test_shards_merged_in_any_order_equal_the_unsharded_output(job, tmp_path):
    parts = [tmp_path / f"part{k}.txt" for k in range(3)]
    for k, part in enumerate(parts):
        assert translate(job["model"], job["src"], part, shard=f"{k}/3") == len(range(k, LINES, 3))
        record = json.loads(Path(f"{part}{SIDECAR}").read_text(encoding="utf-8"))
        assert record == {"shard": k, "of": 3, "input": str(job["src"].resolve()), "input_lines": LINES,
                          "lines_per_input": 1, "format": "text"}
    reference = job["reference"].read_bytes().splitlines(keepends=True)
    same_output(job["model"], source_lines(job["src"])[1::3], b"".join(reference[1::3]),  # round robin:
                parts[1].read_bytes())  # lines 1, 4, 7, ...
    merged = tmp_path / "merged.txt"
    assert merge_shard_outputs([str(parts[2]), str(parts[0]), str(parts[1])], str(merged)) == LINES
    same_output(job["model"], source_lines(job["src"]), job["reference"].read_bytes(), merged.read_bytes())

    # a shard resumes its own output: half of it and a torn line, then --resume --shard
    rows = parts[2].read_bytes().splitlines(keepends=True)
    parts[2].write_bytes(b"".join(rows[:50]) + rows[50][:3])
    assert translate(job["model"], job["src"], parts[2], shard="2/3", resume=True) == len(rows) - 50
    same_output(job["model"], source_lines(job["src"])[2::3], b"".join(rows), parts[2].read_bytes())


def test_shards_and_merge_from_the_command_line(job, tmp_path):
    from typer.testing import CliRunner

    from mtkit.cli.app import app

    runner = CliRunner()
    parts = [str(tmp_path / f"part{k}.txt") for k in range(3)]
    for k in (1, 0, 2):
        res = runner.invoke(app, ["translate", "-m", str(job["model"]), "-i", str(job["src"]), "-o", parts[k],
                                  "--shard", f"{k}/3", *EXACT])
        assert res.exit_code == 0, (res.output, res.exception)
    merged = tmp_path / "merged.txt"
    res = runner.invoke(app, ["merge-shards", *parts, "-o", str(merged)])
    assert res.exit_code == 0, (res.output, res.exception)
    same_output(job["model"], source_lines(job["src"]), job["reference"].read_bytes(), merged.read_bytes())
    res = runner.invoke(app, ["translate", "-m", str(job["model"]), "-i", str(job["src"]), "-o", parts[0],
                              "--shard", "3/3"])
    assert res.exit_code != 0 and "expected K/N with 0 <= K < N" in repr(res.exception)


def test_merge_refuses_incomplete_or_mixed_shards(job, tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("".join(job["src"].read_text(encoding="utf-8").splitlines(keepends=True)[:10]),
                     encoding="utf-8")
    parts = [tmp_path / f"part{k}.txt" for k in range(2)]
    for k, part in enumerate(parts):
        translate(job["model"], short, part, shard=f"{k}/2")
    other = tmp_path / "other.txt"
    translate(job["model"], job["src"], other, shard="1/2")
    unfinished = tmp_path / "unfinished.txt"
    unfinished.write_text("a\n", encoding="utf-8")
    twin = tmp_path / "twin.txt"
    twin.write_bytes(parts[1].read_bytes())
    Path(f"{twin}{SIDECAR}").write_bytes(Path(f"{parts[1]}{SIDECAR}").read_bytes())
    merged = tmp_path / "merged.txt"
    # a glob that catches the sidecars too names each shard once
    assert merge_shard_outputs(sorted(str(p) for p in tmp_path.glob("part*")), str(merged)) == 10
    same_output(job["model"], source_lines(short), b"".join(job["reference"].read_bytes().splitlines(
        keepends=True)[:10]), merged.read_bytes())
    merged.unlink()
    cases = [([parts[0]], "shard 1/2 of .* missing"),
             ([parts[0], parts[1], twin], "shard 1/2 given twice"),
             ([parts[0], other], "shards of different jobs"),
             ([parts[0], unfinished], "no unfinished.txt.shard.json: not a finished shard")]
    for inputs, message in cases:
        with pytest.raises(DataError, match=message):
            merge_shard_outputs([str(p) for p in inputs], str(merged))
    parts[1].write_text("".join(parts[1].read_text(encoding="utf-8").splitlines(keepends=True)[:-1]),
                        encoding="utf-8")
    with pytest.raises(DataError, match="part1.txt has 4 lines but shard 1/2 of .* needs 5"):
        merge_shard_outputs([str(p) for p in parts], str(merged))
    assert not merged.exists()


# ----------------------------------------------------------------------------------------- torchrun
@pytest.mark.slow
def test_two_torchrun_ranks_equal_one_process(job, tmp_path):
    lines = job["src"].read_text(encoding="utf-8").splitlines()[:100]
    lines[3] = " ".join(random.Random(3).choice(["the", "house", "cat", "river", "."]) for _ in range(500))
    src, reference, out = tmp_path / "in.txt", tmp_path / "reference.txt", tmp_path / "out.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    translate(job["model"], src, reference)
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "mtkit", "translate", "-m", str(job["model"]), "-i", str(src), "-o", str(out), *EXACT],
        env=env(), capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    same_output(job["model"], lines, reference.read_bytes(), out.read_bytes())
    # the over-long input line 3 is the 2nd line of shard 1/2: rank 1 translated it, rank 0 did not
    assert f"{src} [shard 1/2]:2: " in result.stderr and "[shard 0/2]" not in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt", "out.txt", "reference.txt"]
