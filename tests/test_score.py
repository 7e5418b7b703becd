"""Scoring: WER's fast edit distance equals plain dynamic programming; BLEU/chrF/TER equal the sacrebleu
command line; several systems get a paired bootstrap test; mismatched files are errors."""

from __future__ import annotations

import ast
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import Result, run_mtkit

from mtkit import score as score_mod
from mtkit.errors import DataError, MtkitError
from mtkit.score import WER, edit_distance, parse_metrics, score_files

VOCAB = ["the", "a", "cat", "dog", "sat", "on", "mat", "house", "tree", "big", "small", "red", "green", "and",
         "or", ",", "."]


def naive_distance(a: list[str], b: list[str]) -> int:
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
        prev = cur
    return prev[-1]


def test_edit_distance_matches_dynamic_programming() -> None:
    rng = random.Random(0)
    for trial in range(400):
        alphabet = VOCAB[: rng.choice([2, 4, len(VOCAB)])]  # small alphabets: many repeated tokens
        longest = 150 if trial % 20 == 0 else 12  # sometimes far past a 64-bit word
        a = [rng.choice(alphabet) for _ in range(rng.randint(0, longest))]
        b = [rng.choice(alphabet) for _ in range(rng.randint(0, longest))]
        assert edit_distance(a, b) == naive_distance(a, b), (a, b)


def test_edit_distance_known_cases() -> None:
    assert edit_distance([], []) == 0
    assert edit_distance([], ["x", "y"]) == 2
    assert edit_distance(["x", "y"], []) == 2
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance(["a", "b", "c", "d"], ["a", "x", "c"]) == 2


def test_wer_is_corpus_edits_over_reference_words() -> None:
    hyps = ["a x c", "the cat", ""]
    refs = [["a b c d", "the cat sat", "hello"], ["a b c", "the cat", "hello"]]  # second ref is ignored
    sc = WER().corpus_score(hyps, refs)
    assert (sc.edits, sc.ref_words) == (2 + 1 + 1, 4 + 3 + 1)
    assert sc.score == pytest.approx(100 * 4 / 8)
    assert WER().corpus_score(["x"], [[""]]).score == 100.0
    assert WER().corpus_score([""], [[""]]).score == 0.0


def make_files(d: Path, n: int = 60, seed: int = 0) -> tuple[Path, Path, Path]:
    rng = random.Random(seed)
    refs = [" ".join(rng.choices(VOCAB, k=rng.randint(3, 15))) for _ in range(n)]

    def noisy(s: str, p: float) -> str:
        kept = [w for w in s.split() if rng.random() > p / 3]  # some deletions, then substitutions
        return " ".join(w if rng.random() > p else rng.choice(VOCAB) for w in kept)

    (d / "ref.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    (d / "good.txt").write_text("\n".join(noisy(r, 0.1) for r in refs) + "\n", encoding="utf-8")
    (d / "bad.txt").write_text("\n".join(noisy(r, 0.5) for r in refs) + "\n", encoding="utf-8")
    return d / "ref.txt", d / "good.txt", d / "bad.txt"


def mtkit(*args: str, stdin: str | None = None) -> Result:
    return run_mtkit(*args, input=stdin)


def test_same_numbers_as_the_sacrebleu_cli(tmp_path: Path) -> None:
    """sacrebleu's own command line, run by this interpreter (not whichever `sacrebleu` is on the PATH)."""
    ref, hyp, _ = make_files(tmp_path)
    cli = subprocess.run([sys.executable, "-m", "sacrebleu", str(ref), "-i", str(hyp),
                          "-m", "bleu", "chrf", "ter", "-b", "-w", "4", "--format", "text"],
                         capture_output=True, text=True, timeout=120, check=True)
    expected = [float(x) for x in cli.stdout.split()]  # -b: one score per line, in metric order
    ours = mtkit("score", "--hyp", str(hyp), "--ref", str(ref), "--metrics", "bleu,chrf,ter", "--json")
    assert ours.returncode == 0, ours.stderr
    scores = json.loads(ours.stdout)["systems"][0]["scores"]
    assert [round(scores[m], 4) for m in ("bleu", "chrf", "ter")] == expected


def test_text_output_carries_sacrebleu_signatures(tmp_path: Path) -> None:
    ref, hyp, _ = make_files(tmp_path)
    out = mtkit("score", "--hyp", "-", "--ref", str(ref), "-m", "bleu,chrf,ter,wer",
                stdin=hyp.read_text(encoding="utf-8"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert [line.split("|")[0] for line in lines] == ["BLEU", "chrF2", "TER", "WER"]
    assert "tok:13a" in lines[0] and "version:" in lines[0]


def test_several_references(tmp_path: Path) -> None:
    ref, hyp, bad = make_files(tmp_path)
    one = score_files([str(hyp)], [str(ref)], ["bleu", "wer"])
    two = score_files([str(hyp)], [str(bad), str(ref)], ["bleu", "wer"])
    assert "nrefs:2" in two.signatures["bleu"]
    assert two.systems[0].scores["bleu"] >= one.systems[0].scores["bleu"]
    wer_first_bad = score_files([str(hyp)], [str(bad)], ["wer"]).systems[0].scores["wer"]
    assert two.systems[0].scores["wer"] == wer_first_bad  # WER uses the first reference only


def test_paired_bootstrap_against_the_first_system(tmp_path: Path) -> None:
    ref, good, bad = make_files(tmp_path, n=100)
    lines = good.read_text(encoding="utf-8").splitlines()
    lines[0] = lines[0] + " extra"
    near = tmp_path / "near.txt"
    near.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = score_files([str(good), str(bad), str(near), str(good)], [str(ref)], ["bleu", "wer"],
                         bootstrap=200)
    base, worse, same, identical = report.systems
    assert identical.p_values == {"bleu": 1.0, "wer": 1.0}  # no difference cannot be significant
    assert report.bootstrap_samples == 200 and "bs:200" in report.signatures["bleu"]
    assert base.p_values == {} and set(base.ci) == {"bleu", "wer"}
    assert worse.scores["bleu"] < base.scores["bleu"] and worse.scores["wer"] > base.scores["wer"]
    assert worse.p_values["bleu"] < 0.05 and worse.p_values["wer"] < 0.05
    assert same.p_values["bleu"] > 0.05 and same.p_values["wer"] > 0.05  # one extra word: no evidence

    out = mtkit("score", "--hyp", str(good), "--hyp", str(bad), "--ref", str(ref), "--bootstrap", "100",
                "--json")
    data = json.loads(out.stdout)
    assert [s["name"] for s in data["systems"]] == [str(good), str(bad)]
    assert data["systems"][1]["p_values"]["bleu"] < 0.05
    table = mtkit("score", "--hyp", str(good), "--hyp", str(bad), "--ref", str(ref), "--bootstrap", "100")
    assert "baseline: " in table.stdout and "p = " in table.stdout


def test_line_count_mismatch_names_counts_and_files(tmp_path: Path) -> None:
    ref, hyp, _ = make_files(tmp_path, n=10)
    hyp.write_text("\n".join(hyp.read_text(encoding="utf-8").splitlines()[:9]) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as info:
        score_files([str(hyp)], [str(ref)], ["bleu"])
    assert str(info.value) == f"hypothesis {hyp} has 9 lines but reference {ref} has 10"


def test_bad_arguments() -> None:
    assert parse_metrics("BLEU, wer,bleu") == ["bleu", "wer"]
    with pytest.raises(MtkitError, match="unknown metric 'meteor'"):
        parse_metrics("bleu,meteor")
    with pytest.raises(MtkitError, match="stdin"):
        score_files(["-", "-"], ["r"], ["bleu"])


def test_unknown_tokenizer_is_a_clean_error(tmp_path: Path) -> None:
    ref, hyp, _ = make_files(tmp_path, n=5)
    with pytest.raises(MtkitError, match="--tokenize: unknown tokenizer 'nonsense' \\(sacrebleu has .*13a"):
        score_files([str(hyp)], [str(ref)], ["bleu"], tokenize="nonsense")


def _random_corpus(rng: random.Random, n: int) -> list[str]:
    words = ["the", "a", "house", "cat", "sat", "on", "mat", "dog", "ran", "to", "door", "window"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) for _ in range(n)]


def test_parallel_scoring_gives_the_serial_numbers(tmp_path: Path, monkeypatch) -> None:
    """Corpus scores computed in forked workers, and sacrebleu's test comparing systems in parallel,
    give exactly what one process computing everything itself gives."""
    rng = random.Random(5)
    paths = [tmp_path / name for name in ("ref", "a", "b", "c")]
    for path in paths:
        path.write_text("\n".join(_random_corpus(rng, 620)) + "\n", encoding="utf-8")
    ref, *hyps = (str(p) for p in paths)
    pools: list[str] = []
    get_context = score_mod.multiprocessing.get_context
    monkeypatch.setattr(score_mod.multiprocessing, "get_context", lambda m: pools.append(m) or get_context(m))
    jobs: list[int] = []

    class CountingTest(score_mod.PairedTest):
        def __init__(self, *args, **kwargs):
            jobs.append(kwargs["n_jobs"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(score_mod, "PairedTest", CountingTest)
    runs = {}
    for cpus in (2, 1):
        monkeypatch.setattr(score_mod, "allowed_cpus", lambda cpus=cpus: cpus)
        runs[cpus] = [score_mod.score_files(hyps, [ref], list(score_mod.METRICS), bootstrap=b).as_dict()
                      for b in (0, 100)]
    # with two cores: a pool for the corpus scores of each run, and one in sacrebleu's test for each of
    # bleu, chrf and ter (two workers each); with one core, no pool at all
    assert pools == ["fork"] * 5
    assert jobs == [2, 2, 2, 1, 1, 1]
    assert runs[2] == runs[1]
    assert runs[1][0]["systems"] == [{k: v for k, v in s.items() if k not in ("p_values", "ci95")}
                                     for s in runs[1][1]["systems"]]  # the test's scores are the scores


def test_p_values_are_sacrebleus_own(tmp_path: Path) -> None:
    """BLEU, chrF and TER come from sacrebleu's paired test itself; WER's bootstrap repeats its
    algorithm, so run on BLEU's segment statistics (public per-sentence figures) it must give exactly
    what sacrebleu's test gives for BLEU."""
    from sacrebleu.metrics import BLEU, CHRF, TER
    from sacrebleu.significance import PairedTest

    ref, good, bad = make_files(tmp_path, n=80, seed=3)
    near = tmp_path / "near.txt"
    near.write_text(good.read_text(encoding="utf-8").replace("cat", "dog", 3), encoding="utf-8")
    paths = [good, bad, near]
    report = score_files([str(p) for p in paths], [str(ref)], ["bleu", "chrf", "ter", "wer"], bootstrap=150)
    refs = [ref.read_text(encoding="utf-8").splitlines()]
    systems = [(str(p), p.read_text(encoding="utf-8").splitlines()) for p in paths]
    for key, metric in (("bleu", BLEU(references=refs)), ("chrf", CHRF(references=refs)),
                        ("ter", TER(references=refs))):
        _, table = PairedTest(systems, {key: metric}, references=None, test_type="bs", n_samples=150)()
        theirs = table[report.labels[key]]
        assert [s.scores[key] for s in report.systems] == [r.score for r in theirs]
        assert [s.ci[key] for s in report.systems] == [r.ci for r in theirs]
        assert [s.p_values.get(key) for s in report.systems] == [r.p_value for r in theirs]

    sentence = BLEU(effective_order=True)  # statistics only: effective order changes no count
    stats = []
    for _, lines in systems:
        scores = [sentence.sentence_score(h, [r]) for h, r in zip(lines, refs[0], strict=True)]
        stats.append([[s.sys_len, s.ref_len, *s.counts, *s.totals] for s in scores])

    def bleu(row):
        return BLEU.compute_bleu(correct=row[2:6], total=row[6:], sys_len=int(row[0]), ref_len=int(row[1]),
                                 smooth_method="exp").score

    ours = score_mod.paired_bootstrap(stats, bleu, 150)
    _, table = PairedTest(systems, {"bleu": BLEU(references=refs)}, references=None, test_type="bs",
                          n_samples=150)()
    assert [(r.score, r.p_value, r.mean, r.ci) for r in ours] == \
           [(r.score, r.p_value, r.mean, r.ci) for r in table["BLEU"]]
    assert ours[1].p_value < 0.05 < ours[2].p_value  # and the comparison is not a trivial one


def test_score_touches_no_private_attribute() -> None:
    """sacrebleu's public API only (its underscore attributes change between releases): no attribute
    access with a leading underscore anywhere in mtkit/score.py."""
    tree = ast.parse(Path(score_mod.__file__).read_text(encoding="utf-8"))
    private = sorted({node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                      and node.attr.startswith("_") and not node.attr.endswith("__")})
    assert private == []
