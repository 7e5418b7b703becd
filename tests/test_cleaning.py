"""mtkit.data.cleaning and `mtkit clean`: duplicates, decisions, the report, weights, shards that add up
to the whole run, worker processes that change nothing, the hash set behind dedup, atomic outputs,
input grouping, the command line, and `mtkit prepare` cleaning its training corpora (clean.enabled,
data.sources).

Most runs leave language identification off (its own tests are in tests/test_filters.py) and use one
worker; the test of worker processes starts two, and the prepare tests run the identifier on short
real sentences."""

from __future__ import annotations

import collections
import dataclasses
import io
import json
import random
from pathlib import Path

import numpy as np
import pytest
import yaml
from cli_helpers import assert_one_error_line, run_mtkit
from rich.console import Console

from mtkit.clean import clean, group_inputs, output_paths
from mtkit.config.clean_section import CleanConfig
from mtkit.config.experiment import Config, load_config
from mtkit.data import cleaning
from mtkit.data.bpe import Bpe
from mtkit.data.cleaning import (
    CLEAN_REPORT,
    Cleaner,
    CleanReport,
    Corpus,
    SeenHashes,
    clean_into,
    training_corpora,
)
from mtkit.data.meta import DataMeta
from mtkit.data.prepare import prepare
from mtkit.data.readers import CorpusSpec
from mtkit.data.shards import ParallelData
from mtkit.errors import ConfigError, DataError
from mtkit.textio import parse_shard

Pairs = list[tuple[str, str]]

#: rules without language identification, one worker
PLAIN = CleanConfig(langid=False, workers=1)

# a pair per rule the cleaner's own verdicts (empty, duplicates) and the pair rules give
NOISY: Pairs = [
    ("Open the file.", "Öffnen Sie die Datei."),                # keep
    ("Close the window.", "Schließen Sie das Fenster."),        # keep
    ("Open the file.", "Öffnen Sie die Datei."),                # duplicate (exact)
    ("open the FILE", "öffnen Sie die Datei!"),                 # duplicate (normalised)
    ("Open the file.", "Die Datei öffnen."),                    # keep: another translation of a source
    ("", "Leer."),                                              # empty
    ("Save the file.", "  "),                                   # empty
    ("Close the window.", "Schließen Sie das Fenster."),        # duplicate
    ("Open the settings.", "Open the settings."),               # copy
    ("The size of the window", "Die GrÃ¶ÃŸe des Fensters"),     # charset
    ("Print the page.", "Drucken Sie die Seite."),              # keep
]
NOISY_DECISIONS = ["keep", "keep", "duplicate", "duplicate", "keep", "empty", "empty", "duplicate", "copy",
                   "charset", "keep"]

NOUNS = [("house", "Haus"), ("window", "Fenster"), ("file", "Datei"), ("garden", "Garten"),
         ("table", "Tisch"), ("door", "Tür"), ("book", "Buch"), ("street", "Straße")]
COLOURS = [("red", "rote"), ("green", "grüne"), ("blue", "blaue"), ("small", "kleine"), ("old", "alte")]


def synthetic(n: int, seed: int = 0) -> Pairs:
    """``n`` distinct pairs every rule keeps."""
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        (en, de), (adj, adj_de) = rng.choice(NOUNS), rng.choice(COLOURS)
        pairs.append((f"The {adj} {en} number {i} is here", f"Das {adj_de} {de} Nummer {i} ist hier"))
    return pairs


def moses(root: Path, name: str, pairs: Pairs, src: str = "en", tgt: str = "de") -> tuple[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    paths = root / f"{name}.{src}", root / f"{name}.{tgt}"
    for path, side in zip(paths, zip(*pairs, strict=True), strict=True):
        path.write_text("".join(line + "\n" for line in side), encoding="utf-8")
    return str(paths[0]), str(paths[1])


def corpus(paths: tuple[str, ...], settings: CleanConfig = PLAIN, weight: float = 1.0) -> Corpus:
    return Corpus(CorpusSpec(paths, "en", "de"), settings, weight)


def run(corpora: list[Corpus], **options: object) -> tuple[Pairs, CleanReport]:
    written: Pairs = []
    report = Cleaner(corpora, **options).run(lambda s, t: written.append((s, t)))  # type: ignore[arg-type]
    return written, report


def lines(path: Path | str) -> list[str]:
    return Path(path).read_text(encoding="utf-8").splitlines()


def quiet() -> Console:
    return Console(file=io.StringIO(), width=200)


def tmp_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*") if "tmp" in p.name)


# ------------------------------------------------------------------------------------------- dedup
def test_duplicates_empty_pairs_and_rules(tmp_path: Path) -> None:
    written, report = run([corpus(moses(tmp_path, "a", NOISY))])
    assert written == [NOISY[0], NOISY[1], NOISY[4], NOISY[10]]  # the first of each, in input order
    assert report.read == report.in_shard == 11 and report.kept == report.written == 4
    assert {r: n for r, n in report.dropped.items() if n} == {"duplicate": 3, "empty": 2, "copy": 1,
                                                               "charset": 1}
    assert report.corpora[0]["read"] == 11 and report.corpora[0]["kept"] == 4


def test_dedup_source_and_dedup_off(tmp_path: Path) -> None:
    paths = moses(tmp_path, "a", NOISY)
    written, report = run([corpus(paths, dataclasses.replace(PLAIN, dedup_source=True))])
    assert written == [NOISY[0], NOISY[1], NOISY[10]]
    assert report.dropped["duplicate_source"] == 1 and report.dropped["duplicate"] == 3
    written, report = run([corpus(paths, dataclasses.replace(PLAIN, dedup=False))])
    assert written == [NOISY[i] for i in (0, 1, 2, 3, 4, 7, 10)]
    assert report.dropped["duplicate"] == 0


def test_duplicates_across_corpora_and_empty_pairs_never_dedup(tmp_path: Path) -> None:
    first = moses(tmp_path, "a", [NOISY[0], ("", "x"), NOISY[1]])
    second = moses(tmp_path, "b", [("", "x"), ("OPEN THE FILE.", "Öffnen Sie die Datei"), NOISY[10]])
    written, report = run([corpus(first), corpus(second)])
    assert written == [NOISY[0], NOISY[1], NOISY[10]]  # corpus by corpus, in input order
    assert report.dropped["empty"] == 2 and report.dropped["duplicate"] == 1
    assert [c["kept"] for c in report.corpora] == [2, 1]


def test_a_pair_one_corpus_drops_is_kept_from_a_corpus_that_keeps_it(tmp_path: Path) -> None:
    """Only kept pairs count as seen: a copy in a corpus whose rules keep it is no duplicate of a pair
    another corpus's rules dropped."""
    spanish = ("Delete the selected rows from the table.", "Borre las filas seleccionadas de la tabla.")
    strict = dataclasses.replace(PLAIN, langid=True)
    first = moses(tmp_path, "a", [NOISY[0], spanish])
    second = moses(tmp_path, "b", [spanish, NOISY[0]])
    written, report = run([corpus(first, strict), corpus(second, dataclasses.replace(strict, langid=False))])
    assert written == [NOISY[0], spanish]
    assert report.dropped["language_tgt"] == 1 and report.dropped["duplicate"] == 1


# ------------------------------------------------------------------------------------------- the stage
def test_decisions_and_report(tmp_path: Path) -> None:
    src, tgt = moses(tmp_path, "a", NOISY)
    prefix = tmp_path / "out" / "clean"
    report = clean([src, tgt], "en", "de", str(prefix), dataclasses.replace(PLAIN, examples=2),
                   decisions=str(tmp_path / "decisions.txt"), console=quiet())
    assert lines(tmp_path / "decisions.txt") == NOISY_DECISIONS  # one line per input pair
    assert list(zip(lines(f"{prefix}.en"), lines(f"{prefix}.de"), strict=True)) == [
        NOISY[0], NOISY[1], NOISY[4], NOISY[10]]
    saved = json.loads(Path(f"{prefix}.report.json").read_text(encoding="utf-8"))
    assert saved["read"] == 11 and saved["kept"] == saved["written"] == 4 and report.kept == 4
    assert saved["dropped"] == {"duplicate": 3, "empty": 2, "copy": 1, "charset": 1}
    assert saved["corpora"] == [{"corpus": f"{src} + {tgt}", "format": "moses", "read": 11, "kept": 4,
                                 "written": 4}]
    examples = saved["examples"]
    assert set(examples) == {"duplicate", "empty", "copy", "charset"}
    assert examples["duplicate"] == [  # at most clean.examples of a reason, the first ones, file:line
        {"where": f"{src}:3", "src": NOISY[2][0], "tgt": NOISY[2][1]},
        {"where": f"{src}:4", "src": NOISY[3][0], "tgt": NOISY[3][1]}]
    assert examples["charset"] == [{"where": f"{src}:10", "src": NOISY[9][0], "tgt": NOISY[9][1]}]
    assert tmp_files(tmp_path) == []

    clean([src, tgt], "en", "de", str(prefix), dataclasses.replace(PLAIN, examples=0), console=quiet())
    saved = json.loads(Path(f"{prefix}.report.json").read_text(encoding="utf-8"))
    assert saved["dropped"]["duplicate"] == 3 and not any(saved["examples"].values())


def test_weights(tmp_path: Path) -> None:
    pairs = synthetic(200)
    paths = moses(tmp_path, "a", pairs)
    written, report = run([corpus(paths, weight=2.0)])
    assert written == [p for p in pairs for _ in range(2)] and report.written == 400 and report.kept == 200

    half, report = run([corpus(paths, weight=0.5)])
    assert 60 < len(half) < 140 and report.written == len(half) and report.kept == 200
    assert half == [p for p in pairs if p in set(half)]  # a subset, in input order
    assert run([corpus(paths, weight=0.5)])[0] == half  # the same subset every time
    # 1.5: every pair once, and the same half a second time
    once_more, _ = run([corpus(paths, weight=1.5)])
    assert once_more == [p for p in pairs for _ in range(2 if p in set(half) else 1)]


# ------------------------------------------------------------------------------------------- shards
def shard_data() -> Pairs:
    """Pairs with many exact and normalised duplicates, and sources with several translations."""
    base = synthetic(60, seed=1)
    rng = random.Random(2)
    dups = [(s.upper(), t + "!") for s, t in rng.sample(base, 15)] + rng.sample(base, 10)
    other = [(s, "Eine andere Übersetzung " + t.split()[-3]) for s, t in rng.sample(base, 8)]
    pairs = base + dups + other
    rng.shuffle(pairs)
    return pairs


def test_shards_add_up_to_the_whole_run(tmp_path: Path) -> None:
    paths = moses(tmp_path, "a", shard_data())
    for weight in (1.0, 0.5):
        whole, whole_report = run([corpus(paths, weight=weight)])
        assert whole_report.dropped["duplicate"] == 25 or weight != 1.0
        pieces, reports = [], []
        for k in (0, 1, 2):
            decisions = io.StringIO()
            written, report = run([corpus(paths, weight=weight)], shard=(k, 3), decisions=decisions)
            assert report.shard == f"{k}/3" and report.read == whole_report.read
            shown = decisions.getvalue().splitlines()
            assert len(shown) == report.read and report.in_shard == sum(d != "shard" for d in shown)
            assert 0 < len(written) < len(whole)
            pieces += written
            reports.append(report)
        assert collections.Counter(pieces) == collections.Counter(whole)
        assert sum(r.in_shard for r in reports) == whole_report.read
        assert sum(r.dropped["duplicate"] for r in reports) == whole_report.dropped["duplicate"]


def test_parse_shard() -> None:
    """K/N counted from 0, as `mtkit translate --shard` takes it (the same function)."""
    assert parse_shard("2/8") == (2, 8) and parse_shard("0/1") == (0, 1) and parse_shard(None) is None
    for bad in ("1/1", "4/3", "2", "a/b", "1/2/3"):
        with pytest.raises(ConfigError, match="--shard"):
            parse_shard(bad)


# ------------------------------------------------------------------------------------------- workers
def test_worker_processes_give_the_same_output(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two spawned workers, many small chunks in flight: byte for byte what one process writes."""
    monkeypatch.setattr(cleaning, "CHUNK_PAIRS", 5)
    monkeypatch.setattr(cleaning, "IN_FLIGHT", 1)
    settings = CleanConfig(workers=1)  # language identification on: the workers load it themselves
    # the second corpus without it: each corpus is judged by its own rules in the workers too
    real = [("The house is big and the garden is beautiful.", "Das Haus ist groß und der Garten ist schön."),
            ("The house is big and the garden is beautiful.", "La casa es grande y el jardín es bonito.")]
    first = moses(tmp_path, "a", NOISY + real + synthetic(20))
    second = moses(tmp_path, "b", synthetic(15, seed=5) + NOISY[:4])
    outputs = {}
    for workers in (1, 2):
        decisions = io.StringIO()
        cleaner = Cleaner([corpus(first, settings), corpus(second, PLAIN, weight=1.5)], workers,
                          decisions=decisions)
        out = tmp_path / f"w{workers}"
        report = clean_into(cleaner, out.with_suffix(".en"), out.with_suffix(".de"))
        assert report.workers == workers
        outputs[workers] = (out.with_suffix(".en").read_bytes(), out.with_suffix(".de").read_bytes(),
                            decisions.getvalue(), report.dropped)
    assert outputs[2] == outputs[1]
    assert outputs[1][3]["language_tgt"] == 1 and outputs[1][3]["copy"] == 1  # the rules ran in both


def test_a_small_input_is_judged_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fewer than SMALL_RUN_CHUNKS chunks: no worker processes are started (their start costs more)."""
    def no_pool(*args: object) -> None:
        raise AssertionError("a process pool was started for a small input")

    monkeypatch.setattr(cleaning.multiprocessing, "get_context", no_pool)
    written, report = run([corpus(moses(tmp_path, "a", NOISY))], workers=2)
    assert report.workers == 1 and report.kept == 4


# ------------------------------------------------------------------------------------------- SeenHashes
def test_seen_hashes_match_a_set() -> None:
    rng = np.random.default_rng(0)
    seen, reference = SeenHashes(), set()
    assert not seen.first_seen(np.array([], dtype=np.uint64)).any()
    extremes = np.array([0, 2**64 - 1, 2**63, 0, 2**64 - 1], dtype=np.uint64)
    assert seen.first_seen(extremes).tolist() == [True, True, True, False, False]
    reference.update(extremes.tolist())
    for step in range(300):
        size = int(rng.integers(1, 60))
        # draws from a small pool (duplicates within a batch and across) and from all of uint64
        small = rng.integers(0, 3000, size=size, dtype=np.uint64)
        large = rng.integers(0, 2**64 - 1, size=size // 4, dtype=np.uint64, endpoint=True)
        batch = np.concatenate([small, large, small[: size // 3]])
        rng.shuffle(batch)
        expected = []
        for h in batch.tolist():
            expected.append(h not in reference)
            reference.add(h)
        assert seen.first_seen(batch).tolist() == expected, step
    assert len(seen) == len(reference)
    assert all(np.all(run[:-1] < run[1:]) for run in seen.runs)  # sorted, no hash twice
    assert len(seen.runs) <= 2 * int(np.log2(len(reference))) + 2  # merged, not one run per batch
    assert sorted(np.concatenate(seen.runs).tolist()) == sorted(reference)


# ------------------------------------------------------------------------------------------- outputs
def test_a_failed_run_leaves_the_outputs_as_they_were(tmp_path: Path) -> None:
    good = moses(tmp_path, "good", synthetic(30))
    bad_src, bad_tgt = moses(tmp_path, "bad", synthetic(10, seed=3))
    Path(bad_tgt).write_text("".join(line + "\n" for line in lines(bad_tgt)[:-2]), encoding="utf-8")
    prefix = tmp_path / "out"
    before = {}
    for name in ("out.en", "out.de", "out.report.json", "decisions.txt"):
        (tmp_path / name).write_text(f"earlier {name}\n", encoding="utf-8")
        before[name] = (tmp_path / name).read_bytes()
    with pytest.raises(DataError, match=r"bad\.de has 8 lines but .*bad\.en has more"):
        clean([*good, bad_src, bad_tgt], "en", "de", str(prefix), PLAIN,
              decisions=str(tmp_path / "decisions.txt"), console=quiet())
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert tmp_files(tmp_path) == []


def test_outputs_that_would_overwrite_inputs_are_refused(tmp_path: Path) -> None:
    src, tgt = moses(tmp_path, "a", synthetic(5))
    contents = Path(src).read_bytes(), Path(tgt).read_bytes()
    with pytest.raises(ConfigError, match=r"a\.en is an input .*choose another output prefix"):
        clean([src, tgt], "en", "de", str(tmp_path / "a"), PLAIN, console=quiet())
    with pytest.raises(ConfigError, match="is an input"):
        clean([src, tgt], "en", "de", str(tmp_path / "out"), PLAIN, decisions=tgt, console=quiet())
    assert (Path(src).read_bytes(), Path(tgt).read_bytes()) == contents
    with pytest.raises(ConfigError, match="both 'en'"):
        clean([src, tgt], "en", "en", str(tmp_path / "out"), PLAIN, console=quiet())
    with pytest.raises(ConfigError, match="file not found"):
        clean([src, str(tmp_path / "missing.de")], "en", "de", str(tmp_path / "out"), PLAIN, console=quiet())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.de", "a.en"]
    assert output_paths("x/clean", "en", "de") == (Path("x/clean.en"), Path("x/clean.de"),
                                                   Path("x/clean.report.json"))


def test_group_inputs() -> None:
    def paths(*inputs: str) -> list[tuple[str, ...]]:
        return [spec.paths for spec in group_inputs(list(inputs), "en", "de")]

    assert paths("a.tsv") == [("a.tsv",)]
    assert paths("a.tmx.gz", "b.TSV") == [("a.tmx.gz",), ("b.TSV",)]
    assert paths("train.en", "train.de") == [("train.en", "train.de")]
    assert paths("train.de", "train.en") == [("train.en", "train.de")]  # named by language: source first
    assert paths("train.de.gz", "train.en.gz") == [("train.en.gz", "train.de.gz")]
    assert paths("one.txt", "two.txt") == [("one.txt", "two.txt")]  # otherwise as given
    assert paths("x.tsv", "y.de", "y.en", "z.tmx") == [("x.tsv",), ("y.en", "y.de"), ("z.tmx",)]
    specs = group_inputs(["x.tsv", "y.en", "y.de"], "en", "de", "3", "4", "none")
    assert (specs[0].src_column, specs[0].tgt_column, specs[0].quoting) == ("3", "4", "none")
    assert (specs[1].src_column, specs[1].quoting) == ("", "csv")  # TSV options are the TSV's
    with pytest.raises(ConfigError, match=r"-i train\.en: a Moses corpus is two files"):
        group_inputs(["train.en"], "en", "de")
    with pytest.raises(ConfigError, match=r"-i train\.en: .*the next input is x\.tmx"):
        group_inputs(["train.en", "x.tmx", "train.de"], "en", "de")


# ------------------------------------------------------------------------------------------- the CLI
def test_cli_end_to_end_and_a_bad_option(tmp_path: Path) -> None:
    src, tgt = moses(tmp_path, "a", NOISY)
    result = run_mtkit("clean", "-i", src, "-i", tgt, "--src-lang", "en", "--tgt-lang", "de",
                       "-o", tmp_path / "out", "--workers", "1", "--set", "clean.langid=false",
                       "--decisions", tmp_path / "decisions.txt")
    assert result.returncode == 0, result.stderr
    assert lines(tmp_path / "out.en") == [NOISY[i][0] for i in (0, 1, 4, 10)]
    assert lines(tmp_path / "out.de") == [NOISY[i][1] for i in (0, 1, 4, 10)]
    assert lines(tmp_path / "decisions.txt") == NOISY_DECISIONS
    assert json.loads((tmp_path / "out.report.json").read_text(encoding="utf-8"))["kept"] == 4
    assert "kept 4" in result.stderr and "Traceback" not in result.stderr

    result = run_mtkit("clean", "-i", src, "-i", tgt, "--src-lang", "en", "--tgt-lang", "de",
                       "-o", tmp_path / "other", "--columns", "1")
    assert_one_error_line(result, "--columns '1'", "expected two columns")
    result = run_mtkit("clean", "-i", src, "-i", tgt, "--src-lang", "en", "--tgt-lang", "de",
                       "-o", tmp_path / "other", "--shard", "4/3")
    assert_one_error_line(result, "--shard '4/3'", "0 <= K < N")
    result = run_mtkit("clean", "-i", src, "-i", tgt, "--src-lang", "en", "--tgt-lang", "de",
                       "-o", tmp_path / "other", "--set", "clean.copys=false")
    assert_one_error_line(result, "unknown key 'clean.copys'", "'copies'")
    assert not list(tmp_path.glob("other*"))


# ------------------------------------------------------------------------------------------- prepare
GOOD: Pairs = [
    ("The weather is nice today.", "Das Wetter ist heute schön."),
    ("I would like a cup of coffee.", "Ich hätte gern eine Tasse Kaffee."),
    ("Where is the train station?", "Wo ist der Bahnhof?"),
    ("The children are playing in the garden.", "Die Kinder spielen im Garten."),
    ("Please close the door behind you.", "Bitte schließ die Tür hinter dir."),
    ("We are going to the cinema tonight.", "Wir gehen heute Abend ins Kino."),
    ("This book is very interesting.", "Dieses Buch ist sehr interessant."),
    ("The museum is closed on Mondays.", "Das Museum ist montags geschlossen."),
    ("Can you help me with my homework?", "Kannst du mir bei meinen Hausaufgaben helfen?"),
    ("The dog is sleeping under the table.", "Der Hund schläft unter dem Tisch."),
    ("It is raining again.", "Es regnet schon wieder."),
    ("Our teacher is very friendly.", "Unsere Lehrerin ist sehr freundlich."),
    ("He forgot his umbrella at home.", "Er hat seinen Regenschirm zu Hause vergessen."),
    ("The meeting starts in the afternoon.", "Die Besprechung beginnt am Nachmittag."),
    ("I have never seen the sea.", "Ich habe das Meer noch nie gesehen."),
    ("The soup is too hot.", "Die Suppe ist zu heiß."),
    ("Save the file before closing the program.",
     "Speichern Sie die Datei, bevor Sie das Programm schließen."),
    ("The printer is out of paper.", "Der Drucker hat kein Papier mehr."),
    ("Select a folder for the backup.", "Wählen Sie einen Ordner für die Sicherung."),
    ("The connection to the server was lost.", "Die Verbindung zum Server wurde unterbrochen."),
]
SPANISH = ("The house is big and the garden is beautiful.", "La casa es grande y el jardín es muy bonito.")


def experiment(root: Path, train: Pairs | None, **sections: object) -> Path:
    """A config file for a tiny experiment in ``root`` (train: a Moses pair; None: data.sources)."""
    dev = moses(root, "dev", GOOD[:4])
    data: dict[str, object] = {"dev_src": dev[0], "dev_tgt": dev[1], "src_lang": "en", "tgt_lang": "de",
                               "dir": str(root / "data-bin")}
    if train is not None:
        data["train_src"], data["train_tgt"] = moses(root, "train", train)
    config = {"data": data, "bpe": {"vocab_size": 120}, "clean": {"workers": 1}}
    for name, values in sections.items():
        config.setdefault(name, {}).update(values)  # type: ignore[attr-defined]
    path = root / "exp.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return path


def prepared(config: Path, *overrides: str) -> tuple[DataMeta, str, Config]:
    cfg = load_config(config, list(overrides))
    buf = io.StringIO()
    meta = prepare(cfg, console=Console(file=buf, width=200))
    return meta, buf.getvalue(), cfg


def test_prepare_cleans_the_training_pairs(tmp_path: Path) -> None:
    copies = [("Open the settings.", "Open the settings."),
              ("Restart the computer.", "restart the computer!")]
    train = GOOD[:10] + copies + [GOOD[0], GOOD[3], (GOOD[5][0].upper(), GOOD[5][1])] + GOOD[10:]
    config = experiment(tmp_path, train, clean={"enabled": True})
    out = tmp_path / "data-bin"

    meta, log, cfg = prepared(config)
    assert training_corpora(cfg)[0].spec.paths == (cfg.data.train_src, cfg.data.train_tgt)
    assert meta.splits["train"]["input_sentences"] == len(GOOD) == 20  # of 25
    assert "cleaned the training corpora" in log
    report = json.loads((out / CLEAN_REPORT).read_text(encoding="utf-8"))
    assert report["read"] == 25 and report["dropped"] == {"duplicate": 3, "copy": 2}
    assert not list(tmp_path.glob(".cleaned-*"))

    _, log, _ = prepared(config)
    assert "up to date" in log
    # a clean setting is part of the fingerprint: the copies are now language identification's to drop
    # (an English target), the report says so
    changed, log, _ = prepared(config, "clean.copies=false")
    assert "up to date" not in log and changed.fingerprint != meta.fingerprint
    assert json.loads((out / CLEAN_REPORT).read_text(encoding="utf-8"))["dropped"] == {"duplicate": 3,
                                                                                         "language_tgt": 2}
    meta, log, _ = prepared(config, "clean.copies=false", "clean.langid=false")
    assert "up to date" not in log and meta.splits["train"]["input_sentences"] == 22

    meta, log, cfg = prepared(config, "clean.enabled=false")  # the train files as they are
    assert training_corpora(cfg) == []
    assert "up to date" not in log and meta.splits["train"]["input_sentences"] == 25
    assert not (out / CLEAN_REPORT).exists()  # no report of an earlier cleaning left behind


def test_prepare_and_mtkit_clean_keep_the_same_pairs(tmp_path: Path) -> None:
    """Both roads run one cleaner: prepare's training split is what `mtkit clean` writes."""
    copies = [("Open the settings.", "Open the settings."), ("Restart the computer.", "Neu starten")]
    train = GOOD[:10] + copies + [GOOD[0], SPANISH] + GOOD[10:]
    config = experiment(tmp_path, train, clean={"enabled": True})
    meta, _, cfg = prepared(config)
    report = clean([cfg.data.train_src, cfg.data.train_tgt], "en", "de", str(tmp_path / "cleaned"),
                   cfg.clean, console=quiet())
    prepared_report = json.loads((tmp_path / "data-bin" / CLEAN_REPORT).read_text(encoding="utf-8"))
    assert prepared_report["dropped"] == report.as_json()["dropped"] and report.kept == 20
    data = ParallelData(tmp_path / "data-bin", "train")
    bpe = Bpe(tmp_path / "data-bin" / meta.src_bpe)
    shards = [bpe.sp.decode(data.src[i].tolist()) for i in range(len(data))]
    assert shards == lines(tmp_path / "cleaned.en")


def test_a_malformed_tmx_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    tmx = tmp_path / "bad.tmx"
    tmx.write_text('<?xml version="1.0"?>\n<tmx version="1.4"><body>\n'
                   '<tu><tuv xml:lang="en"><seg>Hi</seg></tuv><tuv xml:lang="de"><seg>Hal</seg></tuv></tu>\n'
                   '<tu><tuv xml:lang="en"><seg>x</tuv></tu>\n</body></tmx>\n', encoding="utf-8")
    result = run_mtkit("clean", "-i", str(tmx), "--src-lang", "en", "--tgt-lang", "de",
                       "-o", str(tmp_path / "out"))
    assert_one_error_line(result, "bad.tmx:4", "not well-formed")  # the line of the broken <tu>
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tmx"]


def test_prepare_reads_data_sources(tmp_path: Path) -> None:
    tsv = tmp_path / "web.tsv"
    tsv.write_text("".join(f"{s}\t{t}\n" for s, t in [*GOOD[:6], SPANISH]), encoding="utf-8")
    spanish = (SPANISH[0], "La casa es grande y el jardín es bonito.")
    src, tgt = moses(tmp_path, "dict", [*GOOD[6:11], spanish, GOOD[0]])
    sources = [{"path": str(tsv), "weight": 2},
               {"src": src, "tgt": tgt, "weight": 1, "clean": {"langid": False}}]
    config = experiment(tmp_path, None, data={"sources": sources}, clean={"enabled": True})

    meta, log, cfg = prepared(config)
    corpora = training_corpora(cfg)
    assert [c.weight for c in corpora] == [2.0, 1.0]
    assert [c.clean.langid for c in corpora] == [True, False] and cfg.clean.langid
    # the TSV: 6 kept (Spanish dropped), twice; the Moses pair: Spanish kept (langid off there), the
    # pair that repeats one of the TSV's dropped as a duplicate (dedup spans the sources)
    assert meta.splits["train"]["input_sentences"] == 2 * 6 + 6
    report = json.loads((tmp_path / "data-bin" / CLEAN_REPORT).read_text(encoding="utf-8"))
    assert report["dropped"] == {"language_tgt": 1, "duplicate": 1}
    assert [(c["format"], c["read"], c["kept"], c["written"]) for c in report["corpora"]] == [
        ("tsv", 7, 6, 12), ("moses", 7, 6, 6)]
    assert "up to date" in prepared(config)[1]

    sources[1]["clean"] = {"langidd": False}
    config = experiment(tmp_path, None, data={"sources": sources}, clean={"enabled": True})
    with pytest.raises(ConfigError, match=r"unknown key 'data\.sources\[1\]\.clean\.langidd'.*'langid'"):
        load_config(config)
