#!/usr/bin/env python3
"""Where training memory goes: RSS (and glibc's heap in use / free) after each update of the deb-en-de
transformer-small, under one heap policy (set before the trainer starts).

    python bench/studies/memtrace.py POLICY UPDATES [VALIDATE_EVERY]
    # POLICY: glibc (mtkit's), heap, never_trim, mmap1m

VALIDATE_EVERY defaults to UPDATES / 2 (one validation, after which the heap's free pages are handed
back); a value above UPDATES measures training alone. Besides the resident size it samples, every
2 ms, the bytes glibc's allocator has handed out (heap and mapped blocks): their peak against the
resident peak is what fragmentation costs.

Needs bench/work/data-bin (`python bench/run.py --only prepare`). docs/notebook quotes its output.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: run.py
import run as bench  # noqa: E402

import mtkit.train.trainer as trainer  # noqa: E402
from mtkit.config.experiment import load_config  # noqa: E402
from mtkit.device import bound_kernel_caches  # noqa: E402
from mtkit.train.runtime import resident_mib  # noqa: E402

LIBC = ctypes.CDLL("libc.so.6")
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_MMAP_MAX = -1, -3, -4


class _MallInfo(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]


LIBC.mallinfo2.restype = _MallInfo
POLICIES = {
    "glibc": lambda: True,  # mtkit's: glibc's defaults
    # what mtkit did before 2026-11-23: every block from the heap, the heap top trimmed at once
    "heap": lambda: bool(LIBC.mallopt(_M_MMAP_MAX, ctypes.c_int(0))
                         and LIBC.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(0))),
    "never_trim": lambda: bool(LIBC.mallopt(_M_MMAP_MAX, ctypes.c_int(0))
                               and LIBC.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(2**31 - 1))),
    # blocks from 1 MiB up mapped afresh and unmapped on free (fixing the threshold stops glibc raising it)
    "mmap1m": lambda: bool(LIBC.mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(1 << 20))),
}


def main() -> None:
    policy, updates = sys.argv[1], int(sys.argv[2])
    validate_every = int(sys.argv[3]) if len(sys.argv) > 3 else updates // 2
    bound_kernel_caches()  # as the CLI does (ONEDNN_PRIMITIVE_CACHE_CAPACITY=1024 etc. to see without)
    POLICIES[policy]()
    peak = [0.0, 0.0]  # resident, allocator bytes in use

    def sample() -> None:
        while True:
            info = LIBC.mallinfo2()
            peak[0] = max(peak[0], resident_mib()[0])
            peak[1] = max(peak[1], (info.uordblks + info.hblkhd) / 2**20)
            time.sleep(0.002)

    threading.Thread(target=sample, daemon=True).start()
    trace: list[tuple[int, int, int, int, int]] = []
    step = trainer.Trainer._optimizer_step

    trim_every = int(os.environ.get("MEMTRACE_TRIM_EVERY", "0"))  # hand free heap pages back every N

    def traced(self, *args):  # noqa: ANN001, ANN202
        step(self, *args)
        if trim_every and self.step % trim_every == 0:
            LIBC.malloc_trim(0)
        info = LIBC.mallinfo2()
        trace.append((self.step, round(resident_mib()[0]), round(peak[0]), round(info.uordblks / 2**20),
                      round(info.fordblks / 2**20)))

    trainer.Trainer._optimizer_step = traced
    files = bench.corpus_files(bench.default_data())
    model_dir = Path(f"/tmp/memtrace-{policy}")
    shutil.rmtree(model_dir, ignore_errors=True)
    config = bench.write_config("transformer", model_dir.with_suffix(".yaml"), files,
                                bench.REPO / "bench" / "work" / "data-bin", model_dir,
                                {"max_steps": updates, "log_every": 10, "validate_every": validate_every,
                                 "max_time": 0, "max_epochs": 0, "valid_max_sentences": 300})
    trainer.train(load_config(config))
    events = [json.loads(line) for line in (model_dir / "metrics.jsonl").read_text().splitlines() if line]
    rates = [e["tokens_per_s"] for e in events if e.get("event") == "train"][1:]
    print(json.dumps({"policy": policy, "peak_rss_mib": round(peak[0]), "peak_in_use_mib": round(peak[1]),
                      "tokens_per_s": round(sum(rates) / len(rates)) if rates else None,
                      "update, rss, peak, heap in use, heap free (MiB)": trace[::10]}))


if __name__ == "__main__":
    main()
