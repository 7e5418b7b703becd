"""Training pairs given markup (mtkit.data.markup_augment, ``data.markup_augmentation``): the same
pairs for the same seed, exactly the fraction asked for, each insertion a matched placeholder or tag
pair on both sides, the data's own markup left alone, and `mtkit prepare` training BPE and writing the
shards from the augmented pairs when the key is set."""

from __future__ import annotations

import io
import random
import re
from collections import Counter
from pathlib import Path

from rich.console import Console

from mtkit.config.experiment import load_config
from mtkit.data.bpe import Bpe
from mtkit.data.markup_augment import augment_pair, augment_pairs
from mtkit.data.prepare import prepare
from mtkit.data.shards import ParallelData
from mtkit.placeholders.syntaxes import kept, placeholders
from mtkit.vocab import UNK_ID

WORDS = ["open", "the", "file", "save", "now", "close", "window", "print", "page", "list"]


def pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """Pairs whose target copies one name and one number from the source (the copied tokens)."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        words = [rng.choice(WORDS) for _ in range(rng.randint(2, 6))]
        name, number = f"pkg{k}", str(rng.randint(2, 999))
        src = " ".join(words[:2] + [name] + words[2:] + [number]) + "."
        tgt = " ".join([w.upper() for w in words[2:]] + [name, number] + [w.upper() for w in words[:2]]) + "."
        out.append((src, tgt))
    return out


def test_the_same_seed_gives_the_same_pairs_and_another_seed_others():
    data = pairs(200)
    first = list(augment_pairs(data, 0.3, seed=1))
    assert first == list(augment_pairs(data, 0.3, seed=1))
    assert first != list(augment_pairs(data, 0.3, seed=2))


def test_exactly_the_fraction_is_augmented_each_with_the_same_markup_on_both_sides():
    data = pairs(400)
    out = list(augment_pairs(data, 0.25, seed=3))
    changed = [(new, old) for new, old in zip(out, data, strict=True) if new != old]
    assert len(changed) == 100
    kinds = Counter()
    for (src, tgt), _ in changed:
        found = placeholders(src)
        assert found and Counter(found) == Counter(placeholders(tgt)), (src, tgt)
        assert kept(src, tgt) == "", (src, tgt)  # tags nested alike, printf's order the same
        kinds["tag" if found[0].startswith("<") else "placeholder"] += 1
        kinds["inside"] += not (src.startswith(found[0]) or src.rstrip(".").endswith(found[-1]))
    assert kinds["tag"] > 10 and kinds["placeholder"] > 10 and kinds["inside"] > 10
    assert list(augment_pairs(data, 0.0, seed=3)) == data


def test_a_copied_token_is_where_a_placeholder_goes_on_both_sides():
    rng = random.Random(0)
    seen = {augment_pair("remove pkg7 from the list", "ENTFERNE pkg7 AUS DER LISTE", rng) for _ in range(60)}
    inside = [(s, t) for s, t in seen if "pkg7" not in s and not s.startswith(("%", "{", "$"))]
    assert inside, "a placeholder in the copied token's place"
    for src, tgt in inside:
        assert src.split()[1] == tgt.split()[1]  # the second word on both sides: where pkg7 was
    wrapped = [(s, t) for s, t in seen if "pkg7</" in s]
    around = re.compile(r"<(\w+)[^>]*>pkg7</\1>")
    assert wrapped and all(around.search(s)[0] == around.search(t)[0] for s, t in wrapped)  # type: ignore[index]


def test_pairs_that_hold_markup_are_left_as_they_are():
    rng = random.Random(0)
    for pair in [("Open <b>file</b> now", "Öffne <b>Datei</b> jetzt"), ("%d files", "%d Dateien"),
                 ("Tom & Jerry 5", "Tom & Jerry 5"), ("100% sure 5", "100% sicher 5"), ("", "leer")]:
        assert all(augment_pair(*pair, rng) == pair for _ in range(20))


def test_prepare_trains_bpe_and_writes_shards_from_the_augmented_pairs(tmp_path: Path):
    data = pairs(60)
    for name in ("train", "dev"):
        (tmp_path / f"{name}.en").write_text("".join(p[0] + "\n" for p in data), encoding="utf-8")
        (tmp_path / f"{name}.de").write_text("".join(p[1] + "\n" for p in data), encoding="utf-8")

    def prepared(out: str, *sets: str) -> Bpe:
        files = [f"data.{split}_{side}={tmp_path / split}.{lang}" for split in ("train", "dev")
                 for side, lang in (("src", "en"), ("tgt", "de"))]
        cfg = load_config(None, [*files, f"data.dir={tmp_path / out}", "bpe.vocab_size=120", *sets])
        prepare(cfg, console=Console(file=io.StringIO()))
        return Bpe(tmp_path / out / "bpe.model")

    plain = prepared("plain")
    assert UNK_ID in plain.encode_ids(["<b> %s"])[0]  # a model of this data could not write them
    bpe = prepared("augmented", "data.markup_augmentation=0.5", "training.seed=4")
    assert UNK_ID not in bpe.encode_ids(["<"])[0] and UNK_ID not in bpe.encode_ids(["%"])[0]
    train = ParallelData(tmp_path / "augmented", "train")
    expected = list(augment_pairs(data, 0.5, seed=4))
    assert [train.src[i].tolist() for i in range(len(train))] == bpe.encode_ids([s for s, _ in expected])
    dev = ParallelData(tmp_path / "augmented", "dev")  # dev and test are the user's as they are
    assert [dev.src[i].tolist() for i in range(len(dev))] == bpe.encode_ids([s for s, _ in data])
    assert not (tmp_path / "augmented").joinpath("train.src").exists() and \
        not list(tmp_path.glob(".augmented-*"))
