"""`mtkit import-hf` and `mtkit export --format hf`: a MarianMT model imported into mtkit computes the
logits `transformers` computes (to 1e-4, fp32) and searches to the tokens `generate` finds (greedy, and
beam search under length_penalty 0, where both stop by the same rule); an mtkit model exported to hf
does the same in `transformers`; mtkit → hf → mtkit gives back the same weights bit for bit; bad
input is one line and nothing written.

The MarianMT models are tiny and random, made here with ``MarianConfig`` (init_std 0.3 and a random
final_logits_bias, so the logits are far apart and no argmax hangs on rounding), with sentencepiece
models trained on a few hundred made-up sentences. Skipped where transformers is not installed
(pip install 'mtkit[hf]'; `make install` and CI install it).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers",
                                   reason="transformers is not installed: pip install 'mtkit[hf]'")
import sentencepiece as spm  # noqa: E402
from cli_helpers import run_mtkit  # noqa: E402

from mtkit.checkpoint import save_checkpoint  # noqa: E402
from mtkit.config.experiment import Config, DecodingConfig, ModelConfig, to_dict  # noqa: E402
from mtkit.data.bpe import Bpe, train_bpe  # noqa: E402
from mtkit.decode.loader import load_model  # noqa: E402
from mtkit.decode.search import search  # noqa: E402
from mtkit.errors import MtkitError  # noqa: E402
from mtkit.interop.hf import export_hf, import_hf  # noqa: E402
from mtkit.models import build_model  # noqa: E402
from mtkit.vocab import PAD_ID  # noqa: E402

#: MarianTokenizer asks for sacremoses, which mtkit's import never uses (docs/hf.md)
pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

WORDS = ["the", "house", "is", "small", ".", "a", "cat", "sat", "on", "mat", "!", "where", "are", "you",
         "going", "?", "we", "like", "green", "tea", "and", "bread", "every", "day", ",", "but", "not"]
LINES = ["the cat sat on the mat .", "where are you going ?", "we like green tea", "a", "",
         "every day , but not bread !"]
MAX_LENGTH = 16


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 10))) for _ in range(n)]


@pytest.fixture(scope="module")
def spms(tmp_path_factory) -> Path:
    """Two sentencepiece models as Marian trains them (unk 0, bos 1, eos 2, no pad), unigram and bpe."""
    root = tmp_path_factory.mktemp("spm")
    for name, seed, kind in (("source", 0, "unigram"), ("target", 1, "bpe")):
        corpus = root / f"{name}.txt"
        corpus.write_text("\n".join(sentences(300, seed)) + "\n", encoding="utf-8")
        spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(root / name), vocab_size=50,
                                       model_type=kind, minloglevel=2, hard_vocab_limit=False)
    return root


def marian_dir(root: Path, spms: Path, activation: str = "swish", shared: bool = True, tied: bool = True,
               scale: bool = True, drop: tuple[str, ...] = (), tags: tuple[str, ...] = (),
               bad_words: bool = True) -> Path:
    """A random MarianMT checkpoint with its tokenizer and generation config, as save_pretrained writes;
    ``drop``: sentencepiece pieces left out of the vocabulary (as in real OPUS-MT models), ``tags``:
    target-language tokens (``>>deu<<``) of a multilingual OPUS-MT vocabulary, ``bad_words``: whether
    the generation config has bad_words_ids (transformers 5 writes none from a MarianConfig)."""
    from transformers import GenerationConfig, MarianConfig, MarianMTModel, MarianTokenizer

    pieces = []
    for name in ("source", "target"):
        sp = spm.SentencePieceProcessor(model_file=str(spms / f"{name}.model"))
        pieces.append([sp.id_to_piece(i) for i in range(sp.get_piece_size()) if not sp.is_control(i)
                       and not sp.is_unknown(i)])
    def vocab(names: list[str]) -> dict[str, int]:
        kept = [p for p in dict.fromkeys(names) if p not in drop]
        ordered = ["</s>", "<unk>"] + list(tags) + kept + ["<pad>"]
        return {p: i for i, p in enumerate(ordered)}
    src_vocab = vocab(pieces[0] + ([] if not shared else pieces[1]))
    tgt_vocab = src_vocab if shared else vocab(pieces[1])
    pad = len(tgt_vocab) - 1
    cfg = MarianConfig(vocab_size=len(src_vocab), decoder_vocab_size=len(tgt_vocab), d_model=16,
                       encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                       decoder_attention_heads=2, encoder_ffn_dim=24,
                       decoder_ffn_dim=24, activation_function=activation, scale_embedding=scale,
                       share_encoder_decoder_embeddings=shared, tie_word_embeddings=tied, pad_token_id=pad,
                       decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0, init_std=0.3,
                       max_position_embeddings=64, dropout=0.0)
    torch.manual_seed(0)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():  # a bias towards </s>: outputs of several lengths
        model.final_logits_bias.normal_()
        model.final_logits_bias[0, 0] += 2.0
    root.mkdir(parents=True)
    model.save_pretrained(root)
    GenerationConfig(bad_words_ids=[[pad]] if bad_words else None, num_beams=3, max_length=MAX_LENGTH,
                     decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0,
                     pad_token_id=pad).save_pretrained(root)
    for name, value in (("vocab.json", src_vocab), ("target_vocab.json", tgt_vocab)):
        if name == "vocab.json" or not shared:
            (root / name).write_text(json.dumps(value), encoding="utf-8")
    tok = MarianTokenizer(str(spms / "source.model"), str(spms / "target.model"), str(root / "vocab.json"),
                          target_vocab_file=None if shared else str(root / "target_vocab.json"),
                          separate_vocabs=not shared,
                          **({"source_lang": "en", "target_lang": "mul"} if tags else {}))
    tok.save_pretrained(root)
    return root


def hf_pair(directory: Path) -> tuple:
    from transformers import MarianMTModel, MarianTokenizer

    return MarianMTModel.from_pretrained(directory).eval(), MarianTokenizer.from_pretrained(directory)


def mtkit_ids(model_dir: Path, lines: list[str]) -> torch.Tensor:
    """The padded source batch mtkit's translator builds (no EOS: the model appends it)."""
    loaded = load_model(model_dir)
    ids = Bpe(model_dir / loaded.meta.src_bpe).encode_ids(lines)
    batch = torch.full((len(ids), max(map(len, ids))), PAD_ID, dtype=torch.long)
    for i, row in enumerate(ids):
        batch[i, :len(row)] = torch.tensor(row, dtype=torch.long)
    return batch


def hf_rows(model_dir: Path, side: str) -> list[int]:
    """MarianMT's id of each mtkit id, read through the pieces (-1: the padding row MarianMT lacks)."""
    loaded = load_model(model_dir)
    bpe = Bpe(model_dir / (loaded.meta.src_bpe if side == "source" else loaded.meta.tgt_bpe))
    return bpe.id_to_piece(list(range(len(bpe))))


def compare(hf_dir: Path, model_dir: Path, beam: int, length_penalty: float = 0.0,
            lines: list[str] | None = None, bad_words_ids: list[list[int]] | None = None) -> None:
    """Tokenisation, logits (1e-4) and the search's tokens of the two implementations, in hf ids;
    ``length_penalty`` 1.0: generate's default, mtkit's average with the model's beam_stop (an imported
    model's is so_far, generate's stopping bound)."""
    model, tok = hf_pair(hf_dir)
    loaded = load_model(model_dir)
    vocab = tok.get_src_vocab()
    tvocab = tok.target_encoder if tok.separate_vocabs else vocab  # get_tgt_vocab() fails in transformers 5
    # an imported model's start token (mtkit's bos) is MarianMT's <pad>; its own pad row MarianMT lacks
    special = {0: "", 2: "<pad>"} if "<s>" not in tvocab else {}
    tgt_pieces = hf_rows(model_dir, "target")
    to_hf = [tvocab.get(special.get(i, p), -1) for i, p in enumerate(tgt_pieces)]
    src_pieces = hf_rows(model_dir, "source")
    # a piece the vocabulary lacks is <unk> to MarianTokenizer (an imported model has a copy of its row)
    src_to_hf = [vocab.get(special.get(i, p), tok.unk_token_id) for i, p in enumerate(src_pieces)]
    lines = [x for x in lines or LINES if x]
    enc = tok(lines, return_tensors="pt", padding=True)
    src = mtkit_ids(model_dir, lines)
    for row, ids in zip(src.tolist(), enc.input_ids.tolist(), strict=True):
        mine = [src_to_hf[i] for i in row if i != PAD_ID]
        assert mine + [tok.eos_token_id] == [i for i in ids if i != tok.pad_token_id]
    start = model.config.decoder_start_token_id
    targets = [[start] + x[:5] for x in tok(text_target=lines).input_ids]
    width = max(map(len, targets))
    dec = torch.tensor([t + [start] * (width - len(t)) for t in targets])
    from_hf = {h: m for m, h in enumerate(to_hf) if h >= 0}
    tgt_in = torch.tensor([[from_hf[h] for h in row] for row in dec.tolist()])
    with torch.no_grad():
        theirs = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask,
                       decoder_input_ids=dec).logits
        mine, _ = loaded.model(src, tgt_in)
    real = torch.tensor([i for i, h in enumerate(to_hf) if h >= 0])
    assert torch.allclose(mine[..., real], theirs[..., torch.tensor(to_hf)[real]], atol=1e-4, rtol=0)
    decoding = DecodingConfig(**{**to_dict(loaded.config)["decoding"], "beam_size": beam,
                                 "length_norm": "average" if length_penalty else "none"})
    found = search(loaded.model, src, decoding)
    with torch.no_grad():
        out = model.generate(**enc, num_beams=beam, length_penalty=length_penalty, do_sample=False,
                             early_stopping=False,  # None would drop the generation config's own
                             **({"bad_words_ids": bad_words_ids} if bad_words_ids else {}))
    for hyps, row in zip(found, out.tolist(), strict=True):
        eos = model.config.eos_token_id  # up to the first </s>: what follows is padding (pad, or </s>
        generated = [i for i in row[1:] if i != model.config.pad_token_id]  # after an empty hypothesis)
        generated = generated[:generated.index(eos) + 1] if eos in generated else generated
        assert [to_hf[t] for t in hyps[0].tokens] + [eos] == generated


VARIANTS = {
    "swish, shared, tied": {},
    "relu, shared, untied, no scale": {"activation": "relu", "tied": False, "scale": False},
    "gelu, separate vocabularies": {"activation": "gelu", "shared": False},
    "gelu, separate, untied": {"activation": "gelu", "shared": False, "tied": False},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_imported_marian_model_computes_and_searches_as_transformers(variant, spms, tmp_path):
    hf_dir = marian_dir(tmp_path / "hf", spms, **VARIANTS[variant])
    model_dir = import_hf(hf_dir, tmp_path / "mtkit")
    cfg = load_model(model_dir).config
    assert (cfg.decoding.beam_size, cfg.decoding.max_len_b, cfg.decoding.max_len_a) == (3, MAX_LENGTH - 2, 0)
    for beam in (1, 3):
        compare(hf_dir, model_dir, beam)
    # generate's default length_penalty 1.0: its stopping bound too, on lines where the bound decides
    compare(hf_dir, model_dir, 3, length_penalty=1.0, lines=sentences(300, 7))


def generated_text(hf_dir: Path, lines: list[str], prefix: str = "", **generate) -> list[str]:
    """`generate`'s text for ``lines`` (each after ``prefix``), decoded as MarianTokenizer decodes it."""
    model, tok = hf_pair(hf_dir)
    with torch.no_grad():
        out = model.generate(**tok([prefix + x for x in lines], return_tensors="pt", padding=True),
                             **generate)
    pad = model.config.pad_token_id  # the target's: MarianTokenizer knows the source's pad id only
    return tok.batch_decode([[i for i in row if i != pad] for row in out.tolist()], skip_special_tokens=True,
                            use_source_tokenizer=False)


def frequent_pieces(spms: Path) -> tuple[str, ...]:
    """Pieces each sentencepiece model makes of common words: what the vocabulary leaves out below."""
    out = []
    for name, text in (("source", "the cat sat on the mat ."), ("target", "where are you going ?")):
        sp = spm.SentencePieceProcessor(model_file=str(spms / f"{name}.model"))
        out += sp.encode(text, out_type=str)[:3]
    return tuple(dict.fromkeys(out))


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "separate"])
def test_pieces_the_vocabulary_lacks_are_unk_as_in_marian_tokenizer(shared, spms, tmp_path):
    """Real OPUS-MT vocabularies lack some pieces of their sentencepiece models (Helsinki-NLP/Opus-MT#19):
    MarianTokenizer reads them as <unk>; the imported model gives each a copy of <unk>'s row, so its
    ids read as MarianMT rows equal MarianTokenizer's, its logits and searches equal transformers', and
    it never produces one."""
    drop = frequent_pieces(spms)
    hf_dir = marian_dir(tmp_path / "hf", spms, shared=shared, drop=drop)
    _, tok = hf_pair(hf_dir)
    assert tok.unk_token_id in tok("the cat sat on the mat .").input_ids  # the text holds dropped pieces
    model_dir = import_hf(hf_dir, tmp_path / "mtkit")
    loaded = load_model(model_dir)
    pieces = hf_rows(model_dir, "source")
    assert set(drop) <= set(pieces + hf_rows(model_dir, "target"))
    copies = [pieces.index(p) for p in drop if p in pieces]
    assert copies and all(loaded.model.output_bias[i] < -1e3 for i in copies
                          if i < loaded.model.output_bias.numel() and shared)
    lines = [x for x in LINES if x] + sentences(40, 9)
    for beam in (1, 3):
        compare(hf_dir, model_dir, beam, lines=lines)
    compare(export_hf(model_dir, tmp_path / "back-hf"), model_dir, 3, lines=lines)  # the copies go out too
    from mtkit.decode.translator import Translator

    single = [x for x in lines if not any(c in x[:-1] for c in ".!?")]
    engine = Translator(model_dir, device="cpu", threads=1, precision="fp32")
    # an <unk> the model produced: sentencepiece writes " ⁇ ", skip_special_tokens drops it
    def no_unk(texts: list[str]) -> list[str]:
        return [" ".join(x.replace("\u2047", " ").split()) for x in texts]
    assert no_unk(engine.translate(single)) == no_unk(generated_text(hf_dir, single))


def test_a_generation_config_without_bad_words_ids_imports(spms, tmp_path):
    """transformers 5 saves a MarianMT made from a MarianConfig with no bad_words_ids: imported, it
    searches as generate with bad_words_ids=[[pad]] does (mtkit never emits pad, MarianMT's start
    token); generate without them may emit pad, and then only there do the two differ."""
    hf_dir = marian_dir(tmp_path / "hf", spms, bad_words=False)
    assert "bad_words_ids" not in json.loads((hf_dir / "generation_config.json").read_text())
    model, tok = hf_pair(hf_dir)
    pad = model.config.pad_token_id
    with torch.no_grad():  # pad likelier: generate then emits it on some lines
        model.final_logits_bias[0, pad] += 2.5
    model.save_pretrained(hf_dir)
    model_dir = import_hf(hf_dir, tmp_path / "mtkit")
    for beam in (1, 3):
        compare(hf_dir, model_dir, beam, bad_words_ids=[[pad]])
    lines = sentences(300, 11)
    loaded = load_model(model_dir)
    src = mtkit_ids(model_dir, lines)
    found = search(loaded.model, src, DecodingConfig(**{**to_dict(loaded.config)["decoding"],
                                                        "beam_size": 1, "length_norm": "none"}))
    assert not any({0, 2} & set(h[0].tokens) for h in found)  # pad, and bos (MarianMT's pad): never
    with torch.no_grad():
        out = model.generate(**tok(lines, return_tensors="pt", padding=True), num_beams=1)
    hf_vocab = tok.get_src_vocab()
    to_hf = [hf_vocab.get({0: "", 2: "<pad>"}.get(i, p), -1)
             for i, p in enumerate(hf_rows(model_dir, "target"))]
    with_pad = 0
    for hyps, row in zip(found, out.tolist(), strict=True):
        ended = row[1:row.index(0) + 1] if 0 in row[1:] else row[1:]
        if pad in ended:
            with_pad += 1
            continue
        assert [to_hf[t] for t in hyps[0].tokens] + [0] == ended
    assert 0 < with_pad < len(lines), with_pad  # 239 of 300 (none of them without the added bias)


def test_marian_tokenizer_never_applies_its_punctuation_normaliser(spms, tmp_path):
    """MarianTokenizer builds sacremoses' MosesPunctNormalizer where sacremoses is installed, but neither
    encoding nor decoding calls it (the installed transformers; the 4.x source reads the same): mtkit,
    which does not normalise, tokenises as it does with or without sacremoses."""
    _, tok = hf_pair(marian_dir(tmp_path / "hf", spms))
    calls = []
    tok.punc_normalizer = lambda text: calls.append(text) or text
    lines = ["\u201cthe cat\u201d sat \u2013 on the mat \u2026", "where are you going ?"]
    ids = tok(lines, text_target=lines).input_ids
    tok.batch_decode(ids, skip_special_tokens=True)
    assert calls == []


def test_multilingual_opus_mt_target_tokens_become_target_languages(spms, tmp_path):
    """A multilingual OPUS-MT model (``>>deu<<`` and ``>>fra<<`` in its vocabulary, put before the source
    by the user in transformers): imported with those tokens as mtkit's source tags, so `--tgt-lang deu`
    translates as generate does on ">>deu<< …", meta.json lists the directions (what `mtkit serve`
    serves), and no --tgt-lang names the languages."""
    from mtkit.decode.engine import stored_languages
    from mtkit.decode.translator import Translator

    hf_dir = marian_dir(tmp_path / "hf", spms, tags=(">>deu<<", ">>fra<<"))
    model_dir = import_hf(hf_dir, tmp_path / "mtkit")
    stored = stored_languages(model_dir)
    assert stored["tgt"] == ["deu", "fra"] and stored["pairs"] == [["en", "deu"], ["en", "fra"]]
    assert stored["tag"] == "source"
    lines = [x for x in LINES if x and not any(c in x[:-1] for c in ".!?")] + sentences(20, 12)
    lines = [x for x in lines if not any(c in x[:-1] for c in ".!?")]
    outputs = {}
    for lang in ("deu", "fra"):
        engine = Translator(model_dir, device="cpu", threads=1, precision="fp32", tgt_lang=lang)
        outputs[lang] = engine.translate(lines)
        assert outputs[lang] == generated_text(hf_dir, lines, prefix=f">>{lang}<< ")
    assert outputs["deu"] != outputs["fra"]
    with pytest.raises(MtkitError, match="deu, fra"):
        Translator(model_dir, device="cpu", threads=1, precision="fp32")
    done = run("translate", "-m", str(model_dir), "--tgt-lang", "fra", "--precision", "fp32",
               "--threads", "1", input="\n".join(lines[:3]) + "\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == outputs["fra"][:3]


def mtkit_model(root: Path, spms: Path, languages: dict | None = None, **model) -> Path:
    """A random mtkit post-norm model of the settings MarianMT can hold, in a model directory;
    ``languages``: a multilingual model's (meta.json's), its tags pieces of the sentencepiece model."""
    root.mkdir(parents=True)
    tags = [f"<2{x}>" for x in (languages or {}).get("tgt", [])]
    train_bpe([str(spms / "source.txt"), str(spms / "target.txt")], str(root / "bpe"), vocab_size=60,
              symbols=tags)
    size = len(Bpe(root / "bpe.model"))
    cfg = Config()
    settings = {"d_model": 16, "heads": 2, "d_ff": 24, "encoder_layers": 2, "decoder_layers": 2,
                "dropout": 0.0, "sinusoid_layout": "halves", "source_eos": True, "activation": "swish",
                **model}
    cfg.model = ModelConfig(**settings)
    cfg.decoding = DecodingConfig(beam_size=3, max_len_a=0.0, max_len_b=MAX_LENGTH - 2, length_norm="none",
                                  min_len=0, eos_at_limit="free")
    torch.manual_seed(1)
    net = build_model(cfg.model, size, size, True)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    meta = {"src_lang": "en", "tgt_lang": "de", "joint": True, "src_bpe": "bpe.model", "tgt_bpe": "bpe.model",
            "src_vocab_size": size, "tgt_vocab_size": size, **({"languages": languages} if languages else {})}
    save_checkpoint({"model": net.state_dict(), "config": to_dict(cfg), "vocab": meta},
                    root / "checkpoint_best.pt")
    (root / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return root


@pytest.mark.parametrize("side", ["source", "decoder"])
def test_a_multilingual_model_goes_out_with_its_language_tags(side, spms, tmp_path):
    """A model trained on data.corpora asks for the target language with a tag: before the source (the
    exported tokenizer knows "<2de>" as a special token, so "<2de> text" gives mtkit's ids) or as the
    decoder's first input (generate's decoder_start_token_id): generate finds mtkit's greedy tokens and
    text for each language, the card says how to ask, and import gives back the languages and side."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from mtkit.decode.engine import stored_languages
    from mtkit.decode.translator import Translator

    langs = {"tag": side, "src": ["en"], "tgt": ["de", "fr"], "pairs": [["en", "de"], ["en", "fr"]]}
    original = mtkit_model(tmp_path / "orig", spms, languages=langs, norm="pre", activation="relu",
                           sinusoid_layout="interleaved", source_eos=False)
    hf_dir = export_hf(original, tmp_path / "hf")
    model, tok = AutoModelForSeq2SeqLM.from_pretrained(hf_dir).eval(), AutoTokenizer.from_pretrained(hf_dir)
    loaded, bpe = load_model(original), Bpe(original / "bpe.model")
    lines = [x for x in [*LINES, *sentences(30, 13)] if x and not any(c in x[:-1] for c in ".!?")]
    texts = {}
    for lang in ("de", "fr"):
        tag_id = bpe.piece_ids([f"<2{lang}>"], "test")[f"<2{lang}>"]
        rows = [([tag_id] if side == "source" else []) + x for x in bpe.encode_ids(lines)]
        enc = tok([(f"<2{lang}> " if side == "source" else "") + x for x in lines], return_tensors="pt",
                  padding=True)
        for row, ids, mask in zip(rows, enc.input_ids.tolist(), enc.attention_mask.tolist(), strict=True):
            assert row == [i for i, m in zip(ids, mask, strict=True) if m]
        src = torch.full((len(rows), max(map(len, rows))), PAD_ID, dtype=torch.long)
        for i, row in enumerate(rows):
            src[i, :len(row)] = torch.tensor(row)
        start = tag_id if side == "decoder" else 2
        with torch.no_grad():
            out = model.generate(**enc, num_beams=1, **({"decoder_start_token_id": start}
                                                        if side == "decoder" else {}))
        found = search(loaded.model, src, loaded.config.decoding, beam_size=1,
                       start=torch.full((len(rows),), start))
        for hyps, row in zip(found, out.tolist(), strict=True):
            assert [start] + hyps[0].tokens + [3] == row[:row.index(3) + 1]
        texts[lang] = tok.batch_decode(out, skip_special_tokens=True)
        engine = Translator(original, device="cpu", threads=1, precision="fp32", beam_size=1, tgt_lang=lang)
        assert engine.translate(lines) == texts[lang]
    assert texts["de"] != texts["fr"]
    card = (hf_dir / "README.md").read_text()
    assert ("<2de> A sentence." if side == "source" else "decoder_start_token_id") in card
    assert "- fr" in card.split("---")[1]
    back = import_hf(hf_dir, tmp_path / "back")
    assert stored_languages(back) == langs
    sa, sb = loaded.model.state_dict(), load_model(back).model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("model", [{}, {"tie_embeddings": False, "embed_scale": False}])
def test_export_runs_in_transformers_and_comes_back_bit_identical(model, spms, tmp_path):
    original = mtkit_model(tmp_path / "orig", spms, **model)
    hf_dir = export_hf(original, tmp_path / "hf")
    compare(hf_dir, original, 1)
    compare(hf_dir, original, 3)
    back = import_hf(hf_dir, tmp_path / "back")
    a, b = load_model(original), load_model(back)
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert set(sa) == set(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert a.config.model == b.config.model
    src = mtkit_ids(original, LINES[:4])
    for beam in (1, 3):
        ours = search(a.model, src, a.config.decoding, beam_size=beam)
        theirs = search(b.model, src, b.config.decoding, beam_size=beam)
        assert [h[0].tokens for h in ours] == [h[0].tokens for h in theirs]


def compare_auto(hf_dir: Path, model_dir: Path, beam: int) -> None:
    """An exported directory through the Auto classes only: tokenisation, logits (1e-4), the tokens
    `generate` finds (mtkit's search, length_penalty 0) and the decoded text (the Translator's)."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    from mtkit.decode.translator import Translator

    model, tok = AutoModelForSeq2SeqLM.from_pretrained(hf_dir).eval(), AutoTokenizer.from_pretrained(hf_dir)
    loaded = load_model(model_dir)
    lines = [x for x in LINES if x] + sentences(40, 3)
    enc = tok(lines, return_tensors="pt", padding=True)
    src = mtkit_ids(model_dir, lines)
    eos = [3] if loaded.config.model.source_eos else []
    for row, ids, mask in zip(src.tolist(), enc.input_ids.tolist(), enc.attention_mask.tolist(), strict=True):
        assert [i for i in row if i != PAD_ID] + eos == [i for i, m in zip(ids, mask, strict=True) if m]
    rng = random.Random(4)
    vocab = loaded.model.output_proj.weight.size(0)
    dec = torch.tensor([[2] + [rng.randrange(4, vocab) for _ in range(6)] for _ in lines])
    with torch.no_grad():
        theirs = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask,
                       decoder_input_ids=dec).logits
        mine, _ = loaded.model(src, dec)
    assert torch.allclose(mine, theirs[..., :vocab], atol=1e-4, rtol=0)
    decoding = DecodingConfig(**{**to_dict(loaded.config)["decoding"], "beam_size": beam,
                                 "length_norm": "none"})
    found = search(loaded.model, src, decoding)
    with torch.no_grad():
        out = model.generate(**enc, num_beams=beam, length_penalty=0.0, do_sample=False, early_stopping=False)
    for hyps, row in zip(found, out.tolist(), strict=True):  # up to the first </s> (what follows is padding)
        assert hyps[0].tokens + [3] == row[1:row.index(3) + 1]
    # single-sentence lines: `mtkit translate` cuts a line into sentences, `generate` does not
    single = [i for i, x in enumerate(lines) if not any(c in x[:-1] for c in ".!?")]
    expected = tok.batch_decode(out[single], skip_special_tokens=True)
    engine = Translator(model_dir, device="cpu", threads=1, precision="fp32", beam_size=beam)
    assert engine.translate([lines[i] for i in single]) == expected


PRE_NORM = {
    "pre, relu, interleaved, no source eos (a recipe's)": {
        "norm": "pre", "activation": "relu", "sinusoid_layout": "interleaved", "source_eos": False},
    "pre, swish, halves, source eos, tied": {"norm": "pre"},
    "pre, gelu, untied, no scale, no source eos": {"norm": "pre", "activation": "gelu",
                                                   "tie_embeddings": False, "embed_scale": False,
                                                   "source_eos": False},
    "post, interleaved, no source eos": {"sinusoid_layout": "interleaved", "source_eos": False},
}


@pytest.mark.parametrize("variant", list(PRE_NORM))
def test_every_transformer_goes_out_with_the_auto_classes_and_comes_back(variant, spms, tmp_path):
    """Pre-norm → Pegasus, post-norm → MarianMT; interleaved sinusoids by permuting the residual stream;
    no source EOS → a fast tokenizer.json: AutoTokenizer + AutoModelForSeq2SeqLM compute and search as
    mtkit does, the model card carries the Hub's metadata, and import gives back the same model."""
    settings = PRE_NORM[variant]
    original = mtkit_model(tmp_path / "orig", spms, **settings)
    hf_dir = export_hf(original, tmp_path / "hf", license="cc-by-4.0", scores={"BLEU": 12.3, "chrF": 40.1})
    config = json.loads((hf_dir / "config.json").read_text())
    assert config["model_type"] == ("pegasus" if settings.get("norm") == "pre" else "marian")
    assert (hf_dir / "tokenizer.json").is_file() == (not settings.get("source_eos", True))
    card = (hf_dir / "README.md").read_text()
    front = card.split("---")[1]
    for needed in ("- en", "- de", "pipeline_tag: translation", "license: cc-by-4.0", "value: 12.30",
                   "type: chrf"):
        assert needed in front
    assert "mtkit" in card.split("---", 2)[2]
    for beam in (1, 5):
        compare_auto(hf_dir, original, beam)
    back = import_hf(hf_dir, tmp_path / "back")
    a, b = load_model(original), load_model(back)
    sa, sb = a.model.state_dict(), b.model.state_dict()
    assert set(sa) == set(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert a.config.model == b.config.model


def rnn_model(root: Path, spms: Path) -> Path:
    root.mkdir(parents=True)
    train_bpe([str(spms / "source.txt"), str(spms / "target.txt")], str(root / "bpe"), vocab_size=60)
    size = len(Bpe(root / "bpe.model"))
    cfg = Config()
    cfg.model = ModelConfig(arch="rnn", emb_dim=8, hidden_size=8, encoder_layers=1, decoder_layers=1)
    net = build_model(cfg.model, size, size, True)
    meta = {"src_lang": "en", "tgt_lang": "de", "joint": True, "src_bpe": "bpe.model", "tgt_bpe": "bpe.model",
            "src_vocab_size": size, "tgt_vocab_size": size}
    save_checkpoint({"model": net.state_dict(), "config": to_dict(cfg), "vocab": meta},
                    root / "checkpoint_best.pt")
    (root / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return root


@pytest.mark.parametrize("setting", [{"positions": "learned"}, {"positions": "relative"}, {"arch": "rnn"}])
def test_a_model_without_an_equivalent_is_refused_in_one_line_and_nothing_written(setting, spms, tmp_path):
    if setting.get("arch") == "rnn":
        model_dir = rnn_model(tmp_path / "orig", spms)
    else:
        model_dir = mtkit_model(tmp_path / "orig", spms, **setting)
    with pytest.raises(MtkitError, match=f"model.{next(iter(setting))}") as info:
        export_hf(model_dir, tmp_path / "hf")
    assert "\n" not in str(info.value)
    assert not (tmp_path / "hf").exists() and not list(tmp_path.glob(".hf.*"))


def run(*args: str, input: str | None = None):
    """`mtkit ARGS` in this process (tests/cli_helpers.py)."""
    return run_mtkit(*args, input=input)


def run_study(script: Path, *args: str) -> str:
    """A bench/studies script run in this process as `python SCRIPT ARGS` would run it; its stdout.
    Restores argv, sys.path and torch's threads (the scripts set them)."""
    import contextlib
    import io
    import runpy

    argv, path, threads = sys.argv, list(sys.path), torch.get_num_threads()
    out = io.StringIO()
    sys.argv = [str(script), *args]
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(str(script), run_name="__main__")
    except SystemExit as exit_:
        assert not exit_.code, exit_.code
    finally:
        sys.argv, sys.path[:] = argv, path
        torch.set_num_threads(threads)
    return out.getvalue()


@pytest.mark.parametrize("damage", ["not marian", "missing target.spm", "activation", "bad words",
                                    "sampling"])
def test_bad_input_is_one_line_and_nothing_written(damage, spms, tmp_path):
    hf_dir = marian_dir(tmp_path / "hf", spms)
    config = json.loads((hf_dir / "config.json").read_text())
    if damage == "not marian":
        config["model_type"] = "bart"
    elif damage == "activation":
        config["activation_function"] = "tanh"
    elif damage == "missing target.spm":
        (hf_dir / "target.spm").unlink()
    else:
        gen = json.loads((hf_dir / "generation_config.json").read_text())
        gen.update({"bad_words_ids": [[5]]} if damage == "bad words" else {"do_sample": True})
        (hf_dir / "generation_config.json").write_text(json.dumps(gen))
    (hf_dir / "config.json").write_text(json.dumps(config))
    fragment = {"not marian": "model_type", "missing target.spm": "target.spm",
                "activation": "activation_function",
                "bad words": "bad_words_ids", "sampling": "do_sample"}[damage]
    with pytest.raises(MtkitError, match=fragment):
        import_hf(hf_dir, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def test_cli_import_refuses_a_directory_that_is_not_marian_in_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    done = run("import-hf", str(tmp_path / "empty"), "-o", str(tmp_path / "out"))
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert len(lines) == 1 and "config.json" in lines[0], done.stderr
    assert not (tmp_path / "out").exists()


def test_imported_model_translates_text_as_generate_does_with_torch_and_ct2(spms, tmp_path):
    """Whole stages: the Translator's text equals `generate` decoded by MarianTokenizer (with the target
    sentencepiece model); after `mtkit export` the ct2 engine gives the same text; alignments cover the
    source's own tokens (the appended EOS is not one of them)."""
    from mtkit.decode.translator import Translator

    hf_dir = marian_dir(tmp_path / "hf", spms)
    model_dir = import_hf(hf_dir, tmp_path / "mtkit")
    model, tok = hf_pair(hf_dir)
    lines = [x for x in LINES if x]
    with torch.no_grad():
        out = model.generate(**tok(lines, return_tensors="pt", padding=True))  # its own generation config
    expected = tok.batch_decode(out, skip_special_tokens=True, use_source_tokenizer=False)
    torch_engine = Translator(model_dir, device="cpu", threads=1, precision="fp32")
    assert torch_engine.translate(lines) == expected
    found = torch_engine.translate_hypotheses(lines, need_attention=True)
    for t in found:
        attention = t.hypotheses[0].attention
        assert attention is not None and attention.shape[-1] == len(t.source_tokens)
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed: pip install 'mtkit[ct2]'")
    from mtkit.interop.export import run_export

    exported = run_export(model_dir, tmp_path / "ct2")
    ct2_engine = Translator(exported, device="cpu", threads=1, precision="fp32", beam_size=1)
    assert ct2_engine.translate(lines) == Translator(model_dir, device="cpu", threads=1, precision="fp32",
                                                     beam_size=1).translate(lines)


def test_fine_tune_an_imported_model_then_export_it_back(spms, tmp_path):
    """The flow of docs/hf.md: import, prepare new data with the imported tokenizers (bpe.model_from),
    `train --init-from` for a few updates, export to hf: the fine-tune keeps the shared embeddings and
    the untrained output bias, learns, and `transformers` computes what mtkit computes."""
    from mtkit.config.experiment import from_dict
    from mtkit.data.meta import read_meta
    from mtkit.data.prepare import prepare
    from mtkit.train.trainer import train

    hf_dir = marian_dir(tmp_path / "hf", spms)
    parent = import_hf(hf_dir, tmp_path / "parent")
    for split, n, seed in (("train", 60, 5), ("dev", 8, 6)):
        text = sentences(n, seed)
        (tmp_path / f"{split}.en").write_text("\n".join(text) + "\n", encoding="utf-8")
        (tmp_path / f"{split}.de").write_text("\n".join(reversed(text)) + "\n", encoding="utf-8")
    cfg = from_dict({
        "data": {"train_src": str(tmp_path / "train.en"), "train_tgt": str(tmp_path / "train.de"),
                 "dev_src": str(tmp_path / "dev.en"), "dev_tgt": str(tmp_path / "dev.de"),
                 "dir": str(tmp_path / "data")},
        "bpe": {"joint": False, "model_from": str(parent)},
        "training": {"model_dir": str(tmp_path / "tuned"), "init_from": str(parent), "max_steps": 4,
                     "validate_every": 4, "max_tokens": 300, "threads": 1, "device": "cpu",
                     "valid_metric": "loss", "precision": "fp32"},
        # generate's limits (a fine-tune takes its decoding section from its own config)
        "decoding": {"max_len_a": 0, "max_len_b": MAX_LENGTH - 2, "min_len": 0, "eos_at_limit": "free"},
    })
    prepare(cfg)
    assert read_meta(tmp_path / "data").shared_ids
    train(cfg)
    before, after = load_model(parent), load_model(tmp_path / "tuned")
    assert after.model.src_embed is after.model.tgt_embed  # still one matrix, as in MarianMT
    assert torch.equal(before.model.output_bias, after.model.output_bias)  # a buffer: never trained
    assert not torch.equal(before.model.tgt_embed.weight, after.model.tgt_embed.weight)
    exported = export_hf(tmp_path / "tuned", tmp_path / "tuned-hf")
    compare(exported, tmp_path / "tuned", 1)
    compare(exported, tmp_path / "tuned", 3)


def test_cli_export_hf_refuses_relative_positions_in_one_line(spms, tmp_path):
    """Relative positions have no Transformers equivalent: the command names the setting to train with,
    exits non-zero, and writes nothing."""
    model_dir = mtkit_model(tmp_path / "orig", spms, positions="relative")
    done = run("export", "-m", str(model_dir), "-o", str(tmp_path / "hf"), "--format", "hf")
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert len(lines) == 1 and "model.positions: sinusoidal" in lines[0], done.stderr
    assert not (tmp_path / "hf").exists() and not list(tmp_path.glob(".hf.*"))


def test_cli_export_hf_puts_license_and_score_json_in_the_model_card(spms, tmp_path):
    """`mtkit export --format hf --license … --card-scores FILE` with `mtkit score --json`'s output: the
    card's front matter has the license and a model-index with the scores under sacrebleu's names."""
    model_dir = mtkit_model(tmp_path / "orig", spms)
    hyp, ref = tmp_path / "hyp.txt", tmp_path / "ref.txt"
    hyp.write_text("the cat sat on the mat .\nwe like tea\n", encoding="utf-8")
    ref.write_text("the cat sat on a mat .\nwe like green tea\n", encoding="utf-8")
    done = run("score", "--hyp", str(hyp), "--ref", str(ref), "--json")
    assert done.returncode == 0, done.stderr
    (tmp_path / "scores.json").write_text(done.stdout, encoding="utf-8")
    bleu = json.loads(done.stdout)["systems"][0]["scores"]["bleu"]
    done = run("export", "-m", str(model_dir), "-o", str(tmp_path / "hf"), "--format", "hf", "--license",
               "cc-by-4.0", "--card-scores", str(tmp_path / "scores.json"))
    assert done.returncode == 0, done.stderr
    front = (tmp_path / "hf" / "README.md").read_text(encoding="utf-8").split("---")[1]
    for needed in ("license: cc-by-4.0", "model-index:", "type: bleu", f"value: {bleu:.2f}", "name: chrF2"):
        assert needed in front, front
    (tmp_path / "bad.json").write_text('{"BLEU": "high"}', encoding="utf-8")
    done = run("export", "-m", str(model_dir), "-o", str(tmp_path / "hf2"), "--format", "hf",
               "--card-scores", str(tmp_path / "bad.json"))
    assert done.returncode != 0 and "Traceback" not in done.stderr and "bad.json" in done.stderr
    assert not (tmp_path / "hf2").exists()


def test_an_output_that_holds_something_is_never_overwritten(spms, tmp_path):
    hf_dir = marian_dir(tmp_path / "hf", spms)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(MtkitError, match="not an empty directory"):
        import_hf(hf_dir, taken)
    with pytest.raises(MtkitError, match="not an empty directory"):
        export_hf(import_hf(hf_dir, tmp_path / "mtkit"), taken)
    assert [p.name for p in taken.iterdir()] == ["notes.txt"] and (taken / "notes.txt").read_text() == "mine"


def test_bench_hf_flow_generate_finds_what_mtkit_translate_finds(spms, tmp_path):
    """bench/studies/hf_flow.py (the realistic flow of docs/notebook/hf.md): `generate` with only the
    export's generation_config and num_beams, batched by length, on the sentences mtkit cuts the lines
    into (bench/studies/hf_segment.py) and joined back (--join), writes the text `mtkit translate` writes,
    greedy and beam; `compare` counts the identical lines."""
    from mtkit.decode.translator import Translator

    model_dir = mtkit_model(tmp_path / "orig", spms)
    hf_dir = export_hf(model_dir, tmp_path / "hf")
    lines = [x for x in LINES if x] + sentences(20, 7) + ["the cat sat . Where are you going ?"]
    src = tmp_path / "src.txt"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    bench = Path(__file__).resolve().parents[1] / "bench" / "studies"
    sent = tmp_path / "src.sent.txt"
    cut = json.loads(run_study(bench / "hf_segment.py", str(src), "-o", str(sent)))  # mtkit's splitter
    assert cut["lines_cut"] >= 2  # ". are and …", "… sat . Where …"
    for beam in (1, 3):
        out = tmp_path / f"hf.{beam}.txt"
        written = run_study(bench / "hf_flow.py", "generate", str(hf_dir), "-i", str(sent), "--join",
                            f"{sent}.count", "-o", str(out), "--beam", str(beam), "--batch-size", "4",
                            "--threads", "1")
        assert json.loads(written)["lines"] == len(lines)
        engine = Translator(model_dir, device="cpu", threads=1, precision="fp32", beam_size=beam)
        ours = engine.translate(lines)
        assert out.read_text(encoding="utf-8").splitlines() == ours
    mine = tmp_path / "mine.txt"
    mine.write_text("\n".join(ours) + "\n", encoding="utf-8")
    done = run_study(bench / "hf_flow.py", "compare", str(out), str(mine), "--ref", str(src))
    result = json.loads(done)
    assert result["identical"] == result["lines"] == len(lines) and result["delta"] == 0
