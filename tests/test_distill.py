"""`mtkit distill`: a teacher's `translate --scores` output paired line for line with its sources,
filtered as it says (and only as it says), mixed with the original when asked, refusing mismatched
files with one line; and the whole chain teacher → translate --resume → distill gives the same corpus
after a kill as without one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_helpers import Result, run_mtkit

from mtkit.errors import ConfigError, DataError
from mtkit.train.distill import DistillOptions, drop_reason, run_distill

sys.path.insert(0, str(Path(__file__).parent))
from test_translator import make_model_dir, sentences  # noqa: E402


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


SOURCES = ["the house is small", "a cat", "where are you going today my friend",
           "Configure the network interface before you start", "", "ok", "see the manual page for details"]
TEACHER = ["das Haus ist klein\t0.8000\t-0.2231", "\t0.9000\t-0.1054", "wohin\t0.7000\t-0.3567",
           "Configure the network interface before you start\t0.9500\t-0.0513", "\t1.0000\t0.0000",
           "ok\t0.9900\t-0.0101", "siehe die Handbuchseite\t0.0500\t-2.9957"]
ORIGINAL = ["das Haus ist klein", "eine Katze", "wohin gehst du heute, mein Freund",
            "Konfigurieren Sie die Netzwerkschnittstelle", "", "ok", "siehe die Handbuchseite für Details"]


def test_each_reason_drops_what_it_names_and_nothing_else():
    opts = DistillOptions(min_confidence=0.1, max_length_ratio=3.0, copy_min_chars=20)
    reasons = [drop_reason(s, t.split("\t")[0], float(t.split("\t")[1]), opts) for s, t in zip(
        SOURCES, TEACHER, strict=True)]
    assert reasons == [None, "empty", "length_ratio", "copy", None, None, "confidence"]
    # the defaults keep low confidence; a short copy ("ok") is a right translation and stays
    assert drop_reason("see the manual", "siehe", 0.01, DistillOptions()) is None
    assert drop_reason("ok", "ok", 0.9, DistillOptions(copy_min_chars=1)) == "copy"  # the threshold decides
    assert drop_reason("Read /etc/fstab now!", "Read /etc/fstab now!", 0.9, DistillOptions()) == "copy"


def test_the_corpus_pairs_each_kept_source_with_its_translation(tmp_path):
    src, hyp = write(tmp_path / "src", SOURCES), write(tmp_path / "hyp", TEACHER)
    report = run_distill(src, hyp, tmp_path / "out.en", tmp_path / "out.de",
                         DistillOptions(min_confidence=0.1), report=tmp_path / "report.json")
    assert read(tmp_path / "out.en") == [SOURCES[0], "", "ok"]
    assert read(tmp_path / "out.de") == ["das Haus ist klein", "", "ok"]
    assert (report.pairs, report.kept) == (7, 3)
    assert report.dropped == {"empty": 1, "confidence": 1, "length_ratio": 1, "copy": 1}
    saved = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert saved["dropped"] == report.dropped and saved["settings"]["min_confidence"] == 0.1
    assert "3 of 7 pairs kept" in report.summary() and "1 copy" in report.summary()


def test_mix_original_adds_every_original_pair_after_the_distilled_ones(tmp_path):
    src, hyp = write(tmp_path / "src", SOURCES), write(tmp_path / "hyp", TEACHER)
    ref = write(tmp_path / "ref", ORIGINAL)
    report = run_distill(src, hyp, tmp_path / "o.en", tmp_path / "o.de", DistillOptions(mix_original=True),
                         original_target=ref)
    kept = report.kept
    assert read(tmp_path / "o.en")[kept:] == SOURCES and read(tmp_path / "o.de")[kept:] == ORIGINAL
    assert report.original_added == len(SOURCES)
    with pytest.raises(ConfigError, match="--mix-original needs --original-target"):
        run_distill(src, hyp, tmp_path / "x.en", tmp_path / "x.de", DistillOptions(mix_original=True))


def test_mismatched_or_malformed_files_are_one_line_and_write_nothing(tmp_path):
    src = write(tmp_path / "src", SOURCES)
    short = write(tmp_path / "short", TEACHER[:-2])
    with pytest.raises(DataError, match="5 lines, but .* has more .line 6.: finish the translation"):
        run_distill(src, short, tmp_path / "a.en", tmp_path / "a.de")
    long = write(tmp_path / "long", TEACHER + ["x\t0.5\t-0.7"])
    with pytest.raises(DataError, match="more lines than"):
        run_distill(src, long, tmp_path / "a.en", tmp_path / "a.de")
    plain = write(tmp_path / "plain", [t.split("\t")[0] for t in TEACHER])
    with pytest.raises(DataError, match=r"plain:1: expected translation<TAB>confidence<TAB>log-probability"):
        run_distill(src, plain, tmp_path / "a.en", tmp_path / "a.de")
    ref = write(tmp_path / "ref", ORIGINAL[:3])
    with pytest.raises(DataError, match="ref: 3 lines"):
        run_distill(src, write(tmp_path / "hyp", TEACHER), tmp_path / "a.en", tmp_path / "a.de",
                    original_target=ref)
    assert not (tmp_path / "a.en").exists() and not (tmp_path / "a.de").exists()
    with pytest.raises(ConfigError, match="is also an input"):
        run_distill(src, tmp_path / "hyp", src, tmp_path / "a.de")
    assert read(src) == SOURCES


def mtkit(*args: str) -> Result:
    return run_mtkit(*args)


@pytest.mark.slow
def test_teacher_translate_resume_then_distill_gives_the_same_corpus_as_one_run(tmp_path):
    teacher = make_model_dir(tmp_path / "teacher", beam_size=2, max_len_a=1.0, max_len_b=4)
    src = write(tmp_path / "train.en", sentences(30, seed=5) + ["", "a cat ."])
    whole, resumed = tmp_path / "whole.hyp", tmp_path / "resumed.hyp"
    args = ["translate", "-m", str(teacher), "--beam", "2", "--scores", "--device", "cpu", "-i", str(src)]
    assert mtkit(*args, "-o", str(whole)).returncode == 0
    write(resumed, read(whole)[:11])  # what a kill after 11 lines leaves behind
    done = mtkit(*args, "-o", str(resumed), "--resume")
    assert done.returncode == 0, done.stderr
    assert read(resumed) == read(whole)
    outs = []
    for name, hyp in (("a", whole), ("b", resumed)):
        done = mtkit("distill", "--source", str(src), "--translations", str(hyp), "--out-source",
                     str(tmp_path / f"{name}.en"), "--out-target", str(tmp_path / f"{name}.de"))
        assert done.returncode == 0, done.stderr
        assert "pairs kept" in done.stderr
        outs.append((read(tmp_path / f"{name}.en"), read(tmp_path / f"{name}.de")))
    assert outs[0] == outs[1]
    # every kept pair is a source and the teacher's translation of that very line
    pairs = dict(zip(read(src), [line.split("\t")[0] for line in read(whole)], strict=True))
    assert all(pairs[s] == t for s, t in zip(*outs[0], strict=True))
    bad = mtkit("distill", "--source", str(src), "--translations", str(src), "--out-source",
                str(tmp_path / "c.en"), "--out-target", str(tmp_path / "c.de"))
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1
