"""Multilingual models with the tag on the decoder side (data.language_tag: decoder, `mtkit.data.corpora`):
the tag starts each stored target and stands where BOS would, is never a prediction, and chooses the
output language in every search (plain, constrained, MRT's candidates, validation, the server's twin
per direction); such a model is not exported. The source-tag default: tests/test_corpora.py."""

from __future__ import annotations

import dataclasses
import random
import sys
from pathlib import Path

import pytest
import sacrebleu

from mtkit.data.bpe import Bpe
from mtkit.data.corpora import tag
from mtkit.data.meta import read_meta
from mtkit.data.prepare import prepare
from mtkit.data.shards import ParallelData
from mtkit.decode.translator import Translator
from mtkit.errors import ConfigError

sys.path.insert(0, str(Path(__file__).parent))
from test_corpora import _config, _corpora, _sentences  # noqa: E402


@pytest.fixture(scope="module")
def trained_decoder(tmp_path_factory) -> Path:
    """The tiny multilingual model of ``trained`` with data.language_tag decoder."""
    from mtkit.train.trainer import train

    root = tmp_path_factory.mktemp("multi-decoder")
    cfg = _config(root, _corpora(root), language_tag="decoder")
    # fewer updates than the source-tag model's 600: 500 obey the tag on every CPU path tried (350 did
    # not with AVX2 forced on an Intel Xeon with AMX)
    cfg = dataclasses.replace(cfg, training=dataclasses.replace(cfg.training, max_steps=500,
                                                                validate_every=500))
    prepare(cfg)
    train(cfg)
    return root


def test_a_decoder_tag_starts_each_target_and_is_never_a_prediction(tmp_path):
    from mtkit.data.batching import collate
    from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID

    meta = prepare(_config(tmp_path, _corpora(tmp_path, sizes=(60, 30)), language_tag="decoder"))
    assert meta.languages["tag"] == "decoder"
    bpe = Bpe(tmp_path / "data" / meta.tgt_bpe)
    ids = {lang: bpe.piece_ids([tag(lang)], "bpe")[tag(lang)] for lang in ("lo", "up")}
    train_data = ParallelData(tmp_path / "data", "train")
    assert train_data.decoder_tagged
    for i in range(len(train_data)):  # the source is left alone; the target's first subword is its tag
        src, tgt = [int(t) for t in train_data.src[i]], [int(t) for t in train_data.tgt[i]]
        assert not set(ids.values()) & set(src) and tgt[0] in ids.values()
        assert not set(ids.values()) & set(tgt[1:])
        words, target = bpe.decode_ids([src])[0], bpe.decode_ids([tgt[1:]])[0]
        assert target == (words.upper() if tgt[0] == ids["up"] else words)
    batch = collate(train_data, list(range(8)))
    for row in range(8):  # the tag stands where BOS would, and the model is never asked to predict it
        tgt = [int(t) for t in train_data.tgt[row]]
        assert batch.tgt_in[row, 0] == tgt[0] and BOS_ID not in batch.tgt_in[row].tolist()
        out = [t for t in batch.tgt_out[row].tolist() if t != PAD_ID]
        assert out == tgt[1:] + [EOS_ID]
    assert batch.num_tgt_tokens == sum(len(train_data.tgt[r]) for r in range(8))  # words + EOS, no tag


def test_a_decoder_tag_chooses_the_output_language(trained_decoder, tmp_path):
    held_out = _sentences(random.Random(7), 40)
    model = trained_decoder / "model"
    lower = Translator(model, device="cpu", threads=1, tgt_lang="lo").translate(held_out)
    upper = Translator(model, device="cpu", threads=1, tgt_lang="up").translate(held_out)
    assert all(out.islower() for out in lower) and all(out.isupper() for out in upper)
    assert sacrebleu.corpus_bleu(upper, [[s.upper() for s in held_out]]).score > 50
    assert sacrebleu.corpus_bleu(lower, [held_out]).score > 50
    lo = Translator(model, device="cpu", threads=1, tgt_lang="lo")
    assert lo.for_target("up").translate(held_out) == upper  # the server's twin per direction
    tr = Translator(model, device="cpu", threads=1, tgt_lang="up", nbest=2, beam_size=2)
    assert tr.max_input_tokens == Translator(model, device="cpu", threads=1, tgt_lang="lo").max_input_tokens
    for t in tr.translate_hypotheses(["dog cup hat", "pen. rug jam kit."], need_attention=True):
        assert not any(p.startswith("<2") for p in t.source_tokens)
        for c in t.hypotheses:  # the tag is the decoder's input, never a token of the output
            assert "<2" not in c.text and not any(p.startswith("<2") for p in c.tokens)
            assert c.attention is not None and c.attention.shape[-2:] == (len(c.tokens) + 1,
                                                                           len(t.source_tokens))
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("dog\tPEN\n", encoding="utf-8")
    forced = Translator(model, device="cpu", threads=1, tgt_lang="up", beam_size=2, glossary=glossary)
    assert "PEN" in forced.translate(["dog cup hat"])[0]  # the constrained search starts from the tag too
    valid = [e for e in _metrics(model) if e["event"] == "valid"][-1]
    assert sorted(valid["dev_bleu_by_direction"]) == ["xx-lo", "xx-up"]
    assert min(valid["dev_bleu_by_direction"].values()) > 50  # validation starts each direction from its tag


def test_a_decoder_tagged_model_is_not_exported(trained_decoder, tmp_path):
    from mtkit.interop.export import run_export

    with pytest.raises(ConfigError, match=r"starts its decoder from a language tag"):
        run_export(trained_decoder / "model", tmp_path / "ct2", quantization="float32")


def _metrics(model: Path) -> list[dict]:
    from mtkit.metrics_log import read_metrics

    return read_metrics(model / "metrics.jsonl")


def test_mrt_candidates_start_from_the_decoder_tag(trained_decoder, tmp_path):
    """Minimum risk training of a decoder-tagged model: its candidates are searched from each
    sentence's tag (so they are in the reference's language), and the fine-tuning runs."""

    import torch

    from mtkit.config.experiment import load_config
    from mtkit.data.batching import collate
    from mtkit.decode.loader import load_model
    from mtkit.train.mrt import generate
    from mtkit.train.trainer import train

    model = trained_decoder / "model"
    loaded = load_model(model, "best")
    dev = ParallelData(trained_decoder / "data", "dev")
    batch = collate(dev, list(range(6)))  # interleaved: lo, up, lo, up, …
    found = generate(loaded.model.eval(), batch.src, loaded.config.decoding, 2, "beam", None,
                     start=batch.tgt_in[:, 0])
    bpe = Bpe(trained_decoder / "data" / read_meta(trained_decoder / "data").tgt_bpe)
    for n, candidates in enumerate(found):  # the best of each: in its sentence's language
        best = bpe.decode_ids(candidates[:1])[0]
        assert best.isupper() if n % 2 else best.islower(), best
    cfg = load_config(model / "config.yaml")  # the parent's, as trained
    cfg = dataclasses.replace(cfg, training=dataclasses.replace(
        cfg.training, model_dir=str(tmp_path / "mrt"), objective="mrt", mrt_candidates=3, max_steps=4,
        validate_every=4, init_from=str(model), lr=1e-4))
    train(cfg)
    assert torch.isfinite(torch.tensor(_metrics(tmp_path / "mrt")[-1]["dev_loss"]))
