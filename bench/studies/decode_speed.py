"""Where the time of `mtkit translate` goes: start-up, model load, and the search itself.

    python bench/studies/decode_speed.py --model DIR --input test.en --ref test.de --device cuda \
        --max-tokens 16000,64000,256000 [--profile trace.txt]

Times, in one process: importing torch and mtkit, loading the model (Translator), then each decoding
mode (greedy, beam 5) at each batch budget (``--max-tokens``), ``--repeats`` times (the first run of a
shape pays for kernel selection and allocation). Each run ends with a device synchronisation, so the
figures are wall time of the search with nothing left queued. Prints one JSON object; ``--profile``
writes the top operators of one beam-5 run (torch.profiler) to a file. Whole-command figures come from
`bench/run.py --only gpu`; this script splits them up.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

T0 = time.perf_counter()
import torch  # noqa: E402

T_TORCH = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from mtkit.decode.translator import Translator  # noqa: E402

T_MTKIT = time.perf_counter()


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _bleu(hyps: list[str], ref: Path | None) -> float | None:
    if ref is None:
        return None
    import sacrebleu

    refs = ref.read_text(encoding="utf-8").splitlines()
    return round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, type=Path)
    p.add_argument("--input", required=True, type=Path)
    p.add_argument("--ref", type=Path, default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--checkpoint", default="last")
    p.add_argument("--max-tokens", default="16000", help="comma-separated batch budgets")
    p.add_argument("--modes", default="greedy,beam5")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--profile", type=Path, default=None)
    args = p.parse_args()
    lines = args.input.read_text(encoding="utf-8").splitlines()
    out: dict = {"sentences": len(lines), "import_torch_s": round(T_TORCH - T0, 2),
                 "import_mtkit_s": round(T_MTKIT - T_TORCH, 2), "runs": []}
    budgets = [int(x) for x in args.max_tokens.split(",") if x.strip()]
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        beam = 1 if mode == "greedy" else int(mode.removeprefix("beam"))
        for budget in budgets:
            a = time.perf_counter()
            tr = Translator(args.model, device=args.device, checkpoint=args.checkpoint, beam_size=beam,
                            max_tokens=budget)
            _sync(args.device)
            out.setdefault("load_s", round(time.perf_counter() - a, 2))
            for rep in range(args.repeats):
                a = time.perf_counter()
                hyps = tr.translate(lines)
                _sync(args.device)
                seconds = time.perf_counter() - a
                out["runs"].append({"mode": mode, "max_tokens": budget, "repeat": rep,
                                    "seconds": round(seconds, 3),
                                    "sentences_per_s": round(len(lines) / seconds, 1),
                                    "bleu": _bleu(hyps, args.ref) if rep == 0 else None,
                                    "peak_gpu_mib": round(torch.cuda.max_memory_allocated() / 2**20)
                                    if args.device.startswith("cuda") else None})
                print(json.dumps(out["runs"][-1]), file=sys.stderr, flush=True)
            if args.profile and mode != "greedy" and budget == budgets[-1]:
                from torch.profiler import ProfilerActivity, profile

                acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
                with profile(activities=acts) as prof:
                    tr.translate(lines)
                    _sync(args.device)
                sort = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
                table = prof.key_averages().table(sort_by=sort, row_limit=30)
                cpu_table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=30)
                args.profile.write_text(table + "\n\n" + cpu_table + "\n", encoding="utf-8")
            del tr
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
