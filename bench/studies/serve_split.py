"""`mtkit serve` at 64 clients against offline `mtkit translate`, in alternating rounds, with the
server's CPU split by thread (issue #43: "the server's throughput at 64 clients follows").

Each round: wrk sends the test sentences (one a request, in a fixed random order) from 64 connections
for ``--seconds`` to a real `mtkit serve`, while the CPU time of each of the server's threads is read
from /proc; then `mtkit translate` translates the same sentences (its model time: the command less
the same command on one empty line, as bench/serve.py). Rounds alternate so that the drift of a shared
machine's speed (±20% here within minutes) hits both sides alike; the ratio of each round is the
server's rate over the offline rate next to it.

The threads: the main thread runs the HTTP event loop (uvicorn, FastAPI, pydantic, segmentation); on
the ct2 engine the two busiest are CTranslate2's translators (one a core); the batcher's worker
tokenizes, calls the engine and detokenizes.

    python bench/studies/serve_split.py --model EXPORT [--input test.en] [--rounds 4] [--seconds 15]

Needs wrk (`apt-get install wrk`) and the serve extra.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

import run as tools  # noqa: E402  (bench/run.py)
import serve  # noqa: E402  (bench/serve.py)

CLIENTS = 64


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of each thread of ``pid``, the main thread as "main"."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out["main" if task.name == str(pid) else task.name] = (int(fields[11]) + int(fields[12])) / tick
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a model directory or export")
    parser.add_argument("--input", default=str(ROOT.parent / "shared/data/deb-en-de/test.en"))
    parser.add_argument("--source", default="en")
    parser.add_argument("--target", default="de")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--work", default=str(ROOT / "bench/work/serve_split"))
    args = parser.parse_args()
    work = Path(args.work)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    sentences = [s for s in Path(args.input).read_text(encoding="utf-8").splitlines() if s.strip()]
    random.Random(0).shuffle(sentences)  # a load's prefix like the whole (bench/serve.py)
    source_file = work / "serve-test.src"
    source_file.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    port = serve._free_port()
    proc = serve._start(Path(args.model), port, work / "logs" / "serve.log", [])
    url = f"http://127.0.0.1:{port}"
    rows = []
    try:
        body = json.dumps({"q": "Click OK.", "source": args.source, "target": args.target}).encode()
        request = urllib.request.Request(f"{url}/translate", body, {"Content-Type": "application/json"})
        for _ in range(5):  # warm up
            urllib.request.urlopen(request, timeout=60).read()
        for _ in range(args.rounds):
            before, started = thread_cpu(proc.pid), time.perf_counter()
            load = serve._load_wrk(url, args.source, args.target, sentences, CLIENTS, args.seconds, work)
            after, wall = thread_cpu(proc.pid), time.perf_counter() - started
            spent = sorted(((after[t] - before.get(t, 0.0), t) for t in after), reverse=True)
            main_s = next(s for s, t in spent if t == "main")
            others = [round(s, 2) for s, t in spent if t != "main" and s >= 0.05]
            offline = serve._offline(tools, Path(args.model), source_file, work, [])
            row = {"server_sent_per_s": load["requests_per_s"], "p50_ms": load["p50_ms"],
                   "offline_sent_per_s": offline["model_sentences_per_s"],
                   "ratio": round(load["requests_per_s"] / offline["model_sentences_per_s"], 3),
                   "server_cores_busy": round(sum(s for s, _ in spent) / wall, 2),
                   "cpu_s": {"main (HTTP)": round(main_s, 2), "other threads": others}}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        proc.terminate()
        proc.wait(60)
    print(json.dumps({"median_ratio": statistics.median(r["ratio"] for r in rows),
                      "ratios": [r["ratio"] for r in rows]}))


if __name__ == "__main__":
    main()
