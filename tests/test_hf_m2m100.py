"""`mtkit import-hf` of M2M100 and NLLB-200 (``M2M100ForConditionalGeneration``): mtkit's ids equal the
hf tokenizer's (the source language's token, the tokens, ``</s>``), the logits equal `transformers'`
teacher-forced (1e-4, fp32), greedy search with ``--tgt-lang`` finds what `generate` with
``forced_bos_token_id`` finds, and bad directories are refused in one line with nothing written.

The models are tiny and random, made here with ``M2M100Config`` (init_std 0.3, so the logits are far
apart and no argmax hangs on rounding), with a sentencepiece model trained on a few hundred made-up
sentences: M2M100's ``vocab.json`` + ``sentencepiece.bpe.model`` and NLLB's ``tokenizer.json`` (built
from the same sentencepiece model as NLLB's is, fairseq's offset and all). Skipped where transformers is
not installed (pip install 'mtkit[hf]').
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers",
                                   reason="transformers is not installed: pip install 'mtkit[hf]'")
import sentencepiece as spm  # noqa: E402

from mtkit.config.experiment import DecodingConfig, to_dict  # noqa: E402
from mtkit.data.bpe import Bpe  # noqa: E402
from mtkit.decode.loader import load_model  # noqa: E402
from mtkit.decode.search import search  # noqa: E402
from mtkit.errors import MtkitError  # noqa: E402
from mtkit.interop.hf import export_hf, import_hf  # noqa: E402
from mtkit.models.positions import fairseq_sinusoids  # noqa: E402
from mtkit.vocab import PAD_ID  # noqa: E402

WORDS = ["the", "house", "is", "small", ".", "a", "cat", "sat", "on", "mat", "!", "where", "are", "you",
         "going", "?", "we", "like", "green", "tea", "and", "bread", "every", "day", ",", "but", "not"]
LINES = ["the cat sat on the mat .", "where are you going ?", "we like green tea", "a",
         "every day , but not bread !", "house house tea"]
NLLB_LANGS = ["eng_Latn", "deu_Latn", "fra_Latn"]
SPARE_ROWS = 3  # rows no tokenizer names (as m2m100_418M's vocab_size has)


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 10))) for _ in range(n)]


@pytest.fixture(scope="module")
def spm_file(tmp_path_factory) -> Path:
    """A sentencepiece BPE model as fairseq trains them (unk 0, bos 1, eos 2)."""
    root = tmp_path_factory.mktemp("spm")
    (root / "text.txt").write_text("\n".join(sentences(300, 0)) + "\n", encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(root / "text.txt"), model_prefix=str(root / "sp"), vocab_size=60,
                                   model_type="bpe", minloglevel=2, hard_vocab_limit=False)
    return root / "sp.model"


def fairseq_vocab(spm_file: Path, drop: tuple[str, ...] = ()) -> dict[str, int]:
    """fairseq's dictionary of a sentencepiece model: <s> <pad> </s> <unk>, then its pieces."""
    sp = spm.SentencePieceProcessor(model_file=str(spm_file))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(sp.get_piece_size()):
        if not sp.is_control(i) and not sp.is_unknown(i) and sp.id_to_piece(i) not in drop:
            vocab[sp.id_to_piece(i)] = len(vocab)
    return vocab


def save_model(root: Path, vocab_size: int, text_from: int | None = None, **config) -> None:
    """A random M2M100; ``text_from``: untied, with zero output rows from there on (language tokens,
    made-up words, spare rows) and for <s>, so that `generate` writes text, not language tokens."""
    from transformers import GenerationConfig, M2M100Config, M2M100ForConditionalGeneration

    cfg = M2M100Config(vocab_size=vocab_size, d_model=16, encoder_layers=2, decoder_layers=2,
                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=24,
                       decoder_ffn_dim=24, max_position_embeddings=64, init_std=0.3, dropout=0.0,
                       attention_dropout=0.0, **config)
    torch.manual_seed(0)
    model = M2M100ForConditionalGeneration(cfg).eval()
    if text_from is not None:
        with torch.no_grad():
            model.lm_head.weight[text_from:] = 0.0
            model.lm_head.weight[0] = 0.0
    model.save_pretrained(root)
    GenerationConfig(decoder_start_token_id=2, eos_token_id=2, pad_token_id=1, bos_token_id=0,
                     max_length=16).save_pretrained(root)


def m2m100_dir(root: Path, spm_file: Path, drop: tuple[str, ...] = (), text: bool = False,
               **config) -> Path:
    """A random M2M100 checkpoint with its M2M100Tokenizer, as save_pretrained writes them."""
    from transformers import M2M100Tokenizer

    root.mkdir(parents=True)
    vocab = fairseq_vocab(spm_file, drop)
    (root / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    shutil.copyfile(spm_file, root / "sentencepiece.bpe.model")
    tok = M2M100Tokenizer(str(root / "vocab.json"), str(root / "sentencepiece.bpe.model"), src_lang="en",
                          tgt_lang="de")
    tok.save_pretrained(root)
    if text:
        config.update(tie_word_embeddings=False, text_from=len(vocab))
    save_model(root, len(vocab) + 100 + 8 + SPARE_ROWS, **config)  # 100 languages, 8 made-up words
    return root


def nllb_dir(root: Path, spm_file: Path) -> Path:
    """A random NLLB-shaped checkpoint with an NllbTokenizer: BPE vocabulary and merges from the
    sentencepiece model (its ids + fairseq's offset 1 after <s> <pad> </s> <unk>), the language codes
    and <mask> as added tokens after it, as NLLB-200's tokenizer.json has them."""
    from transformers import NllbTokenizer
    from transformers.convert_slow_tokenizer import SpmConverter

    from mtkit.interop.hf_tokenizer import _proto

    proto = _proto(spm_file.read_bytes(), str(spm_file))
    built = json.loads(SpmConverter.build_tokenizer_from_spm_proto(
        proto, {p.piece: i for i, p in enumerate(proto.pieces)}).to_str())
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in built["model"]["merges"]]
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i, p in enumerate(proto.pieces[3:], start=3):
        vocab[p.piece] = i + 1
    tok = NllbTokenizer(vocab=vocab, merges=merges, src_lang="eng_Latn", tgt_lang="deu_Latn",
                        additional_special_tokens=NLLB_LANGS)
    root.mkdir(parents=True)
    tok.save_pretrained(root)
    shutil.copyfile(spm_file, root / "sentencepiece.bpe.model")
    save_model(root, len(tok) + SPARE_ROWS)
    return root


def hf_pair(directory: Path) -> tuple:
    from transformers import AutoTokenizer, M2M100ForConditionalGeneration

    return M2M100ForConditionalGeneration.from_pretrained(directory).eval(), \
        AutoTokenizer.from_pretrained(directory)


def hf_ids(model_dir: Path, tok) -> list[int]:
    """The hf row of each mtkit id, read through the pieces (BOS: the decoder's start, </s>)."""
    pieces = Bpe(model_dir / "bpe.model").id_to_piece(list(range(len(Bpe(model_dir / "bpe.model")))))
    vocab = tok.get_vocab()
    out = []
    for i, p in enumerate(pieces):
        if i == 2:
            p = "</s>"
        elif p.startswith("<2"):  # M2M100Tokenizer's language tokens are not in its get_vocab()
            lang = p[2:-1]
            out.append(tok.convert_tokens_to_ids(lang if "_" in lang else f"__{lang}__"))
            continue
        elif p.startswith("<row_"):
            out.append(int(p[5:-1]))
            continue
        elif p == "<fairseq_s>":
            p = "<s>"
        out.append(vocab.get(p, tok.unk_token_id))
    return out


def mtkit_batch(model_dir: Path, lines: list[str]) -> torch.Tensor:
    ids = Bpe(model_dir / "bpe.model").encode_ids(lines)
    batch = torch.full((len(ids), max(map(len, ids))), PAD_ID, dtype=torch.long)
    for i, row in enumerate(ids):
        batch[i, :len(row)] = torch.tensor(row, dtype=torch.long)
    return batch


def compare(hf_dir: Path, model_dir: Path, src_lang: str, tgt_lang: str, lines: list[str],
            beams: tuple[int, ...] = (1,)) -> None:
    """Source ids, teacher-forced logits (1e-4) and the search's tokens against `generate`'s (greedy;
    beam search under length_penalty 0, where both stop by the same rule), in hf ids."""
    model, tok = hf_pair(hf_dir)
    tok.src_lang = src_lang
    loaded = load_model(model_dir)
    to_hf = hf_ids(model_dir, tok)
    lang_id = tok.convert_tokens_to_ids(f"__{tgt_lang}__" if "_" not in tgt_lang else tgt_lang)
    enc = tok(lines, return_tensors="pt", padding=True)
    src = mtkit_batch(model_dir, lines)
    source_token = tok.convert_tokens_to_ids(f"__{src_lang}__" if "_" not in src_lang else src_lang)
    for row, ids in zip(src.tolist(), enc.input_ids.tolist(), strict=True):
        mine = [to_hf[i] for i in row if i != PAD_ID]
        assert [source_token] + mine + [tok.eos_token_id] == [i for i in ids if i != tok.pad_token_id]
    tag = Bpe(model_dir / "bpe.model").piece_ids([f"<2{tgt_lang}>"], "bpe")[f"<2{tgt_lang}>"]
    rng = random.Random(3)
    real = [i for i, h in enumerate(to_hf) if i > 3]
    tgt = [[rng.choice(real) for _ in range(5)] for _ in lines]
    dec = torch.tensor([[2, lang_id] + [to_hf[i] for i in t] for t in tgt])
    with torch.no_grad():
        theirs = model(input_ids=enc.input_ids, attention_mask=enc.attention_mask,
                       decoder_input_ids=dec).logits
        mine, _ = loaded.model(src, torch.tensor([[tag] + t for t in tgt]))
    # every output but mtkit's BOS and the copies of <unk> (NO_LOGIT: never produced, as in transformers)
    outputs = (loaded.model.output_bias > -1e3).nonzero().squeeze(1)
    assert len(outputs) == len(to_hf) - 1 - (len(to_hf) - len(set(to_hf)) - 1)
    assert torch.allclose(mine[..., outputs], theirs[:, 1:, torch.tensor(to_hf)[outputs]], atol=1e-4, rtol=0)
    for beam in beams:
        decoding = DecodingConfig(**{**to_dict(loaded.config)["decoding"], "length_norm": "none"})
        found = search(loaded.model, src, decoding, beam_size=beam, start=torch.full((len(lines),), tag))
        with torch.no_grad():
            out = model.generate(**enc, forced_bos_token_id=lang_id, num_beams=beam, do_sample=False,
                                 length_penalty=0.0, early_stopping=False, bad_words_ids=[[tok.pad_token_id]])
        for hyps, row in zip(found, out.tolist(), strict=True):
            assert row[:2] == [2, lang_id]
            generated = [i for i in row[2:] if i != tok.pad_token_id]
            # up to the first </s>; at max_length generate stops without one (no forced_eos_token_id),
            # where mtkit's search appends it at no cost (decoding.eos_at_limit: free)
            generated = generated[:generated.index(2) + 1] if 2 in generated else generated + [2]
            assert [to_hf[t] for t in hyps[0].tokens] + [2] == generated, (beam, hyps[0].tokens, row)


def test_fairseq_sinusoids_are_m2m100s_table_from_position_2():
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding as Table

    for dim in (16, 17, 6):
        theirs = Table.get_embedding(40, dim, padding_idx=1)
        assert torch.equal(fairseq_sinusoids(38, dim), theirs[2:])


@pytest.mark.parametrize("variant", ["tied", "untied, gelu, no scale"])
def test_imported_m2m100_tokenizes_computes_and_searches_as_transformers(variant, spm_file, tmp_path):
    config = {} if variant == "tied" else {"tie_word_embeddings": False, "activation_function": "gelu",
                                           "scale_embedding": False}
    hf_dir = m2m100_dir(tmp_path / "hf", spm_file, **config)
    model_dir = import_hf(hf_dir, tmp_path / "mtkit")
    loaded = load_model(model_dir)
    assert loaded.meta.languages["tag"] == "decoder" and len(loaded.meta.languages["tgt"]) == 100
    assert loaded.config.model.sinusoid_layout == "fairseq" and loaded.config.decoding.max_len_b == 14
    lines = LINES + sentences(20, 5)
    compare(hf_dir, model_dir, "en", "de", lines, beams=(1, 4))
    compare(hf_dir, model_dir, "en", "fr", lines[:6])
    other = import_hf(hf_dir, tmp_path / "from-de", src_lang="de")  # another source language's token
    compare(hf_dir, other, "de", "en", lines[:6])


def test_pieces_the_vocabulary_lacks_are_unk_and_translate_gives_generates_text(spm_file, tmp_path):
    """A piece fairseq's dictionary lacks is <unk> to M2M100Tokenizer and to the imported model; the
    Translator with --tgt-lang writes the text `generate` + batch_decode writes."""
    from mtkit.decode.translator import Translator

    sp = spm.SentencePieceProcessor(model_file=str(spm_file))
    drop = tuple(sp.encode("the cat sat", out_type=str)[:2])
    hf_dir = m2m100_dir(tmp_path / "hf", spm_file, drop=drop, text=True)
    model, tok = hf_pair(hf_dir)
    assert tok.unk_token_id in tok("the cat sat").input_ids
    model_dir = import_hf(hf_dir, tmp_path / "mtkit")
    compare(hf_dir, model_dir, "en", "de", LINES)
    with torch.no_grad():
        out = model.generate(**tok(LINES, return_tensors="pt", padding=True), bad_words_ids=[[1]],
                             forced_bos_token_id=tok.get_lang_id("es"), num_beams=1)
    # the text of the pieces: M2M100Tokenizer's batch_decode keeps language tokens and "<unk>", which
    # mtkit's translator drops (a tag) and sentencepiece writes as " ⁇ "
    expected = [" ".join(tok.decode([i for i in row if 4 <= i < tok.vocab_size]).split())
                for row in out.tolist()]
    assert sum(map(bool, expected)) >= 2  # the random model writes text on some lines
    engine = Translator(model_dir, device="cpu", threads=1, precision="fp32", beam_size=1, tgt_lang="es")
    assert [" ".join(x.replace("\u2047", "").split()) for x in engine.translate(LINES)] == expected


def test_imported_nllb_tokenizes_computes_and_searches_as_transformers(spm_file, tmp_path):
    hf_dir = nllb_dir(tmp_path / "hf", spm_file)
    model_dir = import_hf(hf_dir, tmp_path / "mtkit")
    assert load_model(model_dir).meta.languages["tgt"] == sorted(NLLB_LANGS)
    compare(hf_dir, model_dir, "eng_Latn", "deu_Latn", LINES + sentences(10, 6))


def test_nllbs_legacy_source_order_is_refused_in_one_line(spm_file, tmp_path):
    hf_dir = nllb_dir(tmp_path / "hf", spm_file)
    config = json.loads((hf_dir / "tokenizer_config.json").read_text())
    (hf_dir / "tokenizer_config.json").write_text(json.dumps({**config, "legacy_behaviour": True}))
    with pytest.raises(MtkitError, match="legacy_behaviour") as info:
        import_hf(hf_dir, tmp_path / "out")
    assert "\n" not in str(info.value) and not (tmp_path / "out").exists()


def test_an_imported_m2m100_is_refused_by_the_exporters_in_one_line(spm_file, tmp_path):
    model_dir = import_hf(m2m100_dir(tmp_path / "hf", spm_file), tmp_path / "mtkit")
    with pytest.raises(MtkitError, match="model.sinusoid_layout") as info:
        export_hf(model_dir, tmp_path / "back")
    assert "\n" not in str(info.value) and not (tmp_path / "back").exists()
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed")
    from mtkit.interop.export import run_export

    with pytest.raises(MtkitError, match="model.source_bos|model.decoder_bos"):
        run_export(model_dir, tmp_path / "ct2")
    assert not (tmp_path / "ct2").exists()


EOS_LIKE_WORD = 51


@pytest.mark.parametrize("early_stopping", [True, False])
def test_beam_search_under_length_penalty_one_finds_what_generate_finds(early_stopping, spm_file, tmp_path):
    """m2m100_418M's own settings: 5 beams (here 4), length_penalty 1.0 and early_stopping true. generate
    divides by a length that counts the forced language token (decoding.length_offset 1) and, with
    early_stopping, stops a sentence at K finished hypotheses (decoding.beam_stop finished)."""
    from transformers import M2M100ForConditionalGeneration

    hf_dir = m2m100_dir(tmp_path / "hf", spm_file, text=True)
    random_model = M2M100ForConditionalGeneration.from_pretrained(hf_dir)
    with torch.no_grad():  # </s> as likely as a word: hypotheses of many lengths, where the offset counts
        random_model.lm_head.weight[2] = random_model.lm_head.weight[EOS_LIKE_WORD] * 0.9
    random_model.save_pretrained(hf_dir)
    gen = json.loads((hf_dir / "generation_config.json").read_text())
    gen.update(num_beams=4, length_penalty=1.0, early_stopping=early_stopping)
    (hf_dir / "generation_config.json").write_text(json.dumps(gen))
    model_dir = import_hf(hf_dir, tmp_path / "mtkit")
    loaded = load_model(model_dir)
    decoding = loaded.config.decoding
    assert (decoding.beam_stop, decoding.length_offset, decoding.length_norm) == (
        "finished" if early_stopping else "so_far", 1, "average")
    model, tok = hf_pair(hf_dir)
    tok.src_lang = "en"
    to_hf = hf_ids(model_dir, tok)
    lines = LINES + sentences(60, 9)
    enc = tok(lines, return_tensors="pt", padding=True)
    tag = Bpe(model_dir / "bpe.model").piece_ids(["<2de>"], "bpe")["<2de>"]
    start = torch.full((len(lines),), tag)
    found = search(loaded.model, mtkit_batch(model_dir, lines), decoding, start=start)
    with torch.no_grad():
        out = model.generate(**enc, forced_bos_token_id=tok.convert_tokens_to_ids("__de__"),
                             bad_words_ids=[[tok.pad_token_id]])
    for hyps, row in zip(found, out.tolist(), strict=True):
        generated = [i for i in row[2:] if i != tok.pad_token_id]
        generated = generated[:generated.index(2) + 1] if 2 in generated else generated + [2]
        assert [to_hf[t] for t in hyps[0].tokens] + [2] == generated, (hyps[0].tokens, row)


@pytest.mark.parametrize("damage", ["spm", "pad", "activation", "src_lang", "early_stopping"])
def test_bad_m2m100_directories_are_refused_in_one_line_and_nothing_written(damage, spm_file, tmp_path):
    hf_dir = m2m100_dir(tmp_path / "hf", spm_file)
    config = json.loads((hf_dir / "config.json").read_text())
    kwargs = {}
    if damage == "spm":
        (hf_dir / "sentencepiece.bpe.model").unlink()
    elif damage == "pad":
        config["pad_token_id"] = 0
    elif damage == "activation":
        config["activation_function"] = "tanh"
    elif damage == "src_lang":
        kwargs["src_lang"] = "xx"
    else:
        gen = json.loads((hf_dir / "generation_config.json").read_text())
        (hf_dir / "generation_config.json").write_text(json.dumps({**gen, "early_stopping": "never",
                                                                   "num_beams": 5}))
    (hf_dir / "config.json").write_text(json.dumps(config))
    fragment = {"spm": "sentencepiece.bpe.model", "pad": "pad_token_id", "activation": "activation_function",
                "src_lang": "src_lang", "early_stopping": "early_stopping"}[damage]
    with pytest.raises(MtkitError, match=fragment) as info:
        import_hf(hf_dir, tmp_path / "out", **kwargs)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.*"))


def test_cli_import_refuses_an_m2m100_directory_without_its_tokenizer_in_one_line(spm_file, tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from cli_helpers import run_mtkit

    hf_dir = m2m100_dir(tmp_path / "hf", spm_file)
    (hf_dir / "vocab.json").unlink()
    done = run_mtkit("import-hf", str(hf_dir), "-o", str(tmp_path / "out"))
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert len(lines) == 1 and "vocab.json" in lines[0], done.stderr
    assert not (tmp_path / "out").exists()


def test_cli_import_takes_the_source_language(spm_file, tmp_path):
    """`mtkit import-hf --src-lang de` imports as `import_hf(src_lang="de")` does: the source BOS row
    is German's, not the tokenizer's default (en)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from cli_helpers import run_mtkit

    hf_dir = m2m100_dir(tmp_path / "hf", spm_file)
    done = run_mtkit("import-hf", str(hf_dir), "-o", str(tmp_path / "cli-de"), "--src-lang", "de")
    assert done.returncode == 0, done.stderr
    from_cli = load_model(tmp_path / "cli-de").model.state_dict()
    german = load_model(import_hf(hf_dir, tmp_path / "py-de", src_lang="de")).model.state_dict()
    english = load_model(import_hf(hf_dir, tmp_path / "py-en")).model.state_dict()
    differs = [k for k in english if not torch.equal(english[k], german[k])]
    assert differs, "the source language changed no weight"
    assert all(torch.equal(from_cli[k], german[k]) for k in german)
