"""`mtkit export` and the ct2 engine: an exported model computes what the original computes, translates
like `mtkit translate --precision fp32` line for line, keeps every guarantee of `mtkit translate`, and
a model CTranslate2 cannot express is refused with one line.

Models are tiny: random ones (every architecture option, weights and norms perturbed so that no
tensor is an identity) for the converter, and one trained for a few seconds to copy its input for the
search. Tests that need ctranslate2 (or argostranslate) are skipped when it is not installed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import json
import math
import random
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import torch

from mtkit.checkpoint import load_checkpoint, save_checkpoint
from mtkit.config.experiment import Config, ModelConfig, to_dict
from mtkit.data.bpe import Bpe, train_bpe
from mtkit.decode.engine import resolve_engine
from mtkit.decode.loader import load_model
from mtkit.decode.translator import Translator
from mtkit.errors import CheckpointError, ConfigError, MtkitError
from mtkit.interop.export import check_expressible, run_export
from mtkit.interop.manifest import MANIFEST, is_exported, read_manifest
from mtkit.models import build_model

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import Result, run_mtkit  # noqa: E402
from near_ties import ForcedScorer, check_same_or_near_tie  # noqa: E402

needs_ct2 = pytest.mark.skipif(importlib.util.find_spec("ctranslate2") is None,
                               reason="ctranslate2 is not installed (pip install 'mtkit[ct2]')")
WORDS = ["the", "house", "is", "small", ".", "a", "cat", "sat", "on", "mat", "!", "where", "are", "you",
         "going", "?", "we", "like", "green", "tea", "and", "bread", "every", "day", ",", "but", "not"]
VARIANTS = {
    "post-norm, sinusoidal, tied": {},
    "pre-norm, learned positions": {"norm": "pre", "positions": "learned", "max_positions": 64},
    "relative positions, gelu": {"positions": "relative", "max_relative_distance": 3, "activation": "gelu"},
    "separate vocabularies, untied": {"tie_embeddings": False, "share_all_embeddings": False},
}


def exact(model: Path, **options) -> Translator:
    """One thread, fp32, CPU: both engines' results then do not depend on batching."""
    return Translator(model, device="cpu", threads=1, precision="fp32", **options)


def random_model(root: Path, bpe_dir: Path, joint: bool = True, arch: str = "transformer", **model) -> Path:
    """A model directory with a random model; every weight, LayerNorm included, is perturbed away
    from its initial value so that a swapped or dropped tensor changes the output."""
    root.mkdir(parents=True)
    src, tgt = ("bpe.model", "bpe.model") if joint else ("src.model", "tgt.model")
    for name in {src, tgt}:
        (root / name).write_bytes((bpe_dir / name).read_bytes())
    sizes = len(Bpe(root / src)), len(Bpe(root / tgt))
    cfg = Config()
    cfg.model = ModelConfig(arch=arch, d_model=32, heads=4, d_ff=48, encoder_layers=2, decoder_layers=2,
                            emb_dim=16, hidden_size=32, dropout=0.0, **model)
    torch.manual_seed(0)
    net = build_model(cfg.model, *sizes, joint)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    meta = {"src_lang": "en", "tgt_lang": "de", "joint": joint, "src_bpe": src, "tgt_bpe": tgt,
            "src_vocab_size": sizes[0], "tgt_vocab_size": sizes[1]}
    save_checkpoint({"model": net.state_dict(), "config": to_dict(cfg), "vocab": meta},
                    root / "checkpoint_best.pt")
    (root / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return root


def sentences(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) for _ in range(n)]


@pytest.fixture(scope="module")
def bpe_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bpe")
    corpus = root / "corpus.txt"
    corpus.write_text("\n".join(sentences(300, seed=0)) + "\n", encoding="utf-8")
    for name, size in (("bpe", 60), ("src", 60), ("tgt", 45)):
        train_bpe([str(corpus)], str(root / name), vocab_size=size)
    return root


@pytest.fixture(scope="module")
def trained(copy_model, tmp_path_factory) -> tuple[Path, Path, list[str]]:
    """(model dir, its float32 export, input lines): a Transformer trained for a few seconds to copy
    its input, so that its translations are neither empty nor degenerate (tests/conftest.py)."""
    root = tmp_path_factory.mktemp("trained")
    lines = (copy_model / "corpus.txt").read_text(encoding="utf-8").splitlines()[:24]
    exported = (run_export(copy_model / "model", root / "ct2") if importlib.util.find_spec("ctranslate2")
                else root)
    return copy_model / "model", exported, lines


HOSTILE = ["", "   ", "a\x00b\x07c\td\re", "ab " * 40]  # empty, blank, control characters, long


# ------------------------------------------------------------------------------------- converter
@needs_ct2
@pytest.mark.parametrize("variant", list(VARIANTS))
def test_exported_model_computes_the_same_log_probabilities(variant, bpe_dir, tmp_path):
    options = VARIANTS[variant]
    joint = options.get("share_all_embeddings", True)
    model_dir = random_model(tmp_path / "m", bpe_dir, joint=joint, **options)
    exported = run_export(model_dir, tmp_path / "ct2")
    import ctranslate2

    loaded = load_model(model_dir)
    src_bpe, tgt_bpe = Bpe(model_dir / loaded.meta.src_bpe), Bpe(model_dir / loaded.meta.tgt_bpe)
    sources, targets = src_bpe.encode_ids(sentences(6, 2)), tgt_bpe.encode_ids(sentences(6, 3))
    ct2 = ctranslate2.Translator(str(exported), compute_type="float32", intra_threads=1)
    scored = ct2.score_batch([src_bpe.id_to_piece(s) for s in sources],
                             [tgt_bpe.id_to_piece(t) for t in targets])
    for src, tgt, result in zip(sources, targets, scored, strict=True):
        with torch.no_grad():
            logits, _ = loaded.model(torch.tensor([src]), torch.tensor([[2, *tgt]]))
        log_probs = torch.log_softmax(logits.float(), -1)[0]
        expected = log_probs.gather(1, torch.tensor([[*tgt, 3]]).t()).squeeze(1)  # the reference, then EOS
        assert torch.allclose(torch.tensor(result.log_probs), expected, atol=1e-4), variant
    lines = sentences(6, 4)  # step-by-step decoding: cached positions, relative distances, the limit
    reference = exact(model_dir, beam_size=1)
    check_same_or_near_tie(reference, lines, reference.translate_hypotheses(lines),
                           exact(exported, beam_size=1).translate_hypotheses(lines), max_ties=3,
                           ct2_involved=True)


@needs_ct2
def test_export_writes_the_model_its_tokenizer_and_a_manifest(trained):
    _, exported, _ = trained
    assert is_exported(exported)
    for name in ("model.bin", "config.json", "shared_vocabulary.json", "bpe.model", MANIFEST):
        assert (exported / name).is_file(), name
    manifest = json.loads((exported / MANIFEST).read_text(encoding="utf-8"))
    assert manifest["tokenize"]["source_model"] == manifest["tokenize"]["target_model"] == "bpe.model"
    assert manifest["special_tokens"] == {"pad": "<pad>", "unk": "<unk>", "bos": "<s>", "eos": "</s>"}
    assert manifest["quantization"] == "float32" and manifest["config"]["model"]["arch"] == "transformer"


def test_rnn_is_refused_with_one_line_and_nothing_written(bpe_dir, tmp_path):
    model_dir = random_model(tmp_path / "rnn", bpe_dir, arch="rnn")
    with pytest.raises(MtkitError) as info:
        run_export(model_dir, tmp_path / "out")
    message = str(info.value)
    assert "model.arch=rnn" in message and "\n" not in message
    assert not (tmp_path / "out").exists()


def test_an_option_ctranslate2_lacks_is_named():
    with pytest.raises(MtkitError, match=r"model\.norm='sandwich'"):
        check_expressible(dataclasses.replace(ModelConfig(), norm="sandwich"))  # type: ignore[arg-type]
    check_expressible(ModelConfig(norm="pre", positions="relative", activation="gelu"))


def test_a_model_whose_width_model_size_auto_chose_exports():
    """`make demo` trains with model.size auto; its config.yaml keeps `size: auto` beside the shape."""
    check_expressible(dataclasses.replace(ModelConfig(), size="auto", d_model=128, d_ff=512))


@needs_ct2
def test_output_that_is_not_an_export_is_never_overwritten(trained, tmp_path):
    model_dir, _, _ = trained
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError, match="choose a new or empty directory"):
        run_export(model_dir, tmp_path / "notes")
    assert (tmp_path / "notes" / "keep.txt").read_text() == "mine"
    first = run_export(model_dir, tmp_path / "again")
    (first / "stale.txt").write_text("from the first export")
    run_export(model_dir, tmp_path / "again")  # an earlier export is replaced whole
    assert is_exported(tmp_path / "again") and not (tmp_path / "again" / "stale.txt").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# ----------------------------------------------------------------------------------------- engine
def test_engine_is_decided_by_the_directory(trained, tmp_path):
    model_dir, _, _ = trained
    fake = tmp_path / "exported"
    fake.mkdir()
    (fake / MANIFEST).write_text("{}")
    (fake / "model.bin").write_bytes(b"")
    assert resolve_engine(model_dir) == "torch" and resolve_engine(fake) == "ct2"
    with pytest.raises(ConfigError, match="--engine torch"):
        resolve_engine(fake, "torch")
    with pytest.raises(ConfigError, match="mtkit export"):
        resolve_engine(model_dir, "ct2")


def test_without_ctranslate2_torch_works_and_ct2_says_how_to_install(trained, tmp_path, monkeypatch):
    model_dir, _, lines = trained
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 now fails
    with pytest.raises(MtkitError, match=r"pip install 'mtkit\[ct2\]'"):
        run_export(model_dir, tmp_path / "out")
    assert len(exact(model_dir, beam_size=1).translate(lines[:3])) == 3


@needs_ct2
@pytest.mark.parametrize("settings", [{"beam_size": 1}, {"beam_size": 4},
                                      {"beam_size": 4, "overrides": ["decoding.length_norm=none"]}],
                         ids=["greedy", "beam4", "beam4-no-length-norm"])
def test_outputs_equal_torch_fp32_line_for_line(trained, settings):
    """Line for line the same output as the torch engine, but for near-ties (tests/near_ties.py): the
    two engines round differently, and differently again on each CPU kind, and CTranslate2 renormalises
    after removing <pad> and <s>. A line whose search (replayed on the PyTorch model) made a decision
    within that noise may differ; every other line must be identical, and at least half the lines must
    be such clear lines (on AVX2: all 28 greedy, 22 of 28 at beam 4; with generic code 18), so that a
    broken export, which changes nearly every line, fails."""
    model_dir, exported, lines = trained
    lines = lines + HOSTILE
    settings = dict(settings)
    overrides = [*settings.pop("overrides", []), "decoding.max_input_tokens=24"]  # the long line is split
    reference = exact(model_dir, overrides=overrides, **settings)
    torch_run = reference.translate_hypotheses(lines, True)
    ct2 = exact(exported, overrides=overrides, **settings)
    assert ct2.engine == "ct2"
    ct2_run = ct2.translate_hypotheses(lines, need_attention=True)
    differing = check_same_or_near_tie(reference, lines, torch_run, ct2_run, max_ties=len(lines) // 2,
                                       ct2_involved=True)
    assert sum(bool(t.text) for t in torch_run) >= len(lines) - 2  # not a degenerate model
    for n, (a, b) in enumerate(zip(torch_run, ct2_run, strict=True)):
        if a.hypotheses and n not in differing:
            assert b.hypotheses[0].token_ids == a.hypotheses[0].token_ids
            # the mean of the last layer's heads at each output token (alignments are its argmax per
            # row; the EOS row is left out: CTranslate2 has none where it cut a hypothesis at its limit)
            rows = len(a.hypotheses[0].token_ids)
            heads_mean = a.hypotheses[0].attention.mean(0, keepdim=True)[:, :rows]
            assert b.hypotheses[0].attention[:, :rows].shape == heads_mean.shape
            assert torch.allclose(b.hypotheses[0].attention[:, :rows], heads_mean, atol=1e-4)
            # CTranslate2 renormalises after blocking <pad> and <s>: log-probabilities differ a little
            assert b.hypotheses[0].log_prob == pytest.approx(a.hypotheses[0].log_prob, rel=0.05, abs=0.1)


@needs_ct2
@pytest.mark.parametrize("beam", [1, 3])
def test_every_sentence_keeps_its_own_length_limit(trained, beam):
    model_dir, exported, lines = trained
    overrides = ["decoding.max_len_a=0.5", "decoding.max_len_b=1"]  # most sentences reach the limit
    ct2 = exact(exported, beam_size=beam, overrides=overrides)
    bpe = Bpe(exported / "bpe.model")
    for line, tr in zip(lines, ct2.translate_hypotheses(lines), strict=True):
        assert len(tr.hypotheses[0].token_ids) <= int(0.5 * len(bpe.encode_ids([line])[0]) + 1)
    if beam == 1:  # greedy search is cut where mtkit forces EOS: the same text, and EOS is scored
        torch_engine = exact(model_dir, beam_size=1, overrides=overrides)
        reference = torch_engine.translate_hypotheses(lines)
        found = ct2.translate_hypotheses(lines)
        differing = check_same_or_near_tie(torch_engine, lines, reference, found,
                                           max_ties=len(lines) // 2, ct2_involved=True)
        for n, (a, b) in enumerate(zip(reference, found, strict=True)):
            if n not in differing:
                assert b.hypotheses[0].log_prob == pytest.approx(a.hypotheses[0].log_prob, rel=0.05, abs=0.1)


class _Counting:
    """A CTranslate2 translator that counts its score_batch calls (the forced-EOS pass) and records
    each search call: the length limit and the sources' lengths."""

    def __init__(self, inner):
        self.inner, self.scored, self.calls = inner, 0, []

    def score_batch(self, *args, **kwargs):
        self.scored += 1
        return self.inner.score_batch(*args, **kwargs)

    def translate_batch(self, source, **kwargs):
        self.calls.append((kwargs["max_decoding_length"], [len(pieces) for pieces in source]))
        return self.inner.translate_batch(source, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def _counted(exported, **options):
    tr = exact(exported, **options)
    tr.backend.translator = _Counting(tr.backend.translator)
    return tr, tr.backend.translator


@needs_ct2
@pytest.mark.parametrize("beam", [1, 3])
@pytest.mark.parametrize("limit", ["short", "usual"])
def test_sentences_of_close_limits_share_a_search_and_get_what_their_own_limit_gives(trained, beam, limit):
    """Sentences whose length limits are within 1.25x go to CTranslate2 as one call at the highest
    (a call per limit cut a server's batches into calls of one or two sentences), yet each gets
    exactly what a search alone, with its own limit, gives: a greedy hypothesis is cut at its own
    limit and scored again; a beam search that ran on to its own limit is searched again with it.
    Scores equal too (fp32, one thread: no batch effects)."""
    _, exported, lines = trained
    overrides = ["decoding.max_len_a=0.5", "decoding.max_len_b=1"] if limit == "short" else []
    alone = exact(exported, beam_size=beam, overrides=overrides)
    reference = [alone.translate_hypotheses([line])[0] for line in lines]
    together, counting = _counted(exported, beam_size=beam, overrides=overrides)
    found = together.translate_hypotheses(lines)
    for a, b in zip(reference, found, strict=True):
        assert b.hypotheses[0].token_ids == a.hypotheses[0].token_ids
        assert b.hypotheses[0].log_prob == pytest.approx(a.hypotheses[0].log_prob, abs=1e-4)
    cfg = together.decoding
    own = {n: math.floor(n * cfg.max_len_a + cfg.max_len_b) for _, ns in counting.calls for n in ns}
    sizes = list(itertools.accumulate(len(ns) for _, ns in counting.calls))
    first, again = counting.calls[: sizes.index(len(lines)) + 1], counting.calls[sizes.index(len(lines)) + 1:]
    assert len(first) < len({own[n] for _, ns in first for n in ns})  # fewer calls than limits
    for call_limit, ns in first:
        assert all(own[n] <= call_limit <= 1.25 * own[n] for n in ns)
    if beam == 1:  # cut at its own limit
        assert not again
    else:  # those that ran on to their own limit, again with it (most where the limits are short)
        assert sum(len(ns) for _, ns in again) < len(lines)
        assert bool(again) or limit == "usual"
        assert all(call_limit == own[n] for call_limit, ns in again for n in ns)


@needs_ct2
@pytest.mark.parametrize("beam", [1, 3])
def test_a_score_is_computed_again_only_where_it_is_read(trained, beam):
    """Without --scores/--json/--nbest (SearchOptions.scores False) a hypothesis cut at the limit is
    not scored again (neither its forced EOS nor, for greedy search cut shorter than found, its
    tokens), except where the scores rank a beam's hypotheses; the text is the same either way."""
    _, exported, lines = trained
    overrides = ["decoding.max_len_a=0.5", "decoding.max_len_b=1"]  # most sentences reach the limit
    runs = {}
    for scores in (True, False):
        tr, counting = _counted(exported, beam_size=beam, overrides=overrides, scores=scores)
        runs[scores] = (tr.translate(lines), counting.scored, counting.calls)
    assert runs[False][0] == runs[True][0] and runs[True][2] == runs[False][2]
    assert runs[True][1] > 0
    assert runs[False][1] == (0 if beam == 1 else runs[True][1])


def test_limit_buckets_join_close_limits_highest_first_until_a_sub_batch_is_full():
    from mtkit.decode.ct2 import _limit_buckets

    limits = [10, 40, 12, 50, 11, 8, 100, 10]
    lengths = [5, 30, 6, 40, 6, 4, 90, 5]
    groups = _limit_buckets(limits, lengths)
    assert sorted(i for g in groups for i in g) == list(range(len(limits)))
    assert [[limits[i] for i in g] for g in groups] == [[100], [50, 40], [12, 11, 10, 10], [8]]
    # a group holding a sub-batch's worth of subwords takes no more (12 and 11 hold 12 of 7)
    assert [[limits[i] for i in g] for g in _limit_buckets(limits, lengths, capacity=7)] == \
        [[100], [50], [40], [12, 11], [10, 10], [8]]
    assert _limit_buckets([7] * 5, [3] * 5, capacity=1) == [[0, 1, 2, 3, 4]]  # one limit: one group


@needs_ct2
def test_everything_that_changes_a_translation_travels_into_the_export(trained, tmp_path, capsys):
    """The input limit a model was trained with (data.max_len: a longer sentence is cut into parts),
    its languages, BPE models and decoding defaults reach the ct2 engine exactly as the torch engine
    sees them in the model directory (an export once kept only the model and decoding sections, so
    the ct2 engine translated such sentences whole)."""
    model_dir, _, _ = trained
    short = tmp_path / "short"
    shutil.copytree(model_dir, short, ignore=shutil.ignore_patterns("*.lock"))
    for checkpoint in short.glob("checkpoint*.pt"):
        state = load_checkpoint(checkpoint)
        state["config"]["data"]["max_len"] = 12
        state["config"]["decoding"].update(beam_size=3, max_len_a=1.5, length_penalty=0.6)
        save_checkpoint(state, checkpoint)
    exported = run_export(short, tmp_path / "ct2")
    torch_engine, ct2 = exact(short), exact(exported)
    assert ct2.engine == "ct2" and torch_engine.max_input_tokens == ct2.max_input_tokens == 12
    assert ct2._limit_reason == torch_engine._limit_reason
    assert ct2.decoding == torch_engine.decoding and ct2.config.model == torch_engine.config.model
    assert ct2.config.data.max_len == 12
    assert (ct2.meta.src_lang, ct2.meta.tgt_lang, ct2.meta.src_bpe, ct2.meta.tgt_bpe) == \
        (torch_engine.meta.src_lang, torch_engine.meta.tgt_lang, torch_engine.meta.src_bpe,
         torch_engine.meta.tgt_bpe)
    long_line = "gli id k gje hk lfb ab ba fe ll kji ca de gh"  # 38 subwords: 4 parts of at most 12
    capsys.readouterr()
    for engine in (torch_engine, ct2):
        engine.translate([long_line])
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 2 and warnings[0] == warnings[1] and "in 4 parts" in warnings[0], warnings


@needs_ct2
def test_an_export_without_the_input_limit_says_so(trained, tmp_path, capsys):
    """Exports of format version 1 lack data.max_len: they still load, with one warning line."""
    _, exported, _ = trained
    old = tmp_path / "old"
    shutil.copytree(exported, old)
    manifest = json.loads((old / MANIFEST).read_text(encoding="utf-8"))
    manifest["version"] = 1
    del manifest["config"]["data"]
    (old / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
    capsys.readouterr()
    assert exact(old).config.data.max_len == 250  # the default: what version 1 gave
    warning = capsys.readouterr().err.splitlines()
    assert len(warning) == 1 and "without the model's input limit" in warning[0] and "export" in warning[0]


def test_a_manifest_whose_config_is_not_a_mapping_is_one_line(tmp_path):
    """A hand-edited or truncated manifest is a one-line CheckpointError, never a traceback."""
    (tmp_path / "model.bin").write_bytes(b"")
    for config in ([1, 2], "x", {"data": 5}, None):
        (tmp_path / MANIFEST).write_text(json.dumps({"format": "mtkit-ct2", "version": 2, "config": config}),
                                         encoding="utf-8")
        with pytest.raises(CheckpointError, match="corrupt export manifest"):
            read_manifest(tmp_path)


@needs_ct2
def test_nbest_lists_and_scores_through_the_python_api(trained):
    _, exported, lines = trained
    ct2 = exact(exported, beam_size=4, nbest=3)
    found = ct2.translate_hypotheses(lines[:6])
    assert [t.text for t in found] == ct2.translate(lines[:6])
    for tr in found:
        scores = [h.score for h in tr.hypotheses]
        assert len(scores) == 3 and scores == sorted(scores, reverse=True)
        assert all(h.log_prob <= 0 and h.tokens for h in tr.hypotheses)


@needs_ct2
def test_int8_export_loads_and_translates(trained, tmp_path):
    model_dir, exported, lines = trained
    int8 = run_export(model_dir, tmp_path / "int8", quantization="int8")
    assert (int8 / "model.bin").stat().st_size < (exported / "model.bin").stat().st_size
    found = Translator(int8, device="cpu", threads=1).translate_hypotheses(lines + HOSTILE)
    assert len(found) == len(lines) + len(HOSTILE)
    reference = exact(model_dir).translate_hypotheses(lines)
    # What int8 keeps on every CPU kind: its translations are nearly as probable under the fp32 model
    # as the fp32 model's own (mean log-probability a token, EOS included). How many lines come out
    # identical is not such a property: int8 matrix products round differently per ISA (AVX2 without
    # VNNI can saturate int16 sums); 17 of these 24 lines were equal on an AVX-512 machine, 10 on an AVX2
    # one. Measured on AVX2 (both CTranslate2 ISAs): -0.32 for the fp32 model's output, -0.65 for
    # int8's; exports broken on purpose (a transposed out_proj, positions off by one, no √d scale) gave
    # -4.3 to -6.1; a uniform guess over this vocabulary is -3.2. Allowed: 1.0 below fp32.
    scorer = ForcedScorer(model_dir)

    def per_token(translations) -> float:
        total = tokens = 0.0
        for line, tr in zip(lines, translations, strict=False):
            src = scorer.bpe.encode_ids([line])[0]
            total += scorer.score(src, tr.hypotheses[0].token_ids)
            tokens += len(tr.hypotheses[0].token_ids) + 1
        return total / tokens
    fp32_quality, int8_quality = per_token(reference), per_token(found[:len(lines)])
    assert int8_quality >= fp32_quality - 1.0, (int8_quality, fp32_quality)


@needs_ct2
def test_options_the_engine_cannot_honour_are_refused(trained, bpe_dir, tmp_path):
    _, exported, _ = trained
    with pytest.raises(ConfigError, match="--seed"):
        exact(exported, sample=True, seed=1)
    with pytest.raises(ConfigError, match="--ensemble"):
        exact(exported, ensemble=[exported])
    two_layers = run_export(random_model(tmp_path / "m", bpe_dir), tmp_path / "ct2")
    with pytest.raises(ConfigError, match="--attention-layer 0"):
        exact(two_layers, attention_layer=0)
    terms = tmp_path / "terms.tsv"
    terms.write_text("a\tb\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="--glossary: the ct2 engine has no constrained decoding"):
        exact(exported, glossary=terms)


@needs_ct2
def test_ct2_engine_leaves_process_settings_alone(trained):
    _, exported, lines = trained
    before = torch.get_num_threads()
    Translator(exported, device="cpu", threads=2).translate(lines[:4])
    assert torch.get_num_threads() == before


# -------------------------------------------------------------------------------------------- CLI
def mtkit(*args: str, stdin: str | None = None) -> Result:
    return run_mtkit(*args, input=stdin)


def one_error(proc: Result, fragment: str) -> None:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], proc.stderr


@needs_ct2
def test_cli_export_then_translate_the_exported_directory(trained, tmp_path):
    model_dir, _, lines = trained
    out = tmp_path / "exported"
    done = mtkit("export", "-m", str(model_dir), "-o", str(out), "--format", "ct2")
    assert done.returncode == 0, done.stderr
    text = "\n".join(lines[:5] + HOSTILE) + "\n"
    plots = tmp_path / "plots"
    proc = mtkit("translate", "-m", str(out), "--beam", "4", "--nbest", "2", "--json", "--attention-plot",
                 str(plots), "--attention-plot-max", "1", stdin=text)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["index"] for r in records] == list(range(len(lines[:5] + HOSTILE)))
    assert all(len(r["nbest"]) == 2 and r["alignment"] for r in records[:5])
    assert records[5]["text"] == ""  # an empty line stays an empty line
    assert [p.name for p in plots.iterdir()] == ["attention-000000.png"]  # the mean of the heads
    one_error(mtkit("translate", "-m", str(out), "--attention-plot", str(plots), "--attention-head", "1",
                    stdin="a\n"), "averaged over the heads")


_WITHOUT_TORCH = textwrap.dedent("""
    import sys
    from mtkit.cli.app import main
    sys.argv = ["mtkit", "translate", *sys.argv[1:]]
    try:
        main()
    finally:
        print("torch loaded" if "torch" in sys.modules else "torch not loaded", file=sys.stderr)
""")


@needs_ct2
@pytest.mark.parametrize("beam", [1, 4])
def test_exported_model_translates_without_torch_in_the_process(trained, tmp_path, beam):
    """PyTorch alone is ~210 MB resident: the ct2 engine's process must not load it."""
    _, exported, lines = trained
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines + HOSTILE) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    proc = subprocess.run([sys.executable, "-c", _WITHOUT_TORCH, "-m", str(exported), "-i", str(source),
                           "-o", str(out), "--beam", str(beam), "--threads", "2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stderr.strip().endswith("torch not loaded"), proc.stderr
    # the same engine with the same threads (so the same sub-batches) in this process: the same lines
    same = Translator(exported, device="cpu", threads=2, precision="fp32", beam_size=beam)
    assert out.read_text(encoding="utf-8").splitlines() == same.translate(lines + HOSTILE)


@needs_ct2
@pytest.mark.parametrize("beam", [1, 4])
def test_sub_batches_on_two_translators_give_the_same_lines(trained, monkeypatch, beam):
    """On CPU the ct2 engine splits each batch into sub-batches for single-thread translators side by
    side: the lines, their order and their scores do not change."""
    import mtkit.decode.ct2

    model_dir, exported, lines = trained
    one = exact(exported, beam_size=beam)
    whole = one.translate_hypotheses(lines)
    monkeypatch.setattr(mtkit.decode.ct2, "SUB_BATCH_TOKENS", 8)  # ~1 sentence per sub-batch
    split = Translator(exported, device="cpu", threads=2, precision="fp32", beam_size=beam)
    assert split.model.num_translators == 2 and split.backend.sub_batch == 8
    found = split.translate_hypotheses(lines)
    # padding differs, and so does rounding: near-ties may go either way (tests/near_ties.py)
    differing = check_same_or_near_tie(exact(model_dir, beam_size=beam), lines, whole, found,
                                       max_ties=len(lines) // 2, ct2_involved=True)
    assert [t.text for n, t in enumerate(found) if n not in differing] == \
        [t.text for n, t in enumerate(whole) if n not in differing]
    for n, (a, b) in enumerate(zip(whole, found, strict=True)):
        if n not in differing:
            assert b.hypotheses[0].score == pytest.approx(a.hypotheses[0].score, rel=1e-4)


# ------------------------------------------------------------------------------------------ Argos
_ARGOS = textwrap.dedent("""
    import json, os, sys
    home = sys.argv[2]
    for key in ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        os.environ[key] = os.path.join(home, key.lower())
    os.environ["ARGOS_PACKAGES_DIR"] = os.path.join(home, "packages")
    import argostranslate.package, argostranslate.sbd, argostranslate.translate
    # Argos downloads a sentence splitter at first use; offline, each input is one sentence
    argostranslate.sbd.MiniSBDSentencizer.split_sentences = lambda self, text: [text]
    argostranslate.package.install_from_path(sys.argv[1])
    lines = json.loads(sys.stdin.read())
    print(json.dumps([argostranslate.translate.translate(line, "xx", "yy") for line in lines]))
""")


@needs_ct2
@pytest.mark.skipif(importlib.util.find_spec("argostranslate") is None,
                    reason="argostranslate is not installed")
def test_argos_package_installs_and_translates(trained, tmp_path):
    model_dir, exported, lines = trained
    package = run_export(model_dir, tmp_path / "xx_yy.argosmodel", fmt="argos")
    with zipfile.ZipFile(package) as zf:
        names = zf.namelist()
        top = names[0].split("/")[0]
        metadata = json.loads(zf.read(f"{top}/metadata.json"))
    assert {f"{top}/model/model.bin", f"{top}/sentencepiece.model"} <= set(names)
    assert all(name.startswith(top + "/") for name in names)
    assert (metadata["from_code"], metadata["to_code"]) == ("xx", "yy")
    assert metadata["package_version"] and metadata["name"]
    proc = subprocess.run([sys.executable, "-c", _ARGOS, str(package), str(tmp_path / "home")],
                          input=json.dumps(lines[:6]), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.splitlines()[-1]) == exact(exported, beam_size=4).translate(lines[:6])


@needs_ct2
def test_argos_export_says_it_holds_no_sentence_boundary_model(bpe_dir, tmp_path, capsys):
    """Argos Translate downloads a sentence splitter at first use: the export says so, in one line after
    success, with where to put the model for offline use; a ct2 export says nothing of the kind."""
    model_dir = random_model(tmp_path / "m", bpe_dir)
    run_export(model_dir, tmp_path / "ct2")
    assert capsys.readouterr().err == ""
    package = run_export(model_dir, tmp_path / "en_de.argosmodel", fmt="argos")
    assert package.is_file()
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("note: en_de.argosmodel holds no sentence-boundary model")
    assert "MiniSBD's en.onnx" in lines[0] and "$XDG_DATA_HOME/argos-translate/minisbd/" in lines[0]
    with zipfile.ZipFile(package) as zf:  # what the note says is true
        assert not [n for n in zf.namelist() if "/minisbd/" in n or "/stanza/" in n or "/spacy/" in n]


def test_argos_refuses_separate_vocabularies(bpe_dir, tmp_path):
    model_dir = random_model(tmp_path / "m", bpe_dir, joint=False, share_all_embeddings=False)
    with pytest.raises(ConfigError, match="--format argos"):
        run_export(model_dir, tmp_path / "m.argosmodel", fmt="argos")


@needs_ct2
def test_on_a_cpu_the_ct2_engine_searches_a_whole_chunk_at_once(trained):
    """--max-tokens 0 (auto): the ct2 engine's translators take sub-batches themselves, so a chunk of
    lines is one search (one wait at its end), where the torch engine keeps its CPU budget."""
    from mtkit.decode.ct2 import CPU_BATCH_TOKENS
    from mtkit.decode.translator import CPU_MAX_TOKENS

    model_dir, exported, _ = trained
    assert exact(exported).max_tokens == CPU_BATCH_TOKENS > CPU_MAX_TOKENS == exact(model_dir).max_tokens
    assert exact(exported, max_tokens=500).max_tokens == 500
