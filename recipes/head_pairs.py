"""The first N pairs of a parallel corpus (0 = all) as plain text, for `make student` (recipes/student.mk).

    python recipes/head_pairs.py N SRC TGT OUT_SRC OUT_TGT

SRC and TGT may be gzipped (recognised by their first bytes). Both outputs are written to temporary
files and renamed into place only when both are complete, so an interrupted run leaves nothing that
looks finished. Files that do not hold the same number of lines are refused (one line, non-zero exit).
"""

from __future__ import annotations

import gzip
import os
import sys
from pathlib import Path


def _open(path: str):
    """Text lines of a plain or gzipped file (by its first bytes, as mtkit reads them)."""
    with open(path, "rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8") if gzipped else open(path, encoding="utf-8")


def main(argv: list[str]) -> int:
    if len(argv) != 5 or not argv[0].isdigit():
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    limit, src, tgt, out_src, out_tgt = int(argv[0]), *argv[1:]
    tmp = [Path(f"{p}.tmp") for p in (out_src, out_tgt)]
    n = 0
    with _open(src) as fs, _open(tgt) as ft, open(tmp[0], "w", encoding="utf-8") as os_, \
            open(tmp[1], "w", encoding="utf-8") as ot:
        for a, b in zip(fs, ft):  # noqa: B905 - a longer file is reported below
            if limit and n >= limit:
                break
            os_.write(a if a.endswith("\n") else a + "\n")
            ot.write(b if b.endswith("\n") else b + "\n")
            n += 1
        if (not limit or n < limit) and (next(fs, None) is not None or next(ft, None) is not None):
            for t in tmp:
                t.unlink()
            print(f"error: {src} and {tgt} hold different numbers of lines", file=sys.stderr)
            return 1
    for t, final in zip(tmp, (out_src, out_tgt), strict=True):
        os.replace(t, final)
    print(f"{n:,} pairs → {out_src}, {out_tgt}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
