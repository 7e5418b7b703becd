"""BPE: fixed special ids, one output line per input line, lossless round trips, readable failures."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from mtkit.data.bpe import Bpe, _sample_sentences, decode_stream, encode_stream, train_bpe
from mtkit.errors import DataError, MtkitError
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

WORDS = ["haus", "katze", "hund", "baum", "garten", "der", "die", "das", "ist", "ein", "groß", "klein",
         "und", "schön", "grün", "house", "cat", "dog", "tree", "the", "is", "a", "big", "small", "fisch"]


def make_text(path: Path, n: int = 300, seed: int = 0) -> Path:
    rng = random.Random(seed)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 9))) for _ in range(n)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Bpe:
    d = tmp_path_factory.mktemp("bpe")
    path = train_bpe([str(make_text(d / "a.txt")), str(make_text(d / "b.txt", seed=1))], str(d / "m"),
                     vocab_size=80)
    return Bpe(path)


def test_special_ids_are_fixed(model: Bpe) -> None:
    assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
    assert model.id_to_piece([0, 1, 2, 3]) == ["<pad>", "<unk>", "<s>", "</s>"]
    assert len(model) == 80
    # ordinary text never produces pad/bos/eos
    ids = model.encode_ids(["der hund ist groß", "the big cat"])
    assert all(i > EOS_ID for seq in ids for i in seq)


def test_small_vocab_limit_is_soft_on_tiny_text(tmp_path: Path) -> None:
    # more pieces than the text can give: sentencepiece stops early instead of failing
    path = train_bpe([str(make_text(tmp_path / "t.txt", n=40))], str(tmp_path / "m"), vocab_size=5000)
    assert 30 < len(Bpe(path)) < 5000


def test_encode_decode_keep_line_count_and_empty_lines(model: Bpe) -> None:
    lines = ["der hund ist groß", "", "   ", "the  small   cat", "haus"]
    pieces = list(encode_stream(model, lines, "pieces", chunk=2))
    ids = list(encode_stream(model, lines, "ids", chunk=2))
    assert len(pieces) == len(ids) == len(lines)
    assert pieces[1] == pieces[2] == "" and ids[1] == ids[2] == ""
    back = list(decode_stream(model, pieces, "pieces", chunk=2))
    back_ids = list(decode_stream(model, ids, "ids", chunk=3))
    expected = [" ".join(line.split()) for line in lines]  # sentencepiece collapses whitespace
    assert back == back_ids == expected


def test_round_trip_equals_normalized_text(model: Bpe) -> None:
    lines = ["ein schöner baum", "ﬁsch und hund", "hund\u3000katze  "]
    decoded = model.decode_ids(model.encode_ids(lines))
    assert decoded == [model.normalize_text(x) for x in lines]
    assert decoded[1:] == ["fisch und hund", "hund katze"]  # NFKC, whitespace collapsed
    # characters absent from training come back as the unknown symbol, never silently dropped
    assert UNK_ID in model.encode_ids(["quixotic"])[0]
    assert model.decode_ids(model.encode_ids(["quixotic"])) != ["quixotic"]


def test_decode_ids_rejects_bad_input_with_line_number(model: Bpe) -> None:
    with pytest.raises(DataError, match=r"in\.ids:2: expected space-separated integer ids"):
        list(decode_stream(model, ["5 6", "5 x"], "ids", name="in.ids"))
    with pytest.raises(DataError, match=r"in\.ids:1: id out of range 0\.\.79"):
        list(decode_stream(model, ["80"], "ids", name="in.ids"))
    with pytest.raises(MtkitError, match="--format must be pieces or ids"):
        list(encode_stream(model, ["x"], "bytes"))


def test_sampling_limits_training_sentences(tmp_path: Path) -> None:
    text = make_text(tmp_path / "t.txt", n=400)
    a = Bpe(train_bpe([str(text)], str(tmp_path / "a"), vocab_size=60, input_sentence_size=20, seed=1))
    b = Bpe(train_bpe([str(text)], str(tmp_path / "b"), vocab_size=60, input_sentence_size=20, seed=1))
    c = Bpe(train_bpe([str(text)], str(tmp_path / "c"), vocab_size=60, input_sentence_size=0))
    pieces = lambda m: [m.id_to_piece([i])[0] for i in range(len(m))]  # noqa: E731
    assert pieces(a) == pieces(b)  # same seed, same sample, same model
    assert pieces(a) != pieces(c)  # 20 sampled sentences give other merges than all 400


def test_sample_is_a_seeded_uniform_subset_in_input_order(tmp_path: Path) -> None:
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("".join(f"a{i}\n" for i in range(300)) + "\n  \n", encoding="utf-8")  # blank lines skipped
    b.write_text("".join(f"b{i}\n" for i in range(300)), encoding="utf-8")
    inputs = [str(a), str(b)]
    every = [f"a{i}" for i in range(300)] + [f"b{i}" for i in range(300)]
    assert list(_sample_sentences(inputs, 0, 1)) == every
    assert list(_sample_sentences(inputs, 600, 1)) == every
    drawn = list(_sample_sentences(inputs, 50, 7))
    assert len(drawn) == 50 and len(set(drawn)) == 50
    assert drawn == sorted(drawn, key=every.index)  # input order, from both files
    assert drawn == list(_sample_sentences(inputs, 50, 7)) != list(_sample_sentences(inputs, 50, 8))
    counts = Counter(line for seed in range(200) for line in _sample_sentences(inputs, 60, seed))
    firsts, lasts = sum(counts[f"a{i}"] for i in range(100)), sum(counts[f"b{i}"] for i in range(200, 300))
    assert abs(firsts - lasts) < 0.15 * (firsts + lasts)  # each line ~ 60/600 of the draws, wherever it is
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\n")
    with pytest.raises(DataError, match="bad.txt:2"):
        next(_sample_sentences([str(a), str(bad)], 10, 1))  # before the trainer sees a line


def test_missing_or_invalid_model(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="BPE model not found: .*none.model"):
        Bpe(tmp_path / "none.model")
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"not a model")
    with pytest.raises(DataError, match="junk.model: not a sentencepiece model"):
        Bpe(junk)


def test_training_errors_are_readable(tmp_path: Path) -> None:
    text = make_text(tmp_path / "t.txt")
    with pytest.raises(MtkitError, match="Vocabulary size is smaller than required_chars") as info:
        train_bpe([str(text)], str(tmp_path / "m"), vocab_size=16)
    assert "trainer_interface.cc" not in str(info.value)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n \n", encoding="utf-8")
    with pytest.raises(DataError, match="no non-empty lines"):
        train_bpe([str(empty)], str(tmp_path / "m"), vocab_size=50)
    with pytest.raises(MtkitError, match="at least one --input"):
        train_bpe([], str(tmp_path / "m"))
