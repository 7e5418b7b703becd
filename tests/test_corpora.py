"""Multilingual models (mtkit.data.corpora): temperature sampling repeats the small corpora and loses
nothing; `prepare` tags each source with its target language as one subword; the tag chooses the
language a trained model translates into; tags never reach the output, the source tokens or the
attention; a wrong or missing --tgt-lang is one line; a bilingual model needs no flag."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
import sacrebleu

from mtkit.config.experiment import from_dict
from mtkit.data.batching import sampler_for
from mtkit.data.bpe import Bpe
from mtkit.data.corpora import line_directions, repeats, tag
from mtkit.data.meta import read_meta
from mtkit.data.prepare import prepare
from mtkit.data.shards import ParallelData
from mtkit.decode.translator import Translator
from mtkit.errors import ConfigError, DataError

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import run_mtkit  # noqa: E402
from test_translator import make_model_dir  # noqa: E402

WORDS = ["bed", "cup", "dog", "fig", "hat", "jam", "kit", "log", "mop", "nut", "pen", "rug"]


def _sentences(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(n)]


def _write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return str(path)


def _corpora(root: Path, sizes: tuple[int, int] = (1200, 600)) -> list[dict]:
    """Two corpora of one source language: 'lo' copies the sentence, 'up' writes it in capitals."""
    rng = random.Random(0)
    corpora = []
    for lang, size, transform in (("lo", sizes[0], str), ("up", sizes[1], str.upper)):
        train, dev = _sentences(rng, size), _sentences(rng, 20)
        corpora.append({
            "train_src": _write(root / f"train.xx-{lang}.xx", train),
            "train_tgt": _write(root / f"train.xx-{lang}.{lang}", [transform(s) for s in train]),
            "dev_src": _write(root / f"dev.xx-{lang}.xx", dev),
            "dev_tgt": _write(root / f"dev.xx-{lang}.{lang}", [transform(s) for s in dev]),
            "src_lang": "xx", "tgt_lang": lang})
    return corpora


def _config(root: Path, corpora: list[dict], **data):
    return from_dict({
        "data": {"corpora": corpora, "dir": str(root / "data"), **data},
        "bpe": {"vocab_size": 100},
        "model": {"d_model": 64, "heads": 4, "d_ff": 128, "encoder_layers": 1, "decoder_layers": 1,
                  "dropout": 0.0},
        "training": {"model_dir": str(root / "model"), "max_tokens": 500, "lr": 5e-3, "warmup_steps": 30,
                     "label_smoothing": 0.0, "max_steps": 600, "validate_every": 600, "log_every": 100,
                     "threads": 1, "device": "cpu", "valid_metric": "loss", "precision": "fp32"},
        "decoding": {"beam_size": 1, "max_len_a": 2.0, "max_len_b": 10},
    })


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A tiny multilingual model, prepared and trained as `mtkit prepare` and `mtkit train` do."""
    from mtkit.train.trainer import train

    root = tmp_path_factory.mktemp("multi")
    cfg = _config(root, _corpora(root))
    prepare(cfg)
    train(cfg)
    return root


# ------------------------------------------------------------------------------------ sampling
def test_repeats_follow_the_temperature():
    assert repeats([1000, 100], [1.0, 1.0], 1.0) == pytest.approx([1.0, 1.0])
    big, small = repeats([1000, 100], [1.0, 1.0], 5.0)
    # shares ∝ size^(1/T): the small corpus is repeated until its share is (100/1000)^(1/5) of the big one's
    assert big == pytest.approx(1.0)
    assert small * 100 / 1000 == pytest.approx(0.1 ** 0.2)
    assert repeats([1000, 100], [1.0, 1.0], 1e6)[1] == pytest.approx(10.0, rel=1e-4)  # evened out
    # a weight multiplies a corpus's share: weighted 10, the small corpus counts as much as the big one
    assert repeats([1000, 100], [1.0, 10.0], 1.0) == pytest.approx([1.0, 10.0])
    assert repeats([1000, 100], [0.5, 1.0], 1.0) == pytest.approx([1.0, 2.0])
    assert repeats([1000, 0], [1.0, 1.0], 5.0)[1] == 0.0


# ------------------------------------------------------------------------------------- prepare
def test_prepare_tags_every_source_and_epochs_repeat_the_small_corpus(tmp_path):
    corpora = _corpora(tmp_path, sizes=(400, 100))
    meta = prepare(_config(tmp_path, corpora))
    assert meta.languages["src"] == ["xx"] and meta.languages["tgt"] == ["lo", "up"]
    assert meta.languages["pairs"] == [["xx", "lo"], ["xx", "up"]]
    lo, up = meta.languages["train"]
    times = repeats([400, 100], [1.0, 1.0], 5.0)[1]
    assert lo == {"pair": "xx-lo", "input": 400, "written": 400, "kept": 400, "times": 1.0}
    assert up["kept"] == 100 and up["times"] == pytest.approx(times) and times > 2
    bpe = Bpe(tmp_path / "data" / meta.src_bpe)
    ids = {lang: bpe.piece_ids([tag(lang)], "bpe")[tag(lang)] for lang in ("lo", "up")}
    train_data = ParallelData(tmp_path / "data", "train")
    src, tgt = train_data.src, train_data.tgt
    firsts = [int(src[i][0]) for i in range(len(src))]  # the shards hold each pair once, corpus by corpus
    assert firsts == [ids["lo"]] * 400 + [ids["up"]] * 100
    # each epoch draws the small corpus `times` over: its whole passes, and a part drawn afresh
    sampler = sampler_for(train_data, max_tokens=200, seed=3)
    epochs = [np.concatenate(sampler.epoch_batches(e)) for e in (0, 1)]
    whole = int(times)
    for drawn in epochs:
        counts = np.bincount(drawn, minlength=500)
        assert (counts[:400] == 1).all() and counts[400:].sum() == round(times * 100)
        assert set(counts[400:].tolist()) == {whole, whole + 1}
    extra = [set(np.flatnonzero(np.bincount(d, minlength=500) == whole + 1)) for d in epochs]
    assert extra[0] != extra[1]  # a different partial pass each epoch
    assert np.array_equal(np.concatenate(sampler_for(train_data, 200, seed=3).epoch_batches(1)), epochs[1])
    tag_ids = set(ids.values())
    for i in range(len(src)):  # a tag starts each source and nothing else, and no target holds one
        assert not tag_ids & {int(t) for t in src[i][1:]} and not tag_ids & {int(t) for t in tgt[i]}
        words = bpe.decode_ids([[int(t) for t in src[i][1:]]])[0]
        target = bpe.decode_ids([[int(t) for t in tgt[i]]])[0]
        assert target == (words.upper() if int(src[i][0]) == ids["up"] else words)
    dev = ParallelData(tmp_path / "data", "dev").src
    assert [int(dev[i][0]) for i in range(len(dev))] == [ids["lo"], ids["up"]] * 20  # interleaved
    assert read_meta(tmp_path / "data").languages == meta.languages  # kept in meta.json
    assert prepare(_config(tmp_path, corpora)).fingerprint == meta.fingerprint  # up to date: untouched


def test_corpora_mistakes_are_one_line(tmp_path):
    corpora = _corpora(tmp_path, sizes=(20, 10))
    with pytest.raises(ConfigError, match=r"data.corpora replaces data.train_src"):
        prepare(_config(tmp_path, corpora, train_src=corpora[0]["train_src"]))
    with pytest.raises(ConfigError, match=r"data.corpora\[1\].tgt_lang is not set"):
        prepare(_config(tmp_path, [corpora[0], {**corpora[1], "tgt_lang": ""}]))
    with pytest.raises(ConfigError, match=r"data.corpora\[0\].src_lang: '<2x>' is not a language code"):
        prepare(_config(tmp_path, [{**corpora[0], "src_lang": "<2x>"}]))
    with pytest.raises(ConfigError, match=r"unknown key 'data.corpora\[0\].train_scr'.*train_src"):
        _config(tmp_path, [{**corpora[0], "train_scr": "x"}])
    with pytest.raises(ConfigError, match=r"no corpus has dev_src"):
        prepare(_config(tmp_path, [{k: v for k, v in c.items() if not k.startswith("dev")} for c in corpora]))
    with pytest.raises(ConfigError, match=r"weight must be above 0"):
        prepare(_config(tmp_path, [{**corpora[0], "weight": 0}]))
    short = _write(tmp_path / "short.up", ["ONE"])
    with pytest.raises(DataError, match=r"train.xx-up.xx has 10 lines but .*short.up has 1"):
        prepare(_config(tmp_path, [corpora[0], {**corpora[1], "train_tgt": short}]))
    assert not (tmp_path / "data").exists()  # nothing was written


def test_validation_scores_each_direction_and_chooses_by_their_mean(trained):
    from mtkit.metrics_log import read_metrics

    valid = [e for e in read_metrics(trained / "model" / "metrics.jsonl") if e["event"] == "valid"][-1]
    by_direction = valid["dev_bleu_by_direction"]
    assert sorted(by_direction) == ["xx-lo", "xx-up"]
    assert valid["dev_bleu"] == pytest.approx(sum(by_direction.values()) / 2)
    assert sorted(valid["dev_chrf_by_direction"]) == ["xx-lo", "xx-up"]
    langs = read_meta(trained / "data").languages
    assert line_directions(langs, "dev", 40, 5) == ["xx-lo", "xx-up", "xx-lo", "xx-up", "xx-lo"]
    assert line_directions(langs, "dev", 40, 41) is None and line_directions({}, "dev", 40, 3) is None
    assert line_directions(langs, "dev", 39, 5) is None  # a pair filtered out: the order is lost


# ----------------------------------------------------------------------------------- translation
def test_the_tag_chooses_the_output_language(trained):
    rng = random.Random(7)
    held_out = _sentences(rng, 40)
    lower = Translator(trained / "model", device="cpu", threads=1, tgt_lang="lo").translate(held_out)
    upper = Translator(trained / "model", device="cpu", threads=1, tgt_lang="up").translate(held_out)
    # the case is the language: every output in the one asked for, and close to the right words
    assert all(out.islower() for out in lower) and all(out.isupper() for out in upper)
    assert sacrebleu.corpus_bleu(lower, [held_out]).score > 50
    assert sacrebleu.corpus_bleu(upper, [[s.upper() for s in held_out]]).score > 50


def test_tags_never_reach_the_output_tokens_or_attention(trained):
    tr = Translator(trained / "model", device="cpu", threads=1, tgt_lang="up", nbest=2, beam_size=2)
    for t in tr.translate_hypotheses(["dog cup hat", "pen. rug jam kit."], need_attention=True):
        assert not any(p.startswith("<2") for p in t.source_tokens)
        for c in t.hypotheses:
            assert "<2" not in c.text and not any(p.startswith("<2") for p in c.tokens)
            assert c.attention is not None and c.attention.shape[-1] == len(t.source_tokens)
            assert c.attention.shape[-2] == len(c.tokens) + 1
            assert all(0 <= s < len(t.source_tokens) for s, _ in c.alignment)


def test_glossaries_and_confidence_work_per_direction(trained, tmp_path):
    """A glossary's term is forced into the direction asked for; confidences are per sentence."""
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("dog\tPEN\n", encoding="utf-8")
    tr = Translator(trained / "model", device="cpu", threads=1, tgt_lang="up", beam_size=2, glossary=glossary)
    out = tr.translate_hypotheses(["dog cup hat", "fig jam"])
    assert "PEN" in out[0].text  # (a copying model writes DOG too: a glossary forces, not replaces)
    assert out[1].text.isupper() and all(0 < t.hypotheses[0].confidence <= 1 for t in out)


def test_tgt_lang_is_needed_checked_and_optional_for_one_pair(trained, tmp_path):
    with pytest.raises(ConfigError, match=r"translates into lo, up: choose one with --tgt-lang"):
        Translator(trained / "model", device="cpu")
    with pytest.raises(ConfigError, match=r"--tgt-lang de: the model translates into lo, up only"):
        Translator(trained / "model", device="cpu", tgt_lang="de")
    bilingual = make_model_dir(tmp_path / "bi")  # en → de, no languages list (as before multilingual)
    assert Translator(bilingual, device="cpu").target_tag is None
    assert Translator(bilingual, device="cpu", tgt_lang="de").translate(["the cat"]) == \
        Translator(bilingual, device="cpu").translate(["the cat"])
    with pytest.raises(ConfigError, match=r"--tgt-lang es: the model translates into de only"):
        Translator(bilingual, device="cpu", tgt_lang="es")


def test_cli_tgt_lang(trained, tmp_path):
    src = _write(tmp_path / "in.xx", ["dog cup", "", "pen rug jam"])
    run = ["translate", "-m", str(trained / "model"), "-i", src, "--threads", "1"]
    missing = run_mtkit(*run)
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1
    assert "choose one with --tgt-lang" in missing.stderr
    ok = run_mtkit(*run, "--tgt-lang", "up")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[1] == "" and len(ok.stdout.splitlines()) == 3


def test_export_keeps_the_tag_per_direction(trained, tmp_path):
    pytest.importorskip("ctranslate2")
    from mtkit.interop.export import run_export

    run_export(trained / "model", tmp_path / "ct2", quantization="float32")
    held_out = _sentences(random.Random(9), 30)
    for lang in ("lo", "up"):
        torch_out = Translator(trained / "model", device="cpu", threads=1, precision="fp32",
                               tgt_lang=lang).translate(held_out)
        ct2_out = Translator(tmp_path / "ct2", device="cpu", threads=1, tgt_lang=lang).translate(held_out)
        # the same model on two engines: equal but where rounding breaks a near-tie (at most a few lines)
        assert sum(a == b for a, b in zip(torch_out, ct2_out, strict=True)) >= 27


def test_argos_writes_one_package_per_pair(trained, tmp_path):
    """Argos Translate adds no tag: CTranslate2 adds it (the pair's package asks it to), so the package
    translates as the model does with --tgt-lang, when run the way Argos runs it."""
    ct2 = pytest.importorskip("ctranslate2")
    import json
    import zipfile

    import sentencepiece as spm

    from mtkit.interop.export import run_export

    with pytest.raises(ConfigError, match=r"translates one pair; choose it with --pair"):
        run_export(trained / "model", tmp_path / "m.argosmodel", fmt="argos")
    with pytest.raises(ConfigError, match=r"--pair xx-de: the model translates xx-lo, xx-up only"):
        run_export(trained / "model", tmp_path / "m.argosmodel", fmt="argos", pair="xx-de")
    held_out = _sentences(random.Random(9), 30)
    run_export(trained / "model", tmp_path / "ct2", quantization="float32")
    for lang in ("lo", "up"):
        package = run_export(trained / "model", tmp_path / f"xx_{lang}.argosmodel", fmt="argos",
                             pair=f"xx-{lang}")
        unpacked = tmp_path / f"unpacked-{lang}"
        with zipfile.ZipFile(package) as zf:
            zf.extractall(unpacked)
        (root,) = list(unpacked.iterdir())
        metadata = json.loads((root / "metadata.json").read_text(encoding="utf-8"))
        assert (metadata["from_code"], metadata["to_code"]) == ("xx", lang)
        # as Argos does it: the sentence's pieces only, no tag, no options that add one
        sp = spm.SentencePieceProcessor(model_file=str(root / "sentencepiece.model"))
        results = ct2.Translator(str(root / "model"), device="cpu").translate_batch(
            [sp.encode(s, out_type=str) for s in held_out], beam_size=1)
        argos_out = [sp.decode(r.hypotheses[0]) for r in results]
        mtkit_out = Translator(trained / "model", device="cpu", threads=1, precision="fp32",
                               tgt_lang=lang).translate(held_out)
        assert sum(a == b for a, b in zip(argos_out, mtkit_out, strict=True)) >= 27  # near-ties aside
        # mtkit's ct2 engine on the package's model: one pair, the tag added once (by CTranslate2)
        fixed = ["decoding.max_len_a=0", "decoding.max_len_b=40"]  # (a tag counts in a source's length)
        packaged = Translator(root / "model", device="cpu", threads=1, overrides=fixed)
        tagging = Translator(tmp_path / "ct2", device="cpu", threads=1, tgt_lang=lang, overrides=fixed)
        assert packaged.target_tag is None and packaged.translate(held_out) == tagging.translate(held_out)


def test_the_server_answers_each_pair_of_a_multilingual_model(trained, tmp_path):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from mtkit.decode.translator import LoadOptions
    from mtkit.serve import ServeOptions, build_app

    exact = LoadOptions(device="cpu", threads=1, precision="fp32")
    from serve_helpers import served_model

    bilingual = served_model(tmp_path / "bi", "up", source="xx")  # one of the multilingual model's pairs
    app = build_app([trained / "model", bilingual], exact, ServeOptions(char_limit=2000, max_body=4096))
    held_out = _sentences(random.Random(11), 6)
    with TestClient(app) as client:
        assert client.get("/languages").json() == [{"code": "xx", "name": "xx", "targets": ["lo", "up"]}]
        names = {m["name"]: (m["source"], m["target"]) for m in client.get("/v1/models").json()}
        assert names["model-xx-lo"] == ("xx", "lo") and names["model-xx-up"] == ("xx", "up")
        reply = client.post("/translate", json={"q": held_out, "source": "xx", "target": "lo"}).json()
        assert reply["translatedText"] == Translator(trained / "model", device="cpu", threads=1,
                                                     precision="fp32", tgt_lang="lo").translate(held_out)
        # xx→up: the bilingual model answers (the documented rule), the multilingual one by its name
        by_pair = client.post("/translate", json={"q": held_out, "source": "xx", "target": "up"}).json()
        assert by_pair["translatedText"] == Translator(bilingual, device="cpu", threads=1,
                                                       precision="fp32").translate(held_out)
        named = client.post("/v1/translate", json={"text": held_out, "source": "xx", "target": "up",
                                                   "model": "model-xx-up"})
        assert named.status_code == 200, named.text
        assert [t["text"] for t in named.json()["translations"]] == Translator(
            trained / "model", device="cpu", threads=1, precision="fp32", tgt_lang="up").translate(held_out)
