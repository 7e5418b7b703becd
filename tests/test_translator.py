"""Translator and `mtkit translate`: order, line discipline on hostile input, formats, plots, CLI.

The model directory fixture is what `mtkit train` leaves behind, made in seconds: a tiny random
Transformer, a sentencepiece model trained on generated text, checkpoint_best.pt, meta.json.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from cli_helpers import Result, run_mtkit

from mtkit.checkpoint import save_checkpoint
from mtkit.config.experiment import Config, ModelConfig, to_dict
from mtkit.data.bpe import Bpe, train_bpe
from mtkit.decode.translator import CPU_MAX_TOKENS, Translator
from mtkit.errors import CheckpointError, ConfigError, MtkitError
from mtkit.models import build_model

WORDS = ["the", "house", "is", "small", ".", "a", "cat", "sat", "on", "mat", "!", "where", "are", "you",
         "going", "?", "we", "like", "green", "tea", "and", "bread", "every", "day", ",", "but", "not",
         "sunday", ";", "river", "stone", "light", "window", "door", "table"]


def make_model_dir(root: Path, arch: str = "transformer", seed: int = 0, vocab_size: int = 64,
                   data_max_len: int | None = None, model: dict | None = None,
                   symbols: tuple[str, ...] = (), meta: dict | None = None, **decoding) -> Path:
    """A model directory as `mtkit train` writes it, with a random tiny model (trained, says its
    config, on sentences of at most ``data_max_len`` subwords); ``symbols`` are whole BPE pieces (language
    tags), ``meta`` replaces entries of meta.json (a multilingual model's languages)."""
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    text = root / "corpus.txt"
    text.write_text("\n".join(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
                              for _ in range(400)) + "\n", encoding="utf-8")
    train_bpe([str(text)], str(root / "bpe"), vocab_size=vocab_size, symbols=list(symbols))
    size = len(Bpe(root / "bpe.model"))
    cfg = Config()
    cfg.model = ModelConfig(arch=arch, d_model=32, heads=4, d_ff=64, encoder_layers=2, decoder_layers=2,
                            emb_dim=16, hidden_size=32, dropout=0.0, **(model or {}))
    for key, value in decoding.items():
        setattr(cfg.decoding, key, value)
    if data_max_len is not None:
        cfg.data.max_len = data_max_len
    meta = {"src_lang": "en", "tgt_lang": "de", "joint": True, "src_bpe": "bpe.model", "tgt_bpe": "bpe.model",
            "src_vocab_size": size, "tgt_vocab_size": size, **(meta or {})}
    torch.manual_seed(seed)
    model = build_model(cfg.model, size, size, True)
    save_checkpoint({"model": model.state_dict(), "config": to_dict(cfg), "vocab": meta},
                    root / "checkpoint_best.pt")
    (root / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return make_model_dir(tmp_path_factory.mktemp("model"), beam_size=3, max_len_a=1.0, max_len_b=4)


def exact(model: Path, **options) -> Translator:
    """A one-thread fp32 translator: its results do not depend on how sentences are batched."""
    return Translator(model, device="cpu", threads=1, precision="fp32", **options)


@pytest.fixture(scope="module")
def translator(model_dir) -> Translator:
    return exact(model_dir)


def sentences(n: int, seed: int = 1) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 15))) for _ in range(n)]


# -------------------------------------------------------------------------------------- translation
def test_batched_equals_one_by_one_and_order_is_kept(translator):
    lines = sentences(12)
    together = translator.translate_hypotheses(lines)
    assert [t.index for t in together] == list(range(12))
    for line, tr in zip(lines, together, strict=True):
        alone = translator.translate_hypotheses([line])[0]
        assert alone.text == tr.text
        assert alone.hypotheses[0].score == pytest.approx(tr.hypotheses[0].score, abs=1e-4)


def test_token_budget_and_chunks_do_not_change_results(model_dir, translator):
    lines = sentences(15, seed=2)
    reference = translator.translate(lines)
    small = exact(model_dir, overrides=["decoding.max_tokens=20"])
    assert small.translate(lines) == reference
    streamed = [t.text for t in translator.translate_stream(iter(lines), chunk_size=4)]
    assert streamed == reference


def test_the_batch_budget_is_chosen_by_device_unless_given(model_dir):
    assert exact(model_dir).max_tokens == CPU_MAX_TOKENS  # 0 = auto; a GPU gets GPU_MAX_TOKENS
    assert exact(model_dir, max_tokens=50).max_tokens == 50
    with pytest.raises(ConfigError, match="--max-tokens must be at least 1"):
        exact(model_dir, max_tokens=-1)


def test_a_batch_the_device_cannot_hold_is_searched_in_halves(model_dir, translator, monkeypatch, capsys):
    lines = sentences(12, seed=3)
    reference = translator.translate_hypotheses(lines)
    tr = exact(model_dir)
    real, sizes = tr.backend.search, []

    def search(ids, *args):
        sizes.append(len(ids))
        if len(ids) > 3:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(ids, *args)

    monkeypatch.setattr(tr.backend, "search", search)
    got = tr.translate_hypotheses(lines)
    assert [t.text for t in got] == [t.text for t in reference]
    for a, b in zip(got, reference, strict=True):
        assert a.hypotheses[0].score == pytest.approx(b.hypotheses[0].score, abs=1e-4)
    assert sizes[0] > 3 and sum(n for n in sizes if n <= 3) == sizes[0]  # each sentence searched once
    assert capsys.readouterr().err.count("out of memory") == 1  # one warning for the whole run

    def no_memory(ids, *args):
        raise RuntimeError("CUDA failed with error out of memory")  # CTranslate2's wording

    monkeypatch.setattr(tr.backend, "search", no_memory)
    with pytest.raises(MtkitError, match="out of memory on cpu for a single sentence"):
        tr.translate(["the cat"])

    def broken(ids, *args):
        raise RuntimeError("something else")

    monkeypatch.setattr(tr.backend, "search", broken)
    with pytest.raises(RuntimeError, match="something else"):  # other errors are not retried
        tr.translate(lines)


def test_translation_is_the_detokenized_best_hypothesis(translator):
    tr = translator.translate_hypotheses(["the cat sat on the mat ."])[0]
    best = tr.hypotheses[0]
    assert best.text == translator.tgt_bpe.decode_ids([best.token_ids])[0]
    assert best.tokens == translator.tgt_bpe.id_to_piece(best.token_ids)
    assert tr.source_tokens == translator.src_bpe.encode_pieces([tr.source])[0]


def test_hostile_input_keeps_one_output_per_line(model_dir, capsys):
    translator = exact(model_dir, overrides=["decoding.beam_size=1"])
    long_line = " ".join(random.Random(3).choice(WORDS) for _ in range(5000))
    lines = ["", "   \t ", "the cat .", long_line, "a\x00b\x1b[31mc\x7f door", "window \u2028 door", "\x0c"]
    out = translator.translate_hypotheses(lines)
    assert len(out) == len(lines)
    assert out[0].text == "" and out[1].text == "" and out[6].text == ""
    assert out[0].hypotheses == [] and out[1].hypotheses == []
    assert out[2].text and out[4].text and out[5].text
    assert len(translator.src_bpe.encode_ids([long_line])[0]) > 5000  # really a 5,000+ subword line
    assert out[3].text and len(out[3].hypotheses[0].token_ids) > 2 * translator.decoding.max_input_tokens
    err = capsys.readouterr().err
    assert re.search(r"<input>:4: a sentence of \d+ subwords is longer than the model takes \(250: "
                     r"data\.max_len.*translating the line in \d+ parts", err), err
    assert err.count("warning:") == 1


def test_lone_surrogates_translate_as_the_replacement_character(translator):
    # what a JavaScript client sends after cutting an emoji in half; sentencepiece cannot encode it
    out = translator.translate_hypotheses(["c\ud800", "the \udc80 house ."])
    assert [t.text for t in out] == translator.translate(["c\ufffd", "the \ufffd house ."])
    assert out[0].source == "c\ufffd"


@pytest.mark.parametrize("engine", ["torch", "ct2"])
def test_lines_with_nothing_visible_give_empty_translations(model_dir, engine, tmp_path):
    """Bidi controls, zero-width and other format characters, variation selectors: a model given only
    those invents a sentence (a random model, its longest one); the line must come back empty."""
    model = model_dir
    if engine == "ct2":
        pytest.importorskip("ctranslate2")
        from mtkit.interop.export import run_export

        model = run_export(model_dir, tmp_path / "exported")
    tr = Translator(model, device="cpu", threads=1)
    lines = ["\u202e\u200b", "\ufe0f", "\u2066 \u2069\u00ad", "\U000e0041\ufeff", "\u200b", "the cat ."]
    out = tr.translate_hypotheses(lines)
    assert [t.text for t in out[:-1]] == [""] * 5
    assert all(t.hypotheses == [] for t in out[:-1]) and out[-1].text


def capitalised(n: int, seed: int) -> list[str]:
    """Sentences as a paragraph holds them: a capital first word, a final . ? or !"""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        words = [rng.choice(WORDS[:4] + WORDS[5:10] + WORDS[17:24]) for _ in range(rng.randint(2, 7))]
        out.append(" ".join(words).capitalize() + " " + rng.choice(".?!"))
    return out


@pytest.mark.parametrize("k", [2, 8, 30])
def test_a_paragraph_translates_as_its_sentences_one_by_one(model_dir, k, capsys):
    """A paragraph of k sentences gives the k sentences' own translations joined with spaces, with
    their scores, tokens and alignments, though it is far longer than max_input_tokens; no warning."""
    translator = exact(model_dir, overrides=["decoding.max_input_tokens=32"])
    lines = capitalised(60, seed=k)
    alone = translator.translate_hypotheses(lines, need_attention=True)
    assert max(len(t.source_tokens) for t in alone) <= 32  # the sentences are not cut
    paragraphs = [" ".join(lines[i:i + k]) for i in range(0, len(lines), k)]
    together = translator.translate_hypotheses(paragraphs, need_attention=True)
    assert len(together) == len(paragraphs)
    assert min(len(t.source_tokens) for t in together) > 32 or k == 2
    for n, tr in enumerate(together):
        parts = alone[n * k:(n + 1) * k]
        assert tr.text == " ".join(t.text for t in parts if t.text)
        best = tr.hypotheses[0]
        assert best.token_ids == [i for t in parts for i in t.hypotheses[0].token_ids]
        assert tr.source_tokens == [s for t in parts for s in t.source_tokens]
        assert best.log_prob == pytest.approx(sum(t.hypotheses[0].log_prob for t in parts), abs=1e-3)
        # block-diagonal: each sentence's target tokens are aligned inside its own source span
        shifted, src, tgt = [], 0, 0
        for t in parts:
            shifted += [(i + src, j + tgt) for i, j in t.hypotheses[0].alignment]
            src, tgt = src + len(t.source_tokens), tgt + len(t.hypotheses[0].token_ids)
        assert best.alignment == shifted
        assert best.attention.shape[1:] == (tgt + 1, src)
    assert "warning" not in capsys.readouterr().err


def test_a_sentence_longer_than_training_is_cut_at_clauses(translator, tmp_path, capsys):
    """The model's training length (data.max_len) bounds what it is given: a longer sentence is cut,
    at a ';' before anywhere else, and the pieces' translations are joined."""
    half = "the cat sat on the mat and we like green tea"
    limit = len(translator.src_bpe.encode_ids([f"{half} ;"])[0]) + 2
    d = make_model_dir(tmp_path / "short", data_max_len=limit, beam_size=2, max_len_a=1.0, max_len_b=4)
    translator = exact(d)  # the same subwords as the fixture's model (the same seed)
    assert translator.max_input_tokens == limit < 2 * limit - 4
    out = translator.translate_hypotheses([f"{half} ; {half}", f"{half} , {half} ; {half}", half],
                                          need_attention=True)
    first = translator.translate_hypotheses([f"{half} ;", half])
    assert out[0].text == f"{first[0].text} {first[1].text}"
    assert all(t.hypotheses[0].attention.shape[2] == len(t.source_tokens) for t in out)
    err = capsys.readouterr().err
    assert "<input>:1: a sentence of" in err and f"({limit}: data.max_len" in err and "in 2 parts" in err
    assert "<input>:2:" in err and "<input>:3:" not in err
    # source_segments names the same pieces: the cut line's two, each within the limit, whose
    # subwords are what the translation's source tokens hold
    segments = translator.source_segments(f"{half} ; {half}")
    assert len(segments) == 2 and all(len(s) <= limit for s in segments)
    assert translator.src_bpe.id_to_piece([t for s in segments for t in s]) == out[0].source_tokens
    assert translator.source_segments(half) == translator.src_bpe.encode_ids([half])
    assert translator.source_segments("\u202e\u200b") == []


def test_nbest_and_alignment(model_dir):
    translator = exact(model_dir, nbest=3)
    out = translator.translate_hypotheses(sentences(4, seed=5), need_attention=True)
    for tr in out:
        assert len(tr.hypotheses) == 3
        assert len({tuple(h.token_ids) for h in tr.hypotheses}) == 3
        assert [h.score for h in tr.hypotheses] == sorted((h.score for h in tr.hypotheses), reverse=True)
        for h in tr.hypotheses:
            assert h.attention.shape[1:] == (len(h.token_ids) + 1, len(tr.source_tokens))
            assert [j for _, j in h.alignment] == list(range(len(h.token_ids)))
            assert all(0 <= i < len(tr.source_tokens) for i, _ in h.alignment)


def test_sampling_seeded_and_ensemble(model_dir, tmp_path):
    lines = sentences(5, seed=6)
    a = exact(model_dir, sample=True, seed=3, nbest=2)
    b = exact(model_dir, sample=True, seed=3, nbest=2)
    assert [[h.text for h in t.hypotheses] for t in a.translate_hypotheses(lines)] == \
        [[h.text for h in t.hypotheses] for t in b.translate_hypotheses(lines)]
    alone = exact(model_dir)
    pair = exact(model_dir, ensemble=[model_dir])
    assert pair.translate(lines) == alone.translate(lines)
    other = make_model_dir(tmp_path / "other", vocab_size=80)
    if len(Bpe(other / "bpe.model")) != len(alone.src_bpe):
        with pytest.raises(ConfigError, match="share vocabularies"):
            Translator(model_dir, device="cpu", ensemble=[other])


def test_checkpoint_file_and_choice(model_dir, tmp_path, capsys):
    lines = sentences(3, seed=9)
    reference = exact(model_dir).translate(lines)
    assert exact(model_dir / "checkpoint_best.pt").translate(lines) == reference
    assert exact(model_dir, checkpoint=str(model_dir / "checkpoint_best.pt")).translate(lines) == reference
    only_last = tmp_path / "only_last"
    only_last.mkdir()
    for name in ("bpe.model", "meta.json"):
        (only_last / name).write_bytes((model_dir / name).read_bytes())
    (only_last / "checkpoint_last.pt").write_bytes((model_dir / "checkpoint_best.pt").read_bytes())
    assert exact(only_last).translate(lines) == reference
    assert "using checkpoint_last.pt" in capsys.readouterr().err


def test_int8_translates(model_dir):
    lines = sentences(3, seed=7)
    quantized = exact(model_dir, int8=True)
    assert len(quantized.translate(lines)) == 3


@pytest.mark.parametrize("arch", ["transformer", "rnn"])
def test_bf16_decoding_scores_like_fp32(arch, tmp_path):
    """bf16 weights change rounding, not the model: the best hypothesis bf16 finds scores, under the
    fp32 model, within a small margin of fp32's own best."""
    d = make_model_dir(tmp_path / arch, arch=arch, beam_size=3, max_len_a=1.0, max_len_b=4)
    lines = sentences(8, seed=11)
    fp32 = exact(d)
    bf16 = Translator(d, device="cpu", threads=1, precision="bf16")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    assert fp32.dtype == torch.float32
    a, b = fp32.translate_hypotheses(lines), bf16.translate_hypotheses(lines)
    assert len(b) == len(lines) and all(t.text for t in b)
    for x, y in zip(a, b, strict=True):
        best = x.hypotheses[0].score
        assert y.hypotheses[0].score == pytest.approx(best, abs=0.1 * abs(best))


def test_precision_errors(model_dir):
    with pytest.raises(ConfigError, match="fp16 needs a GPU"):
        Translator(model_dir, device="cpu", precision="fp16")
    with pytest.raises(ConfigError, match="int8"):
        Translator(model_dir, device="cpu", precision="bf16", int8=True)
    with pytest.raises(ConfigError, match="use auto, fp32"):
        Translator(model_dir, device="cpu", precision="half")


def test_rnn_model_dir(tmp_path):
    d = make_model_dir(tmp_path / "rnn", arch="rnn", beam_size=2, max_len_a=1.0, max_len_b=3)
    out = Translator(d, device="cpu", threads=1).translate_hypotheses(["the cat .", ""], need_attention=True)
    assert out[0].text and out[1].text == ""
    assert out[0].hypotheses[0].attention.shape[0] == 1


def test_attention_plot_of_a_model_without_attention_is_refused(tmp_path):
    d = make_model_dir(tmp_path / "plain", arch="rnn", model={"attention": "none"}, max_len_b=3)
    src = tmp_path / "in.txt"
    src.write_text("the cat .\n", encoding="utf-8")
    proc = run_mtkit("translate", "-m", d, "-i", src, "-o", tmp_path / "out.txt", "--attention-plot",
                     tmp_path / "plots")
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "this RNN has no attention (model.attention: none)" in proc.stderr
    assert not (tmp_path / "out.txt").exists() and not (tmp_path / "plots").exists()


def test_errors_are_user_errors(model_dir, tmp_path):
    with pytest.raises(CheckpointError):
        Translator(tmp_path / "missing")
    with pytest.raises(CheckpointError):
        Translator(model_dir, checkpoint="last")
    with pytest.raises(ConfigError, match="decoding"):
        Translator(model_dir, overrides=["model.d_model=8"])
    with pytest.raises(ConfigError):
        Translator(model_dir, overrides=["decoding.beam_sise=3"])
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "checkpoint_best.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError):
        Translator(bad)


# ---------------------------------------------------------------------------------------------- CLI
def run_cli(*args: str, stdin: bytes = b"") -> Result:
    """`mtkit translate ARGS` in this process (tests/cli_helpers.py), stdin given as bytes."""
    return run_mtkit("translate", *args, input=stdin)


def _env() -> dict:
    """The environment of a `python -m mtkit` process under test: one OpenMP thread."""
    import os

    return {**os.environ, "OMP_NUM_THREADS": "1"}


def test_cli_hostile_stdin_keeps_line_count(model_dir):
    long_line = " ".join(random.Random(4).choice(WORDS) for _ in range(5000)).encode()
    lines = [b"", b"   ", b"the house is small .", long_line, b"bad \xff\xfe bytes \xc3",
             b"ctrl \x00\x1b\x7f x", b"\t", b"where are you going ?", "\u202e\u200b".encode()]
    stdin = b"\n".join(lines) + b"\n"
    res = run_cli("-m", str(model_dir), "--greedy", "--threads", "1", stdin=stdin)
    assert res.returncode == 0, res.stderr
    out = res.stdout.split("\n")
    assert out[-1] == "" and len(out) - 1 == len(lines)
    assert out[0] == "" and out[1] == "" and out[6] == "" and out[8] == ""  # 8: nothing visible
    assert all(out[i] for i in (2, 3, 4, 5, 7))
    err = res.stderr
    assert "<stdin>:5: invalid UTF-8" in err
    assert "<stdin>:4: a sentence of" in err and "translating the line in" in err


def invoke(*args: str) -> str:
    """Run `mtkit translate` in this process (no interpreter start-up); returns stdout."""
    from typer.testing import CliRunner

    from mtkit.cli.app import app

    res = CliRunner().invoke(app, ["translate", *args, "--threads", "1"])
    assert res.exit_code == 0, (res.output, res.exception)
    return res.stdout


def test_cli_file_io_nbest_json_alignment_plots(model_dir, tmp_path):
    src = tmp_path / "in.txt"
    lines = sentences(5, seed=8) + [""]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    invoke("-m", str(model_dir), "-i", str(src), "-o", str(out), "--beam", "3")
    plain = out.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(plain) == 6 and plain[5] == ""

    rows = invoke("-m", str(model_dir), "-i", str(src), "--nbest", "3", "--beam", "3",
                  "--alignment").split("\n")[:-1]
    assert len(rows) == 18
    pharaoh = re.compile(r"^(\d+-\d+( \d+-\d+)*)?$")
    translator = exact(model_dir)
    for n, row in enumerate(rows):
        index, score, text, align = row.split("\t")
        assert int(index) == n // 3
        float(score)
        assert pharaoh.match(align), align
        line = lines[n // 3]
        n_src = len(translator.src_bpe.encode_ids([line])[0]) if line else 0
        pairs = [tuple(map(int, p.split("-"))) for p in align.split()]
        assert all(0 <= i < n_src for i, _ in pairs)
        assert [j for _, j in pairs] == list(range(len(pairs)))  # one source index per target token
        assert (len(pairs) == 0) == (line == "")
    assert [r.split("\t")[2] for r in rows[::3]] == plain

    rows = invoke("-m", str(model_dir), "-i", str(src), "--beam", "3", "--alignment").split("\n")[:-1]
    assert [r.split("\t")[0] for r in rows] == plain
    assert all(pharaoh.match(r.split("\t")[1]) for r in rows)

    plots = tmp_path / "plots"
    stdout = invoke("-m", str(model_dir), "-i", str(src), "--beam", "3", "--json", "--attention-plot",
                    str(plots), "--attention-head", "1", "--attention-layer", "0")
    records = [json.loads(r) for r in stdout.split("\n")[:-1]]
    assert [r["index"] for r in records] == list(range(6))
    assert [r["text"] for r in records] == plain
    assert all(set(r) >= {"text", "score", "tokens", "alignment", "source_tokens"} for r in records)
    pngs = sorted(p.name for p in plots.glob("*.png"))
    assert pngs == [f"attention-{i:06d}.png" for i in range(5)]  # the empty line has nothing to plot
    assert all((plots / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)

    limited = tmp_path / "limited"
    invoke("-m", str(model_dir), "-i", str(src), "--greedy", "--attention-plot", str(limited),
           "--attention-plot-max", "2")
    assert sorted(p.name for p in limited.glob("*.png")) == ["attention-000000.png", "attention-000001.png"]


def test_cli_options_reach_the_search(model_dir, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("the house is small .\nwhere are you going ?\n", encoding="utf-8")
    stdout = invoke("-m", str(model_dir), "-i", str(src), "--greedy", "--min-len", "9", "--max-len-a", "0",
                    "--max-len-b", "9", "--json")
    for r in map(json.loads, stdout.split("\n")[:-1]):
        assert len(r["tokens"]) == 9
    stdout = invoke("-m", str(model_dir), "-i", str(src), "--beam", "2", "--max-len-a", "0",
                    "--max-len-b", "3", "--set", "decoding.min_len=3", "--json")
    for r in map(json.loads, stdout.split("\n")[:-1]):
        assert len(r["tokens"]) == 3
    sampled = [invoke("-m", str(model_dir), "-i", str(src), "--sample", "--seed", str(seed), "--top-k", "5",
                      "--temperature", "2", "--min-len", "6") for seed in (5, 5, 6)]
    assert sampled[0] == sampled[1] != sampled[2]


def test_cli_errors_are_one_line(model_dir, tmp_path):
    res = run_cli("-m", str(tmp_path / "nope"))
    assert res.returncode != 0 and res.stderr.startswith("error: ")
    assert "Traceback" not in res.stderr
    res = run_cli("-m", str(model_dir), "--set", "decoding.beam_size=0", stdin=b"a\n")
    assert res.returncode != 0 and "decoding.beam_size" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.skipif(sys.platform != "linux", reason="needs a pseudo-terminal")
def test_cli_answers_a_typed_line_at_once(model_dir):
    """With a terminal on stdin each line is translated when it is typed, before end of input."""
    import os
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "mtkit", "translate", "-m", str(model_dir), "--greedy",
                             "--threads", "1"], stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_env())
    os.close(slave)
    try:
        os.write(master, b"the house is small .\n")
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready, "no answer before end of input"
        assert proc.stdout.readline().strip()
        assert proc.poll() is None  # still waiting for more input
    finally:
        os.write(master, b"\x04")  # end of input
        proc.wait(timeout=60)
        os.close(master)
        proc.stdout.close()
        proc.stderr.close()


def _line_within(fd: int, buf: bytearray, seconds: float) -> bytes | None:
    """The next line on ``fd`` (without its newline), or None when none comes within ``seconds``."""
    import os
    import select
    import time

    deadline = time.monotonic() + seconds
    while b"\n" not in buf:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return None
        data = os.read(fd, 65536)
        if not data:
            return None
        buf += data
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return line


@pytest.mark.skipif(sys.platform == "win32", reason="streams stdin with select (POSIX)")
def test_cli_answers_each_line_of_a_pipe_while_it_stays_open(model_dir):
    """A program driving mtkit through a pipe gets each line's translation while stdin stays open;
    an empty line gives an empty line; closing stdin ends the run cleanly, one line out per line in."""
    import time

    lines = [b"the house is small .", b"where are you going ?", b"", b"we like green tea"]
    expected = exact(model_dir, beam_size=1).translate([x.decode() for x in lines])
    proc = subprocess.Popen([sys.executable, "-m", "mtkit", "translate", "-m", str(model_dir), "--greedy",
                             "--threads", "1"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=_env())
    buf = bytearray()
    fd = proc.stdout.fileno()
    try:
        proc.stdin.write(lines[0] + b"\n")
        proc.stdin.flush()
        first = _line_within(fd, buf, 120)  # the interpreter's start and the model's load included
        assert first is not None, "no answer while stdin stays open"
        assert first.decode() == expected[0]
        start = time.monotonic()
        proc.stdin.write(b"\n".join(lines[1:3]) + b"\n")
        proc.stdin.flush()
        assert [_line_within(fd, buf, 30), _line_within(fd, buf, 30)] == [e.encode() for e in expected[1:3]]
        answered = time.monotonic() - start
        assert proc.poll() is None  # still waiting for more input
        proc.stdin.write(lines[3])  # no final newline: answered at the end of input
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0, proc.stderr.read().decode()
        rest = bytes(buf) + proc.stdout.read()
        assert rest == expected[3].encode() + b"\n"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert answered < 10


def test_stream_chunks_hand_on_what_has_arrived(tmp_path):
    """Lines that have arrived are handed on when more would mean waiting, at most max_lines at a
    time; a line is whole before it is handed on; bytes are decoded like read_lines(strict=False)."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from mtkit.decode.streaming import stream_chunks

    bad: list[int] = []
    r, w = os.pipe()
    chunks = stream_chunks(r, 3, bad.append)
    pool = ThreadPoolExecutor(1)

    def arrived() -> list[str]:
        return pool.submit(next, chunks).result(timeout=10)  # a reader that waits for more fails here

    try:
        os.write(w, b"one\ntwo\nthr")
        assert arrived() == ["one", "two"]  # "thr" waits for its newline
        os.write(w, b"ee\r\nfo\rur\nbad \xff\n\n5\n")
        assert arrived() == ["three", "fo ur", "bad \ufffd"]  # a full chunk first
        assert bad == [5]
        assert arrived() == ["", "5"]
        os.write(w, b"last")
        os.close(w)
        w = -1
        assert pool.submit(list, chunks).result(timeout=10) == [["last"]]
    finally:
        if w >= 0:
            os.close(w)  # ends a read still waiting
        pool.shutdown(wait=True)
        os.close(r)


# ------------------------------------------------------------------------------ files through the API
SRT = (b"1\r\n00:00:01,000 --> 00:00:02,000\r\nthe house is small .\r\n\r\n"
       b"2\r\n00:00:03,000 --> 00:00:04,500\r\n<i>where are you going ?</i>\r\n\r\n")
PO = (b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\nmsgid "the cat sat on the mat"\n'
      b'msgstr ""\n\n#, c-format\nmsgid "we like %s and bread"\nmsgstr ""\n')


TEXT = b"\xef\xbb\xbfthe house is small .\r\nwe like tea\r\n"


@pytest.mark.parametrize(("name", "data"), [("talk.srt", SRT), ("app.po", PO)])
def test_translate_file_gives_what_the_command_gives(model_dir: Path, tmp_path: Path, name: str,
                                                     data: bytes) -> None:
    source = tmp_path / name
    source.write_bytes(data)
    result = exact(model_dir).translate_file(source, tmp_path / f"api-{name}")
    cli = run_cli("-m", str(model_dir), "-i", str(source), "-o", str(tmp_path / f"cli-{name}"),
                  "--device", "cpu", "--threads", "1", "--precision", "fp32")
    assert cli.returncode == 0, cli.stderr
    assert (tmp_path / f"api-{name}").read_bytes() == (tmp_path / f"cli-{name}").read_bytes() == result.data
    assert result.data != data and result.summary  # translated, with what the command prints
    assert exact(model_dir).translate_bytes(data, name).data == result.data  # bytes in, bytes out


def test_translate_bytes_keeps_a_text_files_bom_and_line_endings(model_dir: Path) -> None:
    translator = exact(model_dir)
    result = translator.translate_bytes(TEXT, "notes.txt")
    lines = translator.translate(["the house is small .", "we like tea"])
    assert result.data == ("\ufeff" + "".join(f"{line}\r\n" for line in lines)).encode("utf-8")


def test_translate_file_never_writes_over_its_input(model_dir: Path, tmp_path: Path) -> None:
    source = tmp_path / "talk.srt"
    source.write_bytes(SRT)
    with pytest.raises(ConfigError, match="being translated"):
        exact(model_dir).translate_file(source, source)
    assert source.read_bytes() == SRT
    with pytest.raises(ConfigError, match="format"):
        exact(model_dir).translate_bytes(SRT, "talk.srt", format="pdf")


def test_a_document_goes_into_the_target_language_the_translator_was_made_for(tmp_path: Path) -> None:
    """A multilingual model's Translator made for one target (tgt_lang) translates a document into it:
    the catalog's header names that language, not the model's first."""
    from serve_helpers import multilingual_model

    model = multilingual_model(tmp_path / "multi", pairs=(("en", "de"), ("en", "es")))
    po = (b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n\n'
          b'msgid "the house"\nmsgstr ""\n')
    translator = Translator(model, device="cpu", precision="fp32", tgt_lang="es")
    assert b'"Language: es\\n"' in translator.translate_bytes(po, "a.po").data
    assert b'"Language: de\\n"' in translator.translate_bytes(po, "a.po", tgt_lang="de").data
