"""`mtkit import-hf` of an M2M100 of facebook/m2m100_418M's shape (random weights: d_model 1024, 12 + 12
layers, FFN 4096, 16 heads, 128,112 rows: ~484 M parameters with the sinusoid-free checkpoint), then the
same lines translated by `transformers`' `generate` (greedy, ``forced_bos_token_id``) and by mtkit's
search (the ``<2de>`` tag as its start, greedy, fp32): the import's wall time and peak memory,
measured from outside in a process of its own (VmHWM beside the same process's baseline: Python,
torch and mtkit imported), and how many lines the two write token for token alike.

The tokenizer: a sentencepiece BPE model trained on the first lines of ``--data`` (English), in a
``vocab.json`` filled to m2m100_418M's 128,004 entries (the filler pieces are no sentencepiece piece, so
both tokenizers never produce them), M2M100Tokenizer's 100 language tokens and 8 made-up words after it.

    python bench/studies/hf_m2m100.py [--dir /tmp/mtkit-m2m100] [--lines 20] [--threads 2]

Needs `pip install 'mtkit[hf]'` and about 6 GiB of memory and 4 GiB of disk. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BASELINE = "import torch, safetensors.torch, mtkit.cli.app; from mtkit.interop import hf"
DATA = "/work/shared/data/deb-en-de/test.en"
VOCAB_JSON = 128004  # m2m100_418M's vocab.json (its config's vocab_size is 128,112)


def make_m2m100(root: Path, data: Path, max_length: int) -> int:
    """A random M2M100 directory of m2m100_418M's shape; returns its parameter count."""
    import sentencepiece as spm
    import torch
    from transformers import GenerationConfig, M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer

    hf = root / "hf"
    hf.mkdir(parents=True, exist_ok=True)
    with open(data, encoding="utf-8") as f:
        corpus = [line for _, line in zip(range(20000), f, strict=False)]
    (root / "corpus.txt").write_text("".join(corpus), encoding="utf-8")
    spm.SentencePieceTrainer.train(input=str(root / "corpus.txt"), model_prefix=str(root / "sp"),
                                   vocab_size=4000, model_type="bpe", minloglevel=2,
                                   hard_vocab_limit=False)
    sp = spm.SentencePieceProcessor(model_file=str(root / "sp.model"))
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for i in range(sp.get_piece_size()):
        if not (sp.is_control(i) or sp.is_unknown(i)):
            vocab[sp.id_to_piece(i)] = len(vocab)
    for i in range(VOCAB_JSON - len(vocab)):
        vocab[f"<filler{i}>"] = len(vocab)
    (hf / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    shutil.copyfile(root / "sp.model", hf / "sentencepiece.bpe.model")
    M2M100Tokenizer(str(hf / "vocab.json"), str(hf / "sentencepiece.bpe.model"), src_lang="en",
                    tgt_lang="de").save_pretrained(hf)
    cfg = M2M100Config(vocab_size=VOCAB_JSON + 108, d_model=1024, encoder_layers=12, decoder_layers=12,
                       encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
                       decoder_ffn_dim=4096, dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(0)
    model = M2M100ForConditionalGeneration(cfg)
    model.save_pretrained(hf)
    GenerationConfig(decoder_start_token_id=2, eos_token_id=2, pad_token_id=1, bos_token_id=0,
                     max_length=max_length, num_beams=1).save_pretrained(hf)
    return sum(p.numel() for p in model.parameters())


def measure(code: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of ``python -c code`` in a fresh process (it reports its own VmHWM)."""
    start = time.perf_counter()
    report = "; import re; print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])"
    done = subprocess.run([sys.executable, "-c", code + report], check=True, capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    return time.perf_counter() - start, int(done.stdout.split()[-1]) / 1024


def compare(root: Path, lines: list[str], threads: int) -> dict[str, object]:
    """Greedy `generate` (forced_bos_token_id = __de__, bad_words_ids [[pad]]) against mtkit's greedy
    search from the <2de> tag (fp32), one padded batch each: lines whose tokens are equal, and seconds."""
    import torch
    from transformers import AutoTokenizer, M2M100ForConditionalGeneration

    from mtkit.data.bpe import Bpe
    from mtkit.decode.loader import load_model
    from mtkit.decode.search import search
    from mtkit.vocab import PAD_ID

    torch.set_num_threads(threads)
    model = M2M100ForConditionalGeneration.from_pretrained(root / "hf").eval()
    tok = AutoTokenizer.from_pretrained(root / "hf")
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(**tok(lines, return_tensors="pt", padding=True), num_beams=1, do_sample=False,
                             forced_bos_token_id=tok.get_lang_id("de"), bad_words_ids=[[1]])
    hf_seconds = time.perf_counter() - start
    del model
    loaded = load_model(root / "mtkit", device=torch.device("cpu"))
    bpe = Bpe(root / "mtkit" / loaded.meta.src_bpe)
    ids = bpe.encode_ids(lines)
    src = torch.full((len(ids), max(map(len, ids))), PAD_ID, dtype=torch.long)
    for i, row in enumerate(ids):
        src[i, :len(row)] = torch.tensor(row)
    tag = bpe.piece_ids(["<2de>"], "bpe.model")["<2de>"]
    start = time.perf_counter()
    found = search(loaded.model, src, loaded.config.decoding, beam_size=1, start=torch.full((len(ids),), tag))
    mtkit_seconds = time.perf_counter() - start
    to_hf = []  # the M2M100 row of each mtkit id, through the pieces
    for i, p in enumerate(bpe.id_to_piece(list(range(len(bpe))))):
        if p.startswith("<2"):
            p = f"__{p[2:-1]}__"
        elif p.startswith("<row_"):
            to_hf.append(int(p[5:-1]))
            continue
        to_hf.append({2: 2, 0: 1}.get(i, tok.convert_tokens_to_ids("<s>" if p == "<fairseq_s>" else p)))
    equal = 0
    for row, hyps in zip(out.tolist(), found, strict=True):
        generated = [i for i in row[2:] if i != 1]
        generated = generated[:generated.index(2)] if 2 in generated else generated
        equal += [to_hf[t] for t in hyps[0].tokens] == generated
    return {"lines": len(lines), "greedy_equal": equal, "generate_seconds": round(hf_seconds, 1),
            "mtkit_seconds": round(mtkit_seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/mtkit-m2m100")
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--lines", type=int, default=20)
    parser.add_argument("--max-length", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    root = Path(args.dir)
    if not (root / "hf" / "model.safetensors").is_file():
        make_m2m100(root, Path(args.data), args.max_length)
    shutil.rmtree(root / "mtkit", ignore_errors=True)
    from safetensors import safe_open

    with safe_open(str(root / "hf" / "model.safetensors"), "pt") as f:
        params = sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())  # noqa: SIM118
    base_s, base_mib = measure(BASELINE)
    seconds, peak = measure(f"{BASELINE}; hf.import_hf({str(root / 'hf')!r}, {str(root / 'mtkit')!r})")
    size_mib = params * 4 / 2**20
    with open(args.data, encoding="utf-8") as f:
        lines = [line.strip() for _, line in zip(range(args.lines), f, strict=False)]
    held = peak - base_mib
    result = {"parameters": params, "fp32_mib": round(size_mib), "import_seconds": round(seconds - base_s, 1),
              "import_peak_rss_mib": round(peak), "baseline_rss_mib": round(base_mib),
              "held_mib": round(held), "held_per_model_size": round(held / size_mib, 2),
              **compare(root, lines, args.threads)}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
