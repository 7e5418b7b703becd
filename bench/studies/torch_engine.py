"""The torch engine against the ct2 int8 export of the same model: whole `mtkit translate` commands.

    python bench/studies/torch_engine.py --model DIR --export CT2_DIR --input test.en [--ref test.de]
        [--input other.en ...] [--lines 500] [--runs 2] [--searches greedy,beam5]
        [--systems fp32,bf16,int8,ct2] [--threads 0] [--work DIR] [--baseline DIR --systems bf16,bf16@base,…]
        [--avx2]

Each run is one whole command (start-up, model load, translation of the first ``--lines`` lines) on
the CPU with all allowed threads. The systems alternate within each round (A B C D, A B C D ...), so a
machine shared with other work loads them alike; the table gives each system's minimum wall time and
minimum CPU time (user + system of the child) over the rounds, and their ratio to ct2's. ``--threads``
goes to every command (0: all allowed cores); on a machine loaded by other work, one thread keeps
PyTorch's intra-op threads from waiting for each other, which decides its wall time there. With a
reference it adds BLEU and, for each system beside fp32, `mtkit score`'s paired bootstrap p-value
against fp32. ``--avx2`` runs every command with the instruction-set caps of `make test-isa`
(PyTorch, oneDNN, MKL, fbgemm and CTranslate2 held to AVX2): an AVX-512 machine then computes as an
AVX2-only CPU does, and ``auto`` chooses what it chooses there. Prints one JSON object, its last key
``table`` a summary (wall seconds, ct2's wall over the system's, BLEU).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: each system's engine options for `mtkit translate`
SYSTEMS = {"fp32": ["--precision", "fp32"], "bf16": ["--precision", "bf16"],
           "int8": ["--precision", "int8"], "auto": ["--precision", "auto"], "ct2": []}

#: `make test-isa`'s AVX2 caps (Makefile ISA_AVX2), for --avx2
AVX2_CAPS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
             "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2", "CT2_FORCE_CPU_ISA": "AVX2"}


def _run(cmd: list[str], out: Path, tree: Path = ROOT, caps: dict[str, str] | None = None
         ) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one command, run with mtkit from ``tree``."""
    env = {**os.environ, **(caps or {}), "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL, cwd=tree, env=env)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if not out.exists():
        raise SystemExit(f"{out}: not written")
    return wall, cpu


def _score(hyps: dict[str, Path], ref: Path) -> dict:
    """BLEU of each system and the paired bootstrap p-value of each against fp32 (`mtkit score`)."""
    names = list(hyps)
    cmd = [sys.executable, "-m", "mtkit", "score", "--json", "--metrics", "bleu", "--ref", str(ref)]
    for name in names:
        cmd += ["--hyp", str(hyps[name])]
    result = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout)
    return {"systems": names, "score": result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--export", required=True)
    parser.add_argument("--input", action="append", required=True)
    parser.add_argument("--ref", action="append", default=[], help="a reference per --input (in order)")
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--searches", default="greedy,beam5")
    parser.add_argument("--systems", default="fp32,bf16,int8,ct2")
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--work", default="bench/work/torch_engine")
    parser.add_argument("--baseline", type=Path, help="a checkout of another commit (git worktree add DIR "
                        "REV): a system written SYSTEM@base (e.g. bf16@base) runs mtkit from there")
    parser.add_argument("--avx2", action="store_true",
                        help="compute as an AVX2-only CPU (make test-isa's caps)")
    args = parser.parse_args()
    caps = AVX2_CAPS if args.avx2 else None
    work = (ROOT / args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    systems = args.systems.split(",")
    report: dict = {"cpu": _cpu_name(), "threads": args.threads or len(os.sched_getaffinity(0)),
                    "lines": args.lines, "caps": caps or {},
                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "results": []}
    for n, source in enumerate(args.input):
        lines = Path(source).read_text(encoding="utf-8").splitlines()[: args.lines]
        src = work / f"input{n}.txt"
        src.write_text("\n".join(lines) + "\n", encoding="utf-8")
        ref = None
        if n < len(args.ref):
            ref = work / f"ref{n}.txt"
            ref.write_text("\n".join(Path(args.ref[n]).read_text(encoding="utf-8").splitlines()[: args.lines])
                           + "\n", encoding="utf-8")
        for search in args.searches.split(","):
            beam = "1" if search == "greedy" else search.removeprefix("beam")
            times: dict[str, list[tuple[float, float]]] = {s: [] for s in systems}
            outs = {s: work / f"out{n}.{search}.{s}.txt" for s in systems}
            for _ in range(args.runs):
                for system in systems:
                    name, _, where = system.partition("@")
                    model = args.export if name == "ct2" else args.model
                    outs[system].unlink(missing_ok=True)
                    cmd = [sys.executable, "-m", "mtkit", "translate", "-m", str(Path(model).resolve()),
                           "--device", "cpu", "--beam", beam, "--threads", str(args.threads), "-i", str(src),
                           "-o", str(outs[system]), *SYSTEMS[name]]
                    tree = args.baseline.resolve() if where == "base" else ROOT
                    times[system].append(_run(cmd, outs[system], tree, caps))
            row: dict = {"input": source, "search": search}
            for system in systems:
                wall = min(w for w, _ in times[system])
                cpu = min(c for _, c in times[system])
                row[system] = {"wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                               "sent_per_s": round(len(lines) / wall, 1)}
            if "ct2" in systems:
                for system in systems:
                    row[system]["ct2_over_this_wall"] = round(row["ct2"]["wall_s"] / row[system]["wall_s"], 3)
                    row[system]["ct2_over_this_cpu"] = round(row["ct2"]["cpu_s"] / row[system]["cpu_s"], 3)
            first = outs[systems[0]].read_text(encoding="utf-8").splitlines()
            for system in systems[1:]:
                other = outs[system].read_text(encoding="utf-8").splitlines()
                same = sum(a == b for a, b in zip(first, other, strict=True))
                row[system][f"same_lines_as_{systems[0]}"] = same
            if ref is not None:
                row["bleu"] = _score(outs, ref)
            report["results"].append(row)
            print(json.dumps(row), file=sys.stderr, flush=True)
    report["table"] = [_summary(row, systems) for row in report["results"]]
    print(json.dumps(report, indent=1))


def _summary(row: dict, systems: list[str]) -> dict:
    """One input and search: each system's wall seconds, ct2's wall over its, its BLEU."""
    bleu = {}
    if "bleu" in row:
        found = zip(row["bleu"]["systems"], row["bleu"]["score"]["systems"], strict=True)
        bleu = {name: round(s["scores"]["bleu"], 2) for name, s in found}
    return {"input": Path(row["input"]).name, "search": row["search"],
            **{s: [row[s]["wall_s"], row[s].get("ct2_over_this_wall"), bleu.get(s)] for s in systems}}


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    main()
