"""`mtkit serve`'s file API under load: concurrent ``POST /translate_file`` uploads of a subtitle file
against a real server, each download checked against `mtkit translate` of the same file, and the
files checked gone once expired.

The subtitles are made here: ``--cues`` cues of short lines of the test set (a subtitle's length), a
few of them two-line cues and some runs without a sentence end (cues that run on as one sentence),
``--files`` different files. Each is translated once by `mtkit translate -i FILE.srt` (the reference);
then ``--uploads`` clients upload them at once (file ``i % files``), each downloads its file as soon
as it has the URL (as a client does: files expire), and each download must be the reference's
bytes. The server keeps its files ``--keep-minutes``; after that and one sweep, its files directory
must be empty and every URL 404; after SIGTERM the directory must be gone.

Both sides run fp32 on the CPU (a sentence's translation does not depend on its batch there).

    python bench/studies/serve_files.py --model MODEL_DIR [--uploads 64] [--cues 200] [--files 4]

Prints one JSON object (and writes it to ``--json``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def short_lines(path: Path, count: int, seed: int) -> list[str]:
    """``count`` lines of 3-9 words from ``path`` (subtitle-sized), in a seeded random order."""
    lines = [s.strip() for s in path.read_text(encoding="utf-8").splitlines() if 3 <= len(s.split()) <= 9]
    random.Random(seed).shuffle(lines)
    return lines[:count]


def stamp(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def subtitle(lines: list[str]) -> bytes:
    """A SubRip file of one cue a line: every ninth cue in two lines, cues 2.5 s apart."""
    out = []
    for n, text in enumerate(lines, start=1):
        words = text.split()
        if n % 9 == 0 and len(words) >= 4:
            text = " ".join(words[:len(words) // 2]) + "\n" + " ".join(words[len(words) // 2:])
        begin = 1.0 + 2.5 * (n - 1)
        out.append(f"{n}\n{stamp(begin)} --> {stamp(begin + 2.0)}\n{text}\n")
    return "\n".join(out).encode("utf-8")


def multipart(name: str, data: bytes, fields: dict[str, str]) -> tuple[bytes, str]:
    boundary = "----mtkit-bench-" + os.urandom(8).hex()
    parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
             for k, v in fields.items()]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
                 f"Content-Type: application/octet-stream\r\n\r\n".encode() + data + b"\r\n")
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def upload(url: str, name: str, data: bytes) -> tuple[int, float, str]:
    """(status, seconds, the translated file's URL or the error)."""
    body, kind = multipart(name, data, {"source": "en", "target": "de"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{url}/translate_file", body,
                                                           {"Content-Type": kind}), timeout=3600) as r:
            return r.status, time.perf_counter() - started, json.loads(r.read())["translatedFileUrl"]
    except urllib.error.HTTPError as exc:
        return exc.code, time.perf_counter() - started, exc.read().decode("utf-8", "replace")


def fetch(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=600) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--input", default=str(ROOT.parent / "shared/data/deb-en-de/test.en"))
    parser.add_argument("--uploads", type=int, default=64)
    parser.add_argument("--cues", type=int, default=200)
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--keep-minutes", type=float, default=1.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60.0, help="the server's --timeout")
    parser.add_argument("--work", default=str(ROOT / "bench/work/serve_files"))
    parser.add_argument("--json", default=None)
    parser.add_argument("--reuse", action="store_true",
                        help="take the references an earlier run left in --work (same model and files)")
    args = parser.parse_args()
    work = Path(args.work)
    (work / "tmp").mkdir(parents=True, exist_ok=True)
    from mtkit.formats.documents import HANDLERS

    try:
        HANDLERS["srt"].load()
        suffix = ".srt"
    except ImportError:  # the subtitle module is not there: plain lines instead
        suffix = ".txt"
    pool = short_lines(Path(args.input), args.cues * args.files, seed=0)
    files = {}
    for k in range(args.files):
        lines = pool[k * args.cues:(k + 1) * args.cues]
        data = subtitle(lines) if suffix == ".srt" else ("\n".join(lines) + "\n").encode()
        path = work / f"movie{k}{suffix}"
        path.write_bytes(data)
        files[path.name] = data
    cli = [sys.executable, "-m", "mtkit"]
    exact = ["--precision", "fp32", "--threads", str(args.threads), "--device", "cpu"]
    reference, offline_seconds = {}, []
    for name in files:
        if args.reuse and (work / f"ref-{name}").exists():  # made by an earlier run of this command
            reference[name] = (work / f"ref-{name}").read_bytes()
            continue
        started = time.perf_counter()
        subprocess.run([*cli, "translate", "-m", args.model, "-i", str(work / name), "-o",
                        str(work / f"ref-{name}"), *exact], check=True, capture_output=True)
        offline_seconds.append(time.perf_counter() - started)
        reference[name] = (work / f"ref-{name}").read_bytes()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "TMPDIR": str(work / "tmp"), "PYTHONUNBUFFERED": "1"}
    log = open(work / "serve.log", "w")  # noqa: SIM115
    server = subprocess.Popen([*cli, "serve", "-m", args.model, "--port", str(port), *exact,
                               "--files-keep-minutes", str(args.keep_minutes),
                               "--timeout", str(args.timeout)],
                              stdout=log, stderr=log, env=env)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        store = next((work / "tmp").glob("mtkit-serve-files-*"))
        names = list(files)
        started = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.uploads) as clients:
            def one(i: int) -> tuple[int, float, str, bool]:
                """Upload, then download at once (as a client does: files expire), and compare."""
                name = names[i % len(names)]
                status, seconds, where = upload(url, name, files[name])
                same = status == 200 and fetch(where) == (200, reference[name])
                return status, seconds, where, same

            done = list(clients.map(one, range(args.uploads)))
        wall = time.perf_counter() - started
        last_made = time.monotonic()
        statuses = [status for status, _, _, _ in done]
        equal = sum(same for _, _, _, same in done)
        urls = [where for status, _, where, _ in done if status == 200]
        stored_at_end = len([p for p in store.iterdir() if not p.name.startswith(".")])
        wait = args.keep_minutes * 60 + min(60.0, args.keep_minutes * 15) + 2 - (time.monotonic() - last_made)
        time.sleep(max(0.0, wait))
        left = [p.name for p in store.iterdir()]
        expired_404 = sum(fetch(u)[0] == 404 for u in urls)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(120)
        log.close()
    cues_sent = args.uploads * args.cues
    result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "format": suffix, "timeout": args.timeout,
        "uploads": args.uploads, "cues_per_file": args.cues, "distinct_files": args.files,
        "statuses": {str(s): statuses.count(s) for s in sorted(set(statuses))},
        "errors": sorted({where for status, _, where, _ in done if status != 200})[:5],
        "server_errors_5xx": sum(s >= 500 for s in statuses), "downloads_equal_to_mtkit_translate": equal,
        "wall_seconds": round(wall, 1), "cues_per_second": round(cues_sent / wall, 1),
        "latency_seconds": {"median": round(statistics.median(t for _, t, _, _ in done), 1),
                            "max": round(max(t for _, t, _, _ in done), 1)},
        "offline_seconds_per_file": [round(s, 1) for s in offline_seconds],
        "stored_when_the_last_upload_ended": stored_at_end, "left_after_expiry": left,
        "urls_404_after_expiry": expired_404,
        "files_dir_removed_at_shutdown": not store.exists(), "server_exit_status": server.returncode,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
