"""mtkit.decode.segment: a line is cut into the sentences a model was trained on, and a sentence too long for
the model into pieces, at clause boundaries first; nothing of the input is lost or reordered."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mtkit.data.bpe import Bpe, train_bpe
from mtkit.decode.segment import clean_line, cut_sentence, has_visible, split_sentences, valid_unicode


@pytest.mark.parametrize("text, sentences", [
    ("The house is small. Where are you going? We like tea!",
     ["The house is small.", "Where are you going?", "We like tea!"]),
    # abbreviations do not end a sentence
    ("Use a tool, e.g. Debian's dpkg, i.e. Dpkg. Then run it.",
     ["Use a tool, e.g. Debian's dpkg, i.e. Dpkg.", "Then run it."]),
    ("Dr. Smith met Mr. Jones and Prof. Lee. They talked.", ["Dr. Smith met Mr. Jones and Prof. Lee.",
                                                           "They talked."]),
    ("See No. 5 and Fig. 3 in vol. 2. It is there.", ["See No. 5 and Fig. 3 in vol. 2.", "It is there."]),
    ("J. R. R. Tolkien lived in the U.S. for a while.", ["J. R. R. Tolkien lived in the U.S. for a while."]),
    # "etc." ends a sentence only when a sentence follows
    ("Files, dirs, etc. are copied. Links, etc. The rest is not.",
     ["Files, dirs, etc. are copied.", "Links, etc.", "The rest is not."]),
    # numbers, file names, versions and URLs have no space after their dots
    ("Version 3.5 reads config.yaml from www.debian.org/doc. Edit it.",
     ["Version 3.5 reads config.yaml from www.debian.org/doc.", "Edit it."]),
    ("It costs 3.50 EUR. 2 of them cost 7.", ["It costs 3.50 EUR.", "2 of them cost 7."]),
    # ellipses end a sentence before a capital, not before a lowercase word
    ("Wait... What happened? Well... nothing.", ["Wait...", "What happened?", "Well... nothing."]),
    # quotes and brackets stay with their sentence
    ('He said "Stop." Then he left. (It was late.) "Why?" she asked.',
     ['He said "Stop."', "Then he left.", "(It was late.)", '"Why?" she asked.']),
    # list numbers at the start of a sentence
    ("1. Install the package. 2. Run it.", ["1. Install the package.", "2. Run it."]),
    # technical text starts sentences with lowercase names, but not after an abbreviation
    ("rm removes files. rm -r removes directories, i.e. trees. zcat reads them.",
     ["rm removes files.", "rm -r removes directories, i.e. trees.", "zcat reads them."]),
    ("Set the max. size of logs, etc. and the rest (e.g. the age). done", ["Set the max. size of logs, "
                                                                         "etc. and the rest (e.g. the age).",
                                                                         "done"]),
    ("the cat sat . on the mat", ["the cat sat .", "on the mat"]),  # tokenized text
    ("Use -v. -q is quiet. Yahoo! is a name? yes", ["Use -v. -q is quiet.", "Yahoo! is a name? yes"]),
    # no final punctuation is fine
    ("no final punctuation here", ["no final punctuation here"]),
    ("Two parts. The second has no end", ["Two parts.", "The second has no end"]),
    # full-width ends need no space; other scripts' ends take the Latin rule
    ("这是第一句。这是第二句！第三句？", ["这是第一句。", "这是第二句！", "第三句？"]),
    ("「これはペンです。」それは本です。", ["「これはペンです。」", "それは本です。"]),
    ("Это дом. Где ты?", ["Это дом.", "Где ты?"]),
    ("यह घर है। वह कहाँ है?", ["यह घर है।", "वह कहाँ है?"]),
])
def test_split_sentences(text, sentences):
    assert split_sentences(text) == sentences


def test_one_sentence_comes_back_unchanged_and_nothing_is_lost():
    rng = random.Random(0)
    words = ["The", "cat", "sat.", "e.g.", "Dr.", "3.5", "etc.", "Why?", "no!", "日本。", "x", "(See", "it.)",
             "...", "A.", "1.", "config.yaml.", '"Hi."']
    for _ in range(500):
        text = clean_line(" ".join(rng.choice(words) for _ in range(rng.randint(1, 30))))
        parts = split_sentences(text)
        assert " ".join(parts).replace(" ", "") == text.replace(" ", "")
        assert all(p == p.strip() and p for p in parts)
        if len(parts) == 1:
            assert parts == [text]
    assert split_sentences("") == []


@pytest.fixture(scope="module")
def bpe(tmp_path_factory) -> Bpe:
    root = tmp_path_factory.mktemp("bpe")
    rng = random.Random(1)
    words = ["river", "stone", "light", "window", "door", "table", "and", "the", "is", ",", ";", ":", "."]
    (root / "corpus.txt").write_text("\n".join(" ".join(rng.choice(words) for _ in range(12))
                                               for _ in range(300)) + "\n", encoding="utf-8")
    return Bpe(train_bpe([str(root / "corpus.txt")], str(root / "bpe"), vocab_size=60))


def _text(bpe: Bpe, ids: list[int]) -> str:
    return bpe.decode_ids([ids])[0]


def test_cut_sentence_prefers_the_strongest_clause_boundary(bpe: Bpe):
    a = "the river and the stone is light"
    text = f"{a}, {a} {a}; {a}"
    ids = bpe.encode_ids([text])[0]
    assert cut_sentence(text, ids, bpe, len(ids)) == [ids]  # fits: untouched
    head = len(bpe.encode_ids([f"{a}, {a} {a};"])[0])
    # the ';' makes pieces that fit: not the ',', nor windows of equal size
    pieces = cut_sentence(text, ids, bpe, head)
    assert [_text(bpe, p) for p in pieces] == [f"{a}, {a} {a};", a]
    pieces = cut_sentence(text, ids, bpe, head - 1)  # then the ',' inside the clause too long
    assert [_text(bpe, p) for p in pieces] == [f"{a},", f"{a} {a};", a]
    three = f"{a}: {a}: {a}"
    pieces = cut_sentence(three, bpe.encode_ids([three])[0], bpe, len(bpe.encode_ids([f"{a}:"])[0]) + 1)
    assert [_text(bpe, p) for p in pieces] == [f"{a}:", f"{a}:", a]


def test_cut_sentence_windows_keep_every_subword_in_order(bpe: Bpe):
    text = " ".join(random.Random(2).choice(["river", "stone", "light", "window"]) for _ in range(300))
    ids = bpe.encode_ids([text])[0]
    for limit in (8, 13, 50, 299):
        pieces = cut_sentence(text, ids, bpe, limit)
        assert [t for p in pieces for t in p] == ids
        assert all(0 < len(p) <= limit for p in pieces)
        assert len(pieces) <= -(-len(ids) // limit) + 1  # about equal windows, not a tiny last one
    pieces = cut_sentence(text, ids, bpe, 50)
    assert all(bpe.id_to_piece(p[:1])[0].startswith("\u2581") for p in pieces)  # cut before whole words


def test_clean_line_collapses_control_characters(tmp_path: Path):
    assert clean_line("a\x00b\tc\x1b[0m  d\r") == "a b c [0m d"
    assert clean_line(" \t\x0b ") == ""


def test_surrogates_become_valid_unicode():
    assert valid_unicode("c\ud800") == "c\ufffd"  # half an emoji: U+FFFD, as an undecodable byte
    assert valid_unicode("\udc80 x \ud800") == "\ufffd x \ufffd"
    assert valid_unicode("a\ud83d\ude00b") == "a\U0001f600b"  # a pair as two code points: its character
    assert valid_unicode("plain text, 木") == "plain text, 木"
    assert clean_line("c\ud800").encode("utf-8") == "c\ufffd".encode()


@pytest.mark.parametrize("text", ["\u202e\u200b", "\u200b", "\ufe0f", "\u2066 \u2069", "\u00ad\u200d",
                                  "\ufeff\u200e\u200f", "\U000e0041\U000e007f", "\u3164", "\u034f\u180e"])
def test_a_line_with_nothing_visible_is_empty(text):
    assert not has_visible(text)
    assert clean_line(text) == ""


def test_visible_text_keeps_its_format_characters():
    for text in ["\u202eabc", "\u0301", "\ufffd", "a\u200db", "\ue000", "\u2800"]:
        assert has_visible(text) and clean_line(text) == text
    assert split_sentences("你好。\u200b") == ["你好。"]  # no sentence of format characters alone
