"""`mtkit translate` on a CTranslate2 export against CTranslate2 itself (docs/notebook, "CPU decoding
against plain CTranslate2"): the same export, lines and thread layout (one-thread translators side by
side, one per core, sub-batches of mtkit's token budget), in one run.

plain: a short script that tokenizes with the export's sentencepiece model, calls
``translate_batch`` once over all lines and detokenizes (what a user of CTranslate2 writes);
mtkit: the whole `mtkit translate` command, with and without ``--scores`` (which scores every
hypothesis cut at the length limit again, as every run did before SearchOptions.scores).

    python bench/studies/ct2_plain.py --export DIR --input test.en [--input other.en] [--runs 3] [--beams 1,5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PLAIN = r'''
import sys, time, ctranslate2, sentencepiece as spm
export, src, beam, limit_a, limit_b, threads, sub_batch = sys.argv[1:8]
lines = open(src, encoding="utf-8").read().splitlines()
start = time.perf_counter()
sp = spm.SentencePieceProcessor(model_file=f"{export}/bpe.model")
tr = ctranslate2.Translator(export, device="cpu", compute_type="auto", inter_threads=int(threads),
                            intra_threads=1)
pieces = sp.encode(lines, out_type=str)
beam = int(beam)
per_beam = beam if tr.compute_type.startswith("int8") else 1
results = tr.translate_batch(pieces, beam_size=beam, max_batch_size=max(1, int(sub_batch) // per_beam),
                             batch_type="tokens", max_input_length=0,
                             max_decoding_length=int(max(map(len, pieces)) * float(limit_a) + int(limit_b)))
out = [sp.decode(r.hypotheses[0]) for r in results]
sys.stdout.write("".join(o + "\n" for o in out))
print(f"{time.perf_counter() - start:.3f}", file=sys.stderr)
'''


def timed(cmd: list[str], out: Path) -> tuple[float, list[str]]:
    start = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{run.stderr}")
    out.write_text(run.stdout, encoding="utf-8")
    return seconds, [line.split("\t")[0] for line in run.stdout.splitlines()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--export", required=True)
    parser.add_argument("--input", action="append", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--beams", default="1,5", help="beam sizes, comma-separated (1: greedy)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--work", default=str(ROOT / "bench/work/ct2_plain"))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from mtkit.decode.ct2 import SUB_BATCH_TOKENS
    from mtkit.interop.manifest import read_manifest

    decoding = read_manifest(args.export).config.decoding
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    script = work / "plain_ct2.py"
    script.write_text(PLAIN, encoding="utf-8")
    report = []
    for source in args.input:
        for beam in map(int, args.beams.split(",")):
            command = [sys.executable, "-m", "mtkit", "translate", "-m", args.export, "-i", source,
                       "--beam", str(beam), "--threads", str(args.threads)]
            systems = {
                "plain CTranslate2": [sys.executable, str(script), args.export, source, str(beam),
                                      str(decoding.max_len_a), str(decoding.max_len_b), str(args.threads),
                                      str(SUB_BATCH_TOKENS)],
                "mtkit translate": command,
                "mtkit translate --scores": [*command, "--scores"],
            }
            seconds: dict[str, list[float]] = {name: [] for name in systems}
            outputs: dict[str, list[str]] = {}
            for _ in range(args.runs):  # interleaved, so that drift of the machine hits all alike
                for name, cmd in systems.items():
                    s, lines = timed(cmd, work / "out.txt")
                    seconds[name].append(s)
                    outputs[name] = lines
            n = len(outputs["mtkit translate"])
            median = {name: statistics.median(v) for name, v in seconds.items()}
            row = {"input": source, "lines": n, "beam": beam,
                   "sent_per_s": {name: round(n / s, 1) for name, s in median.items()},
                   "mtkit / plain": round(median["plain CTranslate2"] / median["mtkit translate"], 3),
                   "--scores / plain": round(median["plain CTranslate2"]
                                             / median["mtkit translate --scores"], 3),
                   "lines differing from plain": sum(a != b for a, b in zip(outputs["mtkit translate"],
                                                                            outputs["plain CTranslate2"],
                                                                            strict=True)),
                   "lines differing with --scores": sum(a != b for a, b in zip(
                       outputs["mtkit translate"], outputs["mtkit translate --scores"], strict=True))}
            print(json.dumps(row), flush=True)
            report.append(row)
    (work / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
