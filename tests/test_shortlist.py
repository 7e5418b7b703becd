"""Vocabulary shortlists (mtkit.decode.shortlist, `mtkit export --shortlist`, the ct2 engine's use of them):
counted from the training data, written as CTranslate2's vmap.txt, obeyed by the search, equal to the
full model where the full output lies inside the list, and never more than a choice among allowed
subwords where it does not."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from mtkit.data.shards import ParallelData
from mtkit.decode.shortlist import SPECIAL, Shortlist, build_shortlist, coverage, write_vmap
from mtkit.decode.translator import Translator
from mtkit.errors import ConfigError
from mtkit.interop.export import ShortlistOptions, run_export
from mtkit.vocab import BOS_ID, EOS_ID, UNK_ID

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import run_mtkit  # noqa: E402
from near_ties import check_texts_same_or_near_tie  # noqa: E402

needs_ct2 = pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is None,
                               reason="ctranslate2 is not installed (pip install '.[ct2]')")


def exact(model: Path, **options) -> Translator:
    return Translator(model, device="cpu", threads=1, precision="fp32", **options)


@pytest.fixture(scope="module")
def copy_data(copy_model) -> Path:
    """Training data whose targets copy their sources (each subword translates as itself)."""
    return copy_model / "data"


@pytest.fixture(scope="module")
def trained(copy_model) -> tuple[Path, list[str]]:
    """A Transformer trained for a few seconds to copy, and lines of its training text (tests/conftest.py)."""
    lines = (copy_model / "corpus.txt").read_text(encoding="utf-8").splitlines()[:40]
    return copy_model / "model", lines


def _pairs(data: Path, split: str) -> list[tuple[list[int], list[int]]]:
    d = ParallelData(data, split)
    return [(d.src[i].tolist(), d.tgt[i].tolist()) for i in range(len(d))]


# ------------------------------------------------------------------------------------------ counting
def test_each_source_subword_lists_what_its_sentences_translate_to(copy_data):
    pairs = _pairs(copy_data, "train")
    lists = build_shortlist(copy_data, per_source=1, frequent=0)
    assert lists.sentences == len(pairs)
    # in a copy task p(s | s) = 1: every source subword's first candidate is itself
    seen = {s for src, _ in pairs for s in src}
    assert all(lists.candidates[s][0] == s for s in seen)
    assert coverage(lists, pairs) == 1.0
    assert not set(lists.candidates) & set(SPECIAL)


def test_the_most_frequent_targets_are_always_allowed_and_not_repeated(copy_data):
    pairs = _pairs(copy_data, "train")
    counts: dict[int, int] = {}
    for _, tgt in pairs:
        for t in tgt:
            counts[t] = counts.get(t, 0) + 1
    lists = build_shortlist(copy_data, per_source=3, frequent=4)
    top = sorted(counts, key=lambda t: (-counts[t], t))[:4]
    assert lists.always == top
    assert all(not set(c) & set(top) for c in lists.candidates.values())
    assert lists.allowed([]) == set(top) | {UNK_ID, BOS_ID, EOS_ID}


def test_counting_fewer_sentences_covers_less(copy_data):
    dev = _pairs(copy_data, "dev")
    few = build_shortlist(copy_data, per_source=1, frequent=0, max_sentences=5)
    full = build_shortlist(copy_data, per_source=1, frequent=0)
    assert few.sentences == 5
    assert coverage(few, dev) < coverage(full, dev) == 1.0


def test_vmap_format(tmp_path):
    lists = Shortlist(always=[5, 6], candidates={4: [7, 8], 9: [10]})
    pieces = ["<pad>", "<unk>", "<s>", "</s>", "▁a", "▁b", "c", "d", "e", "f g", "h"]
    rules = write_vmap(lists, pieces, pieces, tmp_path / "vmap.txt")
    # the piece with a space cannot be a key of this format: its line is left out
    assert rules == 1
    assert (tmp_path / "vmap.txt").read_text(encoding="utf-8").splitlines() == ["\t▁b c", "▁a\td e"]


# ------------------------------------------------------------------------------------------ export
@needs_ct2
def test_export_writes_the_map_and_says_so_in_the_manifest(trained, copy_data, tmp_path):
    model, _ = trained
    out = run_export(model, tmp_path / "ct2", shortlist=ShortlistOptions(per_source=2, frequent=3,
                                                                          data=copy_data))
    manifest = json.loads((out / "mtkit_export.json").read_text(encoding="utf-8"))
    assert manifest["shortlist"]["file"] == "vmap.txt"
    assert manifest["shortlist"]["per_source"] == 2 and manifest["shortlist"]["frequent"] == 3
    lines = (out / "vmap.txt").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("\t") and len(lines[0].split()) == 3
    rules = [line.split("\t") for line in lines[1:]]
    assert all(len(rule) == 2 and 1 <= len(rule[1].split()) <= 2 for rule in rules)
    assert not (run_export(model, tmp_path / "plain") / "vmap.txt").exists()


@needs_ct2
def test_export_refuses_what_cannot_carry_a_shortlist(trained, copy_data, tmp_path):
    model, _ = trained
    with pytest.raises(ConfigError, match="Argos Translate runs CTranslate2 without vocabulary maps"):
        run_export(model, tmp_path / "m.argosmodel", fmt="argos",
                   shortlist=ShortlistOptions(per_source=2, data=copy_data))
    with pytest.raises(ConfigError, match="no prepared data in"):
        run_export(model, tmp_path / "x", shortlist=ShortlistOptions(per_source=2, data=tmp_path / "none"))
    assert not (tmp_path / "x").exists() and not (tmp_path / "m.argosmodel").exists()


# ------------------------------------------------------------------------------------------ search
@needs_ct2
def test_shortlisted_output_equals_the_full_one_where_that_lies_inside_the_list(trained, copy_data, tmp_path):
    model, lines = trained
    full_dir = run_export(model, tmp_path / "full")
    short_dir = run_export(model, tmp_path / "short",
                           shortlist=ShortlistOptions(per_source=2, frequent=2, data=copy_data))
    lists = build_shortlist(copy_data, per_source=2, frequent=2)
    full = exact(full_dir, beam_size=1)
    short = exact(short_dir, beam_size=1)
    assert short.backend.use_vmap and not full.backend.use_vmap
    found = full.translate_hypotheses(lines)
    ids = _piece_ids(full)
    sources = full.src_bpe.encode_ids(lines)
    inside = [i for i, t in enumerate(found)
              if {ids[p] for p in t.hypotheses[0].tokens} <= lists.allowed(sources[i])]
    assert len(inside) >= len(lines) // 2  # the test means something only if most lines qualify
    picked = [lines[i] for i in inside]
    # one line at a time: each is searched with its own list, not the union over a batch
    got = [short.translate([line])[0] for line in picked]
    check_texts_same_or_near_tie(exact(model, beam_size=1), picked, [found[i].text for i in inside], got,
                                 max_differing=len(picked) // 10)


@needs_ct2
@pytest.mark.parametrize("beam", [1, 4])
def test_output_needing_words_outside_the_list_only_uses_allowed_ones(trained, tmp_path, beam):
    model, lines = trained
    export = run_export(model, tmp_path / "ct2")
    short = exact(export, beam_size=beam)
    allowed_pieces = short.tgt_bpe.id_to_piece(list(range(4, 9)))
    (export / "vmap.txt").write_text("\t" + " ".join(allowed_pieces) + "\n", encoding="utf-8")
    short = exact(export, beam_size=beam)
    allowed = set(allowed_pieces) | set(short.tgt_bpe.id_to_piece([UNK_ID, BOS_ID, EOS_ID]))
    found = short.translate_hypotheses(lines + ["", "   "])
    assert len(found) == len(lines) + 2 and found[-1].text == "" and found[-2].text == ""
    for t in found[:-2]:
        assert t.text == short.tgt_bpe.decode_pieces([t.hypotheses[0].tokens])[0]
        assert set(t.hypotheses[0].tokens) <= allowed
    # the same directory with the map switched off searches every subword again
    free = exact(export, beam_size=beam, shortlist=False)
    assert not free.backend.use_vmap
    assert any(not set(t.hypotheses[0].tokens) <= allowed for t in free.translate_hypotheses(lines))


def _piece_ids(tr: Translator) -> dict[str, int]:
    return {p: i for i, p in enumerate(tr.tgt_bpe.id_to_piece(list(range(len(tr.tgt_bpe)))))}


@needs_ct2
def test_cli_export_shortlist_then_translate_with_and_without_it(trained, copy_data, tmp_path):
    model, lines = trained
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines[:8]) + "\n", encoding="utf-8")

    done = run_mtkit("export", "-m", str(model), "-o", str(tmp_path / "ct2"), "--shortlist", "3",
               "--shortlist-frequent", "2", "--shortlist-data", str(copy_data))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "ct2" / "vmap.txt").is_file()
    for flag in ([], ["--no-shortlist"]):
        done = run_mtkit("translate", "-m", str(tmp_path / "ct2"), "--greedy", "-i", str(src),
                   "-o", str(tmp_path / "out.txt"), *flag)
        assert done.returncode == 0, done.stderr
        assert len((tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()) == 8
    bad = run_mtkit("export", "-m", str(model), "-o", str(tmp_path / "y"), "--shortlist", "3",
              "--shortlist-data", str(tmp_path))
    assert bad.returncode != 0 and "no prepared data" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    shutil.rmtree(tmp_path / "ct2")


@needs_ct2
def test_the_server_runs_a_shortlisted_export_with_its_shortlist(trained, copy_data, tmp_path):
    from mtkit.options import LoadOptions
    from mtkit.serve.models import ModelSet

    model, _ = trained
    export = run_export(model, tmp_path / "ct2", shortlist=ShortlistOptions(per_source=2, data=copy_data))
    for shortlist in (True, False):  # mtkit serve --no-shortlist gives False
        served = ModelSet([export], LoadOptions(device="cpu", threads=1, shortlist=shortlist), 0.001, 8, 100)
        try:
            assert [m.translator.backend.use_vmap for m in served.models.values()] == [shortlist]
        finally:
            served.close()
