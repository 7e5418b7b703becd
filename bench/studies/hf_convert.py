"""Time and memory of `mtkit import-hf` and `mtkit export --format hf` on an OPUS-MT-sized MarianMT model
(random weights: d_model 512, 6 + 6 layers, FFN 2048, 8 heads, a shared vocabulary of 58,101: ~74 M
parameters, as Helsinki-NLP/opus-mt-en-de), each conversion in its own process, measured from outside:
wall time, and the peak resident memory of the process (VmHWM) beside the same process's baseline
(Python, torch and mtkit imported, nothing converted), whose difference is what the conversion holds.

    python bench/studies/hf_convert.py [--dir /tmp/hf-bench]

Needs `pip install 'mtkit[hf]'`. Prints one JSON line per conversion.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

BASELINE = "import torch, safetensors.torch, mtkit.cli.app; from mtkit.interop import hf"


def make_marian(root: Path) -> int:
    """A random MarianMT directory with a 58,101-entry vocabulary; returns its parameter count."""
    import sentencepiece as spm
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    root.mkdir(parents=True, exist_ok=True)
    corpus = root / "corpus.txt"
    words = [f"w{i}x{i % 7}" for i in range(4000)]
    lines = (" ".join(words[j:j + 12]) for j in range(0, 4000, 3))
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    pieces: list[str] = []
    for name in ("source", "target"):
        spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(root / name), vocab_size=2000,
                                       model_type="unigram", minloglevel=2, hard_vocab_limit=False)
        sp = spm.SentencePieceProcessor(model_file=str(root / f"{name}.model"))
        pieces += [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                   if not (sp.is_control(i) or sp.is_unknown(i))]
    names = ["</s>", "<unk>"] + list(dict.fromkeys(pieces))
    names += [f"▁filler{i}" for i in range(58100 - len(names))] + ["<pad>"]
    pad = len(names) - 1
    cfg = MarianConfig(vocab_size=len(names), d_model=512, encoder_layers=6, decoder_layers=6,
                       encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                       decoder_ffn_dim=2048, activation_function="swish", scale_embedding=True,
                       pad_token_id=pad, decoder_start_token_id=pad, eos_token_id=0, forced_eos_token_id=0)
    torch.manual_seed(0)
    model = MarianMTModel(cfg)
    model.save_pretrained(root / "hf")
    GenerationConfig(bad_words_ids=[[pad]], num_beams=4, max_length=512, decoder_start_token_id=pad,
                     eos_token_id=0, forced_eos_token_id=0, pad_token_id=pad).save_pretrained(root / "hf")
    for name in ("source", "target"):
        (root / "hf" / f"{name}.spm").write_bytes((root / f"{name}.model").read_bytes())
    (root / "hf" / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(names)}), encoding="utf-8")
    (root / "hf" / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": False}),
                                                       encoding="utf-8")
    return sum(p.numel() for p in model.parameters())


def measure(code: str) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of ``python -c code`` in a fresh process (it reports its own peak)."""
    start = time.perf_counter()
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over fork + exec, so a child would report this
    # process's peak (the random model it made) as its own
    report = "; import re; print(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1])"
    done = subprocess.run([sys.executable, "-c", code + report],
                          check=True, capture_output=True, text=True,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})
    seconds = time.perf_counter() - start
    return seconds, int(done.stdout.split()[-1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/tmp/mtkit-hf-bench")
    root = Path(parser.parse_args().dir)
    params = make_marian(root)
    size_mib = params * 4 / 2**20
    base_s, base_mib = measure(BASELINE)
    for name, code in (
        ("import-hf", f"{BASELINE}; hf.import_hf({str(root / 'hf')!r}, {str(root / 'mtkit')!r})"),
        ("export-hf", f"{BASELINE}; hf.export_hf({str(root / 'mtkit')!r}, {str(root / 'back')!r})"),
    ):
        for out in ("mtkit", "back") if name == "import-hf" else ("back",):
            subprocess.run(["rm", "-rf", str(root / out)], check=True)
        seconds, peak = measure(code)
        print(json.dumps({"conversion": name, "parameters": params, "fp32_mib": round(size_mib),
                          "seconds": round(seconds - base_s, 2), "seconds_with_startup": round(seconds, 2),
                          "peak_rss_mib": round(peak), "baseline_rss_mib": round(base_mib),
                          "held_mib": round(peak - base_mib),
                          "held_per_model_size": round((peak - base_mib) / size_mib, 2)}), flush=True)


if __name__ == "__main__":
    main()
