"""`python bench/run.py --only serve --model DIR`: `mtkit serve` under load (issue #21).

For each model given (a trained directory, and its int8 CTranslate2 export made here when the ct2
extra is installed), a real `mtkit serve` process is started and a real HTTP load generator sends the
test set's sentences, one sentence a request, from 1, 8, 64 and 256 concurrent connections:
requests/s (= sentences/s), p50/p95/p99 latency. The generator is wrk when it is installed
(`apt-get install wrk`: C, a small share of a core), else a Python client (asyncio + httpx, in the
bench's process), which needs ~6 ms of CPU a request — on a 2-core machine a third of what the
server could use. Beside it, the same sentences through `mtkit translate` on the same engine (the
model's time: the whole command minus the same command on one empty line), so that "the server
reaches X% of offline speed" compares like with like. And an idle server's latency for one short
sentence (median of 30 sequential requests).

The load generator shares the machine's cores with the server, as a client on the same host would.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

CLIENTS = (1, 8, 64, 256)
REQUESTS = {1: 150, 8: 600, 64: 2000, 256: 2000}  # requests of the Python client (without wrk)
SECONDS = {1: 10, 8: 15, 64: 20, 256: 20}  # seconds of wrk's load
SHORT = "Click OK."


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(model: Path, port: int, log: Path, extra: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "mtkit", "serve", "-m", str(model), "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, stdout=open(log, "w"), stderr=subprocess.STDOUT,  # noqa: SIM115
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"mtkit serve exited; see {log}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"mtkit serve did not start; see {log}")


async def _load(url: str, source: str, target: str, sentences: list[str], clients: int,
                total: int) -> dict[str, Any]:
    import httpx

    latencies: list[float] = []
    queue: asyncio.Queue = asyncio.Queue()
    for i in range(total):
        queue.put_nowait(sentences[i % len(sentences)])
    errors = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:
        async def worker() -> None:
            nonlocal errors
            while not queue.empty():
                text = queue.get_nowait()
                started = time.perf_counter()
                reply = await client.post("/translate", json={"q": text, "source": source, "target": target})
                latencies.append(time.perf_counter() - started)
                errors += reply.status_code != 200

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - started
    ordered = sorted(latencies)

    def pct(p: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(p * len(ordered)))], 1)

    return {"clients": clients, "requests": total, "errors": errors, "seconds": round(wall, 2),
            "requests_per_s": round(total / wall, 1), "p50_ms": pct(0.50), "p95_ms": pct(0.95),
            "p99_ms": pct(0.99)}


_WRK_SCRIPT = """
local bodies = {}
for line in io.lines(os.getenv("MTKIT_BODIES")) do bodies[#bodies + 1] = line end
local i = 0
request = function()
  i = i % #bodies + 1
  return wrk.format("POST", "/translate", {["Content-Type"] = "application/json"}, bodies[i])
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("RESULT %d %d %d %.1f %.1f %.1f\\n", summary.requests, summary.duration,
    e.connect + e.read + e.write + e.status + e.timeout, latency:percentile(50) / 1000,
    latency:percentile(95) / 1000, latency:percentile(99) / 1000))
end
"""


def _load_wrk(url: str, source: str, target: str, sentences: list[str], clients: int, seconds: int,
              work: Path) -> dict[str, Any]:
    """The same load from wrk (C, one thread): it needs a small share of a core per request, where
    the Python client needs ~6 ms of CPU per request, taken from the cores the server runs on."""
    import json

    bodies = work / "serve-bodies.jsonl"
    bodies.write_text("".join(json.dumps({"q": s, "source": source, "target": target}) + "\n"
                              for s in sentences), encoding="utf-8")
    script = work / "serve-wrk.lua"
    script.write_text(_WRK_SCRIPT, encoding="utf-8")
    cmd = ["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", "--timeout", "60s", "-s", str(script), url]
    run = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, MTKIT_BODIES=str(bodies)))
    line = next((x for x in run.stdout.splitlines() if x.startswith("RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk gave no result: {run.stdout[-300:]} {run.stderr[-300:]}")
    requests, duration_us, errors, p50, p95, p99 = line.split()[1:]
    wall = int(duration_us) / 1e6
    return {"clients": clients, "requests": int(requests), "errors": int(errors), "seconds": round(wall, 2),
            "requests_per_s": round(int(requests) / wall, 1), "p50_ms": float(p50), "p95_ms": float(p95),
            "p99_ms": float(p99), "generator": "wrk"}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a running process, all its threads (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _offline(tools: Any, model: Path, source_file: Path, work: Path, extra: list[str]) -> dict[str, Any]:
    empty = work / "serve-empty.txt"
    empty.write_text("\n", encoding="utf-8")
    base = ["translate", "--model", str(model), *extra]
    cpu = _children_cpu()
    startup, _ = tools.run_measured(tools.mtkit(*base, "-i", str(empty), "-o", str(work / "serve-empty.out")),
                                    work / "logs" / "serve-offline-startup.log")
    cpu_startup, cpu = _children_cpu() - cpu, _children_cpu()
    output = work / "serve-offline.out"
    wall, _ = tools.run_measured(tools.mtkit(*base, "-i", str(source_file), "-o", str(output)),
                                 work / "logs" / "serve-offline.log")
    cpu_model = _children_cpu() - cpu - cpu_startup
    n = tools.count_lines(source_file)
    return {"sentences": n, "command_seconds": round(wall, 2),
            "model_sentences_per_s": round(n / max(wall - startup, 1e-6), 1),
            "model_cpu_seconds": round(cpu_model, 1),
            "sentences_per_cpu_s": round(n / max(cpu_model, 1e-6), 1)}


def bench_serve(args: argparse.Namespace, files: dict[str, Path], tools: Any) -> dict[str, Any]:
    try:
        import fastapi  # noqa: F401
        import httpx  # noqa: F401
    except ImportError:
        return tools._skipped("serve", "needs the serve extra and httpx (pip install -e '.[serve,dev]')")
    models = tools.translation_models(args)
    if not models:
        return tools._skipped("serve", tools.NO_MODEL)
    name, (model, _) = next(iter(models.items()))
    runs: dict[str, tuple[Path, list[str]]] = {f"{name} (torch)": (model, [])}
    try:
        import ctranslate2  # noqa: F401

        exported = args.work / "serve-ct2-int8"
        if not exported.is_dir():
            tools.run_measured(tools.mtkit("export", "-m", str(model), "-o", str(exported),
                                           "--quantization", "int8"), args.work / "logs" / "serve-export.log")
        runs[f"{name} (ct2 int8)"] = (exported, [])
    except ImportError:
        pass
    sentences = [s for s in files["test_src"].read_text(encoding="utf-8").splitlines() if s.strip()]
    # in a fixed random order: a load of a few seconds sends a prefix of the list, and a test set is
    # often ordered by origin (manuals, then short UI strings), so a prefix would not be like the whole
    # that offline translation is timed on
    random.Random(0).shuffle(sentences)
    source_file = args.work / "serve-test.src"
    source_file.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    src, tgt = tools.SRC, tools.TGT
    results: dict[str, Any] = {}
    for label, (path, extra) in runs.items():
        port = _free_port()
        log = args.work / "logs" / f"serve-{label.split()[0]}-{len(results)}.log"
        print(f"serve: {label} ...", file=sys.stderr, flush=True)
        proc = _start(path, port, log, extra)
        url = f"http://127.0.0.1:{port}"
        try:
            idle = []
            for _ in range(30):
                started = time.perf_counter()
                urllib.request.urlopen(urllib.request.Request(
                    f"{url}/translate", f'{{"q": "{SHORT}", "source": "{src}", "target": "{tgt}"}}'.encode(),
                    {"Content-Type": "application/json"}), timeout=60).read()
                idle.append(time.perf_counter() - started)
            entry: dict[str, Any] = {"idle_short_sentence_ms": round(1000 * statistics.median(idle[5:]), 1)}
            entry["load"] = []
            for c in CLIENTS:
                before = _cpu_seconds(proc.pid)
                if shutil.which("wrk"):
                    result = _load_wrk(url, src, tgt, sentences, c, SECONDS[c], args.work)
                else:
                    result = asyncio.run(_load(url, src, tgt, sentences, c, REQUESTS[c]))
                spent = _cpu_seconds(proc.pid) - before
                result.update(server_cpu_seconds=round(spent, 1),
                              sentences_per_server_cpu_s=round(result["requests"] / max(spent, 1e-6), 1))
                entry["load"].append(result)
        finally:
            proc.terminate()
            proc.wait(60)
        entry["offline"] = _offline(tools, path, source_file, args.work, extra)
        best = max(r["requests_per_s"] for r in entry["load"])
        entry["server_over_offline"] = round(best / entry["offline"]["model_sentences_per_s"], 3)
        per_cpu = max(r["sentences_per_server_cpu_s"] for r in entry["load"])
        entry["server_over_offline_per_cpu_s"] = round(per_cpu / entry["offline"]["sentences_per_cpu_s"], 3)
        results[label] = entry
    shutil.rmtree(args.work / "serve-ct2-int8", ignore_errors=True)
    return results
