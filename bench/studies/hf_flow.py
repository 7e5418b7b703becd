"""The realistic Hugging Face flow of docs/hf.md, the `transformers` side: translate a file with
`MarianMTModel.generate` on a directory written by `mtkit export --format hf`, and compare two outputs.
No mtkit import here: this is what a user with only `transformers` runs (docs/notebook, 2026-11-27).

    python bench/studies/hf_flow.py generate HF_DIR -i test.en -o hyp.de [--beam 1] [--batch-size 32]
        [--threads 2]
    python bench/studies/hf_flow.py generate HF_DIR -i test.sent.en --join test.sent.en.count -o hyp.de
    python bench/studies/hf_flow.py compare A B --ref test.de        # BLEU of both, identical lines
    python bench/studies/hf_flow.py rescore HF_DIR A B --src test.en --count test.sent.en.count

`mtkit translate` cuts every line into sentences and joins their translations with a space; `generate`
translates a line as it stands. For the same inputs, cut the file first with `bench/studies/hf_segment.py`
(mtkit's splitter) and give `--join` its count file: the sentences' translations are joined back into
one line per input line as mtkit joins them.

`generate` takes every search setting from the export's generation_config.json (max_length,
length_penalty, forced_eos_token_id, bad_words_ids, min_length), which `mtkit export --format hf`
writes from the model's `decoding` section; only `num_beams` is given here, as `mtkit translate --beam`
(and `--length-penalty`, to compare with `mtkit translate --length-norm`).
Sentences are batched by length (sorted) and written back in input order; padding does not change
the result (MarianMT masks it). Needs `pip install 'mtkit[hf]'` (transformers, safetensors,
sentencepiece) and sacrebleu for `compare`. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def generate(args: argparse.Namespace) -> dict:
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    torch.set_num_threads(args.threads)
    model = MarianMTModel.from_pretrained(args.model).eval()
    tok = MarianTokenizer.from_pretrained(args.model)
    lines = Path(args.input).read_text(encoding="utf-8").splitlines()
    counts = [int(n) for n in Path(args.join).read_text(encoding="utf-8").split()] if args.join else None
    if counts is not None:
        if sum(counts) != len(lines):
            sys.exit(f"{args.join}: {sum(counts)} sentences, {args.input}: {len(lines)} lines")
        counts = counts[:args.max_lines or None]  # the first N lines of the original file
        lines = lines[:sum(counts)]
    elif args.max_lines:
        lines = lines[:args.max_lines]
    order = sorted(range(len(lines)), key=lambda i: len(tok(lines[i]).input_ids))
    out: list[str] = [""] * len(lines)
    start = time.perf_counter()
    with torch.inference_mode():
        for b in range(0, len(order), args.batch_size):
            idx = order[b:b + args.batch_size]
            enc = tok([lines[i] for i in idx], return_tensors="pt", padding=True)
            extra = {} if args.length_penalty is None else {"length_penalty": args.length_penalty}
            gen = model.generate(**enc, num_beams=args.beam, do_sample=False, **extra)
            for i, text in zip(idx, tok.batch_decode(gen, skip_special_tokens=True), strict=True):
                out[i] = text
    seconds = time.perf_counter() - start
    sentences = len(out)
    if counts is not None:
        it = iter(out)
        out = [" ".join(t for t in (next(it) for _ in range(n)) if t) for n in counts]
    Path(args.output).write_text("".join(t + "\n" for t in out), encoding="utf-8")
    return {"model": args.model, "beam": args.beam, "sentences": sentences, "lines": len(out),
            "seconds": round(seconds, 1), "sent_per_s": round(sentences / seconds, 2),
            "torch_threads": args.threads, "length_penalty_override": args.length_penalty,
            "generation_config": model.generation_config.to_diff_dict()}


def compare(args: argparse.Namespace) -> dict:
    import sacrebleu

    a = Path(args.a).read_text(encoding="utf-8").splitlines()
    b = Path(args.b).read_text(encoding="utf-8").splitlines()
    ref = Path(args.ref).read_text(encoding="utf-8").splitlines()
    if not len(a) == len(b) <= len(ref):
        sys.exit(f"line counts differ: {len(a)}, {len(b)}, reference {len(ref)}")
    ref = ref[:len(a)]
    bleu = {name: round(sacrebleu.corpus_bleu(hyp, [ref]).score, 2) for name, hyp in (("a", a), ("b", b))}
    same = sum(x == y for x, y in zip(a, b, strict=True))
    return {"a": args.a, "b": args.b, "bleu_a": bleu["a"], "bleu_b": bleu["b"],
            "delta": round(bleu["a"] - bleu["b"], 2), "identical": same, "lines": len(a)}


def rescore(args: argparse.Namespace) -> dict:
    """Where A and B differ on a line of one sentence: the model's mean log-probability per target token
    (EOS included) of each, by teacher forcing in `transformers` (the texts re-tokenised)."""
    import torch
    from transformers import MarianMTModel, MarianTokenizer

    torch.set_num_threads(args.threads)
    model = MarianMTModel.from_pretrained(args.model).eval()
    tok = MarianTokenizer.from_pretrained(args.model)
    a = Path(args.a).read_text(encoding="utf-8").splitlines()
    b = Path(args.b).read_text(encoding="utf-8").splitlines()
    src = Path(args.src).read_text(encoding="utf-8").splitlines()
    counts = [int(n) for n in Path(args.count).read_text(encoding="utf-8").split()]

    def mean_logprob(x: str, y: str) -> tuple[float, int]:
        labels = tok(text_target=[y], return_tensors="pt").input_ids
        with torch.inference_mode():
            logp = model(**tok([x], return_tensors="pt"), labels=labels).logits.log_softmax(-1)
        return logp[0].gather(-1, labels[0][:, None]).mean().item(), labels.shape[1]

    found = [(mean_logprob(src[i], a[i]), mean_logprob(src[i], b[i]))
             for i in range(len(a)) if a[i] != b[i] and counts[i] == 1]
    n = max(len(found), 1)
    return {"differing_one_sentence_lines": len(found), "a_higher": sum(x[0] > y[0] for x, y in found),
            "b_higher": sum(y[0] > x[0] for x, y in found),
            "mean_tokens_a": round(sum(x[1] for x, _ in found) / n, 1),
            "mean_tokens_b": round(sum(y[1] for _, y in found) / n, 1)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("model")
    g.add_argument("-i", "--input", required=True)
    g.add_argument("-o", "--output", required=True)
    g.add_argument("--beam", type=int, default=1)
    g.add_argument("--batch-size", type=int, default=32)
    g.add_argument("--threads", type=int, default=2)
    g.add_argument("--max-lines", type=int, default=0,
                   help="the first N lines only (0 = all); with --join, lines of the original file")
    g.add_argument("--length-penalty", type=float,
                   help="instead of the export's (0 = mtkit's length_norm none, 1 = average)")
    g.add_argument("--join", help="a count file of bench/studies/hf_segment.py: join the sentences "
                   "into lines")
    c = sub.add_parser("compare")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--ref", required=True)
    r = sub.add_parser("rescore")
    r.add_argument("model")
    r.add_argument("a")
    r.add_argument("b")
    r.add_argument("--src", required=True)
    r.add_argument("--count", required=True, help="bench/studies/hf_segment.py's count file of --src")
    r.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    print(json.dumps({"generate": generate, "compare": compare, "rescore": rescore}[args.cmd](args)))


if __name__ == "__main__":
    main()
