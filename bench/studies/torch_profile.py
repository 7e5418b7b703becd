"""Where the torch engine's CPU decoding goes (issue #43: "say what stands in its way").

Translates the first ``--lines`` lines of a test set with `mtkit.Translator` on the torch engine under
`torch.profiler`, after a warm-up, and prints: the wall time; how much of it PyTorch's operators
account for (their durations on the calling thread; the rest is Python: the search loop, batching,
tokenization); the operators that take the
most time (self CPU time, with their call counts); and the number of operator calls per decoding
step and sentence. Run it beside the same lines through the ct2 engine (`--export`) for the bar.

    python bench/studies/torch_profile.py --model DIR [--export EXPORT] [--input test.en] [--lines 300]
        [--beam 1] [--precision fp32]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--export", help="the same model exported (ct2): timed on the same lines")
    parser.add_argument("--input", default=str(ROOT.parent / "shared/data/deb-en-de/test.en"))
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()

    import torch
    from torch.profiler import ProfilerActivity, profile

    from mtkit.decode.translator import Translator

    lines = [s for s in Path(args.input).read_text(encoding="utf-8").splitlines() if s.strip()][: args.lines]
    tr = Translator(args.model, device="cpu", precision=args.precision, beam_size=args.beam)
    tr.translate(lines[:20])  # warm-up
    started = time.perf_counter()
    plain = tr.translate_hypotheses(lines)
    unprofiled = time.perf_counter() - started
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        started = time.perf_counter()
        tr.translate(lines)
        wall = time.perf_counter() - started
    events = prof.key_averages()
    op_seconds = sum(e.self_cpu_time_total for e in events) / 1e6
    calls = sum(e.count for e in events)
    steps = sum(len(t.hypotheses[0].token_ids) + 1 for t in plain if t.hypotheses)  # output tokens + EOS
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[: args.top]
    report = {
        "lines": len(lines), "beam": args.beam, "precision": str(tr.dtype),
        "threads": torch.get_num_threads(),
        "wall_s (no profiler)": round(unprofiled, 2), "sent_per_s": round(len(lines) / unprofiled, 1),
        "wall_s (profiled)": round(wall, 2),
        "operators_s": round(op_seconds, 2),
        # an operator's time is its duration on the thread that called it (its intra-op threads
        # working meanwhile), so the rest of the wall time is Python: the search loop, batching
        "operators_share_of_wall": round(op_seconds / wall, 3),
        "operator_calls": calls, "output_tokens": steps,
        "operator_calls_per_output_token": round(calls / max(1, steps), 1),
        "top_operators": [{"name": e.key, "self_s": round(e.self_cpu_time_total / 1e6, 3), "calls": e.count}
                          for e in top],
    }
    if args.export:
        ct2 = Translator(args.export, device="cpu", beam_size=args.beam)
        ct2.translate(lines[:20])
        started = time.perf_counter()
        ct2.translate(lines)
        seconds = time.perf_counter() - started
        report["ct2_sent_per_s"] = round(len(lines) / seconds, 1)
        report["torch / ct2"] = round(seconds / unprofiled, 3)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
