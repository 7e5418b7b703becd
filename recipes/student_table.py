"""The table of `make student` (recipes/student.mk): every export, greedy and beam, scored and timed.

For each exported system (teacher and students, int8, without and with the vocabulary shortlist) and
each search, `mtkit translate` runs on the test set ``--runs`` times as a whole command; the table
gives BLEU and chrF of its output (sacrebleu), the median wall time as sentences/s and output words/s,
the peak resident size of the process, and the model's size on disk. The paired bootstrap tests are in
scores.txt beside it (`mtkit score`). The CPU, its vector extensions and the date head the table: int8
speed depends on them (docs/results.md, "CPU kinds").
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu() -> str:
    name, flags = platform.processor() or platform.machine(), set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    extras = [x for x, f in (("VNNI", "avx512_vnni"), ("bf16", "avx512_bf16")) if f in flags]
    forced = os.environ.get("CT2_FORCE_CPU_ISA")
    return (f"{name}, {os.cpu_count()} cores, {isa}{' + ' + ' + '.join(extras) if extras else ''}"
            + (f", CT2_FORCE_CPU_ISA={forced}" if forced else ""))


def timed(cmd: list[str]) -> tuple[float, float]:
    """Wall seconds and peak resident MiB of one command (which must succeed)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"error: {shlex.join(cmd)} failed: {err.strip().splitlines()[-1:]}")
    return wall, usage.ru_maxrss / 1024


def size_mb(directory: Path) -> float:
    return sum(f.stat().st_size for f in directory.iterdir() if f.is_file()) / 1e6


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--exports", type=Path, required=True)
    p.add_argument("--systems", required=True, help="space-separated export names, the baseline first")
    p.add_argument("--searches", default="greedy beam5")
    p.add_argument("--source", type=Path, required=True)
    p.add_argument("--ref", type=Path, required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--mtkit", default=f"{sys.executable} -m mtkit")
    p.add_argument("--distill-report", type=Path)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--hyp-dir", type=Path,
                   help="also keep each output here as SYSTEM.SEARCH.txt (for `mtkit score`)")
    args = p.parse_args()
    import sacrebleu

    refs = args.ref.read_text(encoding="utf-8").splitlines()
    n = len(args.source.read_text(encoding="utf-8").splitlines())
    rows = ["| system | search | BLEU | chrF | sent/s | words/s | runs (s) | peak RSS MiB | size MB |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "hyp"
        for system in args.systems.split():
            model = args.exports / system
            for search in args.searches.split():
                flags = ["--greedy"] if search == "greedy" else ["--beam", search.removeprefix("beam")]
                cmd = [*shlex.split(args.mtkit), "translate", "--model", str(model), *flags,
                       "-i", str(args.source), "-o", str(out)]
                runs = [timed(cmd) for _ in range(args.runs)]
                hyps = out.read_text(encoding="utf-8").splitlines()
                if args.hyp_dir:
                    args.hyp_dir.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(out, args.hyp_dir / f"{system}.{search}.txt")
                if len(hyps) != n:
                    raise SystemExit(f"error: {system} {search}: {len(hyps)} lines for {n}")
                wall = statistics.median(r[0] for r in runs)
                words = sum(len(h.split()) for h in hyps)
                bleu = sacrebleu.corpus_bleu(hyps, [refs]).score
                chrf = sacrebleu.corpus_chrf(hyps, [refs]).score
                rows.append(f"| {system} | {search} | {bleu:.2f} | {chrf:.2f} | {n / wall:.1f} "
                            f"| {words / wall:,.0f} | {', '.join(f'{r[0]:.1f}' for r in runs)} "
                            f"| {max(r[1] for r in runs):,.0f} | {size_mb(model):.1f} |")
                print(rows[-1], file=sys.stderr, flush=True)
    head = [f"Students (make student), {dt.datetime.now().isoformat(timespec='minutes')}; {cpu()}.",
            f"{n:,} test sentences, whole `mtkit translate` command, median of {args.runs} runs; "
            "-sl = with the vocabulary shortlist.", ""]
    tail = []
    if args.distill_report and args.distill_report.is_file():
        report = json.loads(args.distill_report.read_text(encoding="utf-8"))
        dropped = ", ".join(f"{v:,} {k}" for k, v in report["dropped"].items() if v) or "none"
        tail = ["", f"Distilled corpus: {report['kept']:,} of {report['pairs']:,} pairs kept "
                f"(dropped: {dropped})."]
    tmp_out = args.out.with_name(f".{args.out.name}.tmp")
    tmp_out.write_text("\n".join(head + rows + tail) + "\n", encoding="utf-8")
    os.replace(tmp_out, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
