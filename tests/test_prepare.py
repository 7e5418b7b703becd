"""`mtkit prepare`: filtering by reason, shards that decode back to the BPE of the input, the no-op
re-run, rebuilds on change, and no complete-looking directory after a failure."""

from __future__ import annotations

import gzip
import io
import os
import random
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from mtkit.config.experiment import Config, load_config
from mtkit.data import prepare as prepare_module
from mtkit.data.bpe import Bpe
from mtkit.data.meta import read_meta
from mtkit.data.prepare import prepare
from mtkit.data.shards import ParallelData
from mtkit.errors import ConfigError, DataError

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa"]


def sent(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def write(path: Path, lines: list[str]) -> str:
    text = "".join(line + "\n" for line in lines)
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


class Corpus:
    """A crafted corpus: with a big enough vocabulary every word is one BPE token, so the token counts
    (and so the filter decisions) are known: 20 good training pairs and 7 bad ones."""

    def __init__(self, root: Path, gz: bool = True):
        root.mkdir(parents=True, exist_ok=True)
        rng = random.Random(0)
        good = [(sent(rng, rng.randint(3, 5)), sent(rng, rng.randint(3, 5))) for _ in range(20)]
        bad = [
            ("", sent(rng, 3)),              # empty
            ("   ", sent(rng, 3)),           # empty (whitespace only)
            (sent(rng, 3), ""),              # empty
            (sent(rng, 12), sent(rng, 5)),   # too_long (max_len 10)
            (sent(rng, 4), sent(rng, 11)),   # too_long
            (sent(rng, 1), sent(rng, 1)),    # too_short (min_len 2)
            (sent(rng, 2), sent(rng, 7)),    # ratio 3.5 > 3
        ]
        self.train = good[:10] + bad + good[10:]
        self.kept = good
        self.dev = [(sent(rng, 4), sent(rng, 4)), (sent(rng, 3), ""), (sent(rng, 12), sent(rng, 2)),
                    (sent(rng, 5), sent(rng, 6)), ("", "")]
        self.test = [(sent(rng, 4), sent(rng, 5)) for _ in range(3)]
        ext = ".gz" if gz else ""
        self.files = {
            "train_src": write(root / f"train.en{ext}", [s for s, _ in self.train]),
            "train_tgt": write(root / f"train.de{ext}", [t for _, t in self.train]),
            "dev_src": write(root / "dev.en", [s for s, _ in self.dev]),
            "dev_tgt": write(root / "dev.de", [t for _, t in self.dev]),
            "test_src": write(root / "test.en", [s for s, _ in self.test]),
            "test_tgt": write(root / "test.de", [t for _, t in self.test]),
        }
        self.out = root / "data-bin"

    def config(self, *overrides: str) -> Config:
        sets = [f"data.{k}={v}" for k, v in self.files.items()]
        sets += [f"data.dir={self.out}", "data.max_len=10", "data.min_len=2", "data.max_len_ratio=3",
                 "data.src_lang=en", "data.tgt_lang=de", "bpe.vocab_size=200"]
        return load_config(None, sets + list(overrides))


def run(cfg: Config, force: bool = False) -> tuple[dict, str]:
    buf = io.StringIO()
    meta = prepare(cfg, force=force, console=Console(file=buf, width=200))
    return meta, buf.getvalue()


def mtimes(d: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted(d.iterdir())}


def shard_lists(shard) -> list[list[int]]:
    return [shard[i].tolist() for i in range(len(shard))]


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    return Corpus(tmp_path)


def test_filters_count_each_reason_and_shards_hold_the_bpe_of_the_input(corpus: Corpus) -> None:
    meta, log = run(corpus.config())
    bpe = Bpe(corpus.out / "bpe.model")
    assert all(len(bpe.encode_ids([w])[0]) == 1 for w in WORDS), "precondition: one token per word"

    train = meta.splits["train"]
    assert train["dropped"] == {"empty": 3, "too_long": 2, "too_short": 1, "ratio": 1}
    assert train["input_sentences"] == 27 and train["sentences"] == 20
    assert "empty 3, too_long 2, too_short 1, ratio 1" in log

    data = ParallelData(corpus.out, "train")
    assert shard_lists(data.src) == bpe.encode_ids([s for s, _ in corpus.kept])
    assert shard_lists(data.tgt) == bpe.encode_ids([t for _, t in corpus.kept])
    assert train["src_tokens"] == sum(len(x) for x in bpe.encode_ids([s for s, _ in corpus.kept]))

    # dev is kept whole, empty sides and over-long lines included, so it stays line-aligned
    dev = ParallelData(corpus.out, "dev")
    assert shard_lists(dev.src) == bpe.encode_ids([s for s, _ in corpus.dev])
    assert shard_lists(dev.tgt) == bpe.encode_ids([t for _, t in corpus.dev])
    assert meta.splits["dev"]["empty_kept"] == 2 and meta.splits["dev"]["dropped"] == {}
    assert len(ParallelData(corpus.out, "test")) == 3


def test_meta_and_resolved_config(corpus: Corpus) -> None:
    cfg = corpus.config()
    meta, _ = run(cfg)
    assert read_meta(corpus.out) == meta
    assert meta.src_lang == "en" and meta.tgt_lang == "de" and meta.joint is True
    assert meta.src_bpe == meta.tgt_bpe == "bpe.model"
    assert meta.src_vocab_size == meta.tgt_vocab_size == len(Bpe(corpus.out / "bpe.model"))
    assert meta.dtype == "uint16" and len(meta.fingerprint) >= 16
    assert set(meta.splits) == {"train", "dev", "test"}
    assert load_config(corpus.out / "config.yaml") == cfg
    assert not list(corpus.out.glob("*.tmp")) and not list(corpus.out.glob(".*"))


def test_second_run_is_a_no_op(corpus: Corpus) -> None:
    cfg = corpus.config()
    meta, _ = run(cfg)
    before = mtimes(corpus.out)
    meta2, log = run(cfg)
    assert "up to date" in log
    assert meta2 == meta
    assert mtimes(corpus.out) == before  # nothing rewritten


def test_config_change_reruns_and_reuses_bpe_when_it_can(corpus: Corpus) -> None:
    run(corpus.config())
    model_mtime = (corpus.out / "bpe.model").stat().st_mtime_ns
    meta, log = run(corpus.config("data.max_len=4"))
    assert "up to date" not in log
    assert meta.splits["train"]["dropped"]["too_long"] > 2
    assert "reusing the BPE model(s)" in log  # filters changed, BPE did not
    assert (corpus.out / "bpe.model").stat().st_mtime_ns == model_mtime

    meta, log = run(corpus.config("bpe.vocab_size=40"))
    assert "trained BPE" in log
    assert meta.src_vocab_size == len(Bpe(corpus.out / "bpe.model")) == 40


def test_touched_input_or_force_reruns(corpus: Corpus) -> None:
    cfg = corpus.config()
    meta, _ = run(cfg)
    st = os.stat(corpus.files["dev_src"])
    os.utime(corpus.files["dev_src"], ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    meta2, log = run(cfg)
    assert "up to date" not in log and meta2.fingerprint != meta.fingerprint
    _, log = run(cfg, force=True)
    assert "trained BPE" in log and "up to date" not in log


def test_removed_test_split_and_missing_shard(corpus: Corpus) -> None:
    run(corpus.config())
    (corpus.out / "dev.tgt.idx").unlink()  # a damaged dir is not "up to date"
    meta, log = run(corpus.config())
    assert "up to date" not in log and (corpus.out / "dev.tgt.idx").is_file()
    meta, _ = run(corpus.config("data.test_src=", "data.test_tgt="))
    assert set(meta.splits) == {"train", "dev"}
    assert not list(corpus.out.glob("test.*"))  # stale shards of the earlier run are gone


def test_plain_text_inputs(tmp_path: Path) -> None:
    corpus = Corpus(tmp_path, gz=False)
    meta, _ = run(corpus.config())
    assert meta.splits["train"]["sentences"] == 20


def test_line_count_mismatch_names_both_files(corpus: Corpus) -> None:
    src, tgt = corpus.files["train_src"], corpus.files["train_tgt"]
    with gzip.open(tgt, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()
    write(Path(tgt), lines[:-1])
    with pytest.raises(DataError) as info:
        run(corpus.config())
    assert str(info.value) == f"{src} has 27 lines but {tgt} has 26"


def test_invalid_utf8_fails_before_touching_a_complete_dir(corpus: Corpus) -> None:
    run(corpus.config())
    before = mtimes(corpus.out)
    Path(corpus.files["dev_tgt"]).write_bytes(b"ok\nok\nbad \xe9 latin-1\nok\nok\n")
    with pytest.raises(DataError, match=r"dev\.de:3: invalid UTF-8 \(byte 5 of the line\)"):
        run(corpus.config())
    assert mtimes(corpus.out) == before  # the earlier, complete data is still usable


def test_failure_midway_leaves_the_earlier_dir_whole(corpus: Corpus, monkeypatch) -> None:
    """Killed while writing the last split: the earlier, complete data directory is untouched (the
    new one was built beside it) and nothing is left over; the next run completes."""
    run(corpus.config())
    before = mtimes(corpus.out)
    real = prepare_module.encode_split

    def crash_on_test(s, *args, **kwargs):
        if s.name == "test":
            raise KeyboardInterrupt  # as if killed while writing the last split
        return real(s, *args, **kwargs)

    monkeypatch.setattr(prepare_module, "encode_split", crash_on_test)
    with pytest.raises(KeyboardInterrupt):
        run(corpus.config("data.max_len=9"))
    assert mtimes(corpus.out) == before and len(ParallelData(corpus.out, "train")) > 0
    assert [p.name for p in corpus.out.parent.iterdir() if p.name.startswith(".data-bin")] == []
    monkeypatch.setattr(prepare_module, "encode_split", real)
    meta, log = run(corpus.config("data.max_len=9"))  # and the next run completes it
    assert "up to date" not in log and len(ParallelData(corpus.out, "test")) == 3


def test_a_filter_that_drops_everything_keeps_the_good_dir(corpus: Corpus) -> None:
    meta, _ = run(corpus.config())
    before = mtimes(corpus.out)
    with pytest.raises(DataError, match=r"every pair was filtered out .*data-bin is unchanged"):
        run(corpus.config("data.max_len=100", "data.min_len=90"))
    assert mtimes(corpus.out) == before
    assert read_meta(corpus.out) == meta


def test_separate_vocabularies(corpus: Corpus) -> None:
    meta, _ = run(corpus.config("bpe.joint=false"))
    assert (meta.src_bpe, meta.tgt_bpe, meta.joint) == ("src.model", "tgt.model", False)
    src, tgt = Bpe(corpus.out / "src.model"), Bpe(corpus.out / "tgt.model")
    assert meta.src_vocab_size == len(src) and meta.tgt_vocab_size == len(tgt)
    data = ParallelData(corpus.out, "test")
    assert shard_lists(data.src) == src.encode_ids([s for s, _ in corpus.test])
    assert shard_lists(data.tgt) == tgt.encode_ids([t for _, t in corpus.test])


def test_reusing_given_models(corpus: Corpus, tmp_path: Path) -> None:
    run(corpus.config())
    given = tmp_path / "given.model"
    given.write_bytes((corpus.out / "bpe.model").read_bytes())
    other = Corpus(tmp_path / "second")
    meta, log = run(other.config(f"bpe.model={given}", "bpe.vocab_size=1000"))
    assert (other.out / "bpe.model").read_bytes() == given.read_bytes()
    assert "trained BPE" not in log and meta.src_vocab_size == len(Bpe(given))

    with pytest.raises(ConfigError, match="bpe.model is a joint model but bpe.joint is false"):
        run(other.config(f"bpe.model={given}", "bpe.joint=false"))
    with pytest.raises(ConfigError, match="bpe.src_model / bpe.tgt_model are for separate models"):
        run(other.config(f"bpe.src_model={given}"))
    with pytest.raises(DataError, match="file not found: .*missing.model"):
        run(other.config(f"bpe.model={tmp_path / 'missing.model'}"))
    # one side given, the other trained
    meta, log = run(other.config("bpe.joint=false", f"bpe.src_model={given}"))
    assert (other.out / "src.model").read_bytes() == given.read_bytes() and "trained BPE" in log


def test_filter_dev(corpus: Corpus) -> None:
    meta, _ = run(corpus.config("data.filter_dev=true"))
    assert meta.splits["dev"]["dropped"] == {"empty": 2, "too_long": 1}
    assert meta.splits["dev"]["sentences"] == 2


def test_config_mistakes(corpus: Corpus) -> None:
    with pytest.raises(ConfigError, match="data.train_src and data.train_tgt are not set"):
        run(corpus.config("data.train_src=", "data.train_tgt="))
    with pytest.raises(ConfigError, match="data.test_src is set but data.test_tgt is not"):
        run(corpus.config("data.test_tgt="))
    with pytest.raises(DataError, match="every pair was filtered out"):
        run(corpus.config("data.min_len=9"))
    assert not corpus.out.joinpath("meta.json").exists()


def test_vocab_dtype_and_token_bounds(corpus: Corpus) -> None:
    meta, _ = run(corpus.config())
    data = ParallelData(corpus.out, "train")
    tokens = data.src.all_tokens()
    assert tokens.dtype == np.uint16 and len(tokens) == data.src.num_tokens
    assert int(tokens.max()) < meta.src_vocab_size and int(tokens.min()) > 3
