"""The learning curves behind ``model.size: auto`` (issue #62): dev loss against updates, one curve per
width of `mtkit.train.sizing.LADDER`, fitted to the validations of budget studies' runs.

Each run named on the command line (``FILE.json:VARIANT=D_MODEL``: a `bench/studies/budget.py` result,
one of its variants, that variant's width) gives its dev loss at every validation, the last one at the
end of its cooldown. The fit, by least squares over all points:

    dev loss(width, U) = floor[width] + scale[width] · (U / 1000) ** -decay      (decay shared)

Prints the parameters (what `mtkit.train.sizing.CURVES` holds), each point's residual, and the updates
at which each narrower width's curve falls below the next wider one's (where, for a given speed ratio,
the choice turns).

    python bench/studies/size_curves.py \\
        bench/results/budget-2026-11-29/demo-9min-avx2-width.json:shipped=256 ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def read_points(specs: list[str]) -> list[tuple[int, int, float, str]]:
    """(width, updates, dev loss, run) of every validation of every named run."""
    points = []
    for spec in specs:
        where, width = spec.rsplit("=", 1)
        file, variant = where.rsplit(":", 1)
        record = json.loads(Path(file).read_text(encoding="utf-8"))
        run = next((v for v in record["variants"] if v["name"] == variant), None)
        if run is None:
            raise SystemExit(f"{file}: no variant {variant!r}")
        for point in run["curve"]:
            if point.get("dev_loss") is not None:
                points.append((int(width), int(point["step"]), float(point["dev_loss"]),
                               f"{Path(file).stem}:{variant}"))
    return points


def fit(points: list[tuple[int, int, float, str]]) -> tuple[dict[int, tuple[float, float]], float]:
    """floor and scale per width, and the shared decay."""
    from scipy.optimize import least_squares

    widths = sorted({p[0] for p in points})
    w_index = {w: i for i, w in enumerate(widths)}
    u = np.array([p[1] / 1000 for p in points])
    loss = np.array([p[2] for p in points])
    which = np.array([w_index[p[0]] for p in points])

    def residuals(x: np.ndarray) -> np.ndarray:
        floors, scales, decay = x[: len(widths)], x[len(widths): 2 * len(widths)], x[-1]
        return floors[which] + scales[which] * u ** -decay - loss

    start = np.array([2.0] * len(widths) + [1.5] * len(widths) + [1.0])
    result = least_squares(residuals, start, bounds=([0] * (2 * len(widths)) + [0.05],
                                                     [10] * (2 * len(widths)) + [5]))
    x = result.x
    return {w: (float(x[i]), float(x[len(widths) + i])) for i, w in enumerate(widths)}, float(x[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="FILE.json:VARIANT=D_MODEL")
    args = parser.parse_args(argv)
    points = read_points(args.runs)
    curves, decay = fit(points)
    print(f"decay {decay:.4f}")
    for width, (floor, scale) in curves.items():
        print(f"width {width}: floor {floor:.4f}, scale {scale:.4f}")

    def predicted(width: int, updates: float) -> float:
        floor, scale = curves[width]
        return floor + scale * (updates / 1000) ** -decay

    worst = 0.0
    for width, updates, loss, run in points:
        error = loss - predicted(width, updates)
        worst = max(worst, abs(error))
        print(f"  {run} d{width} U={updates}: {loss:.3f} (fit {predicted(width, updates):.3f}, {error:+.3f})")
    print(f"largest residual {worst:.3f}")
    widths = sorted(curves)
    for narrow, wide in zip(widths, widths[1:], strict=False):
        for u_wide in (300, 600, 1000, 2000, 4000, 8000):
            target = predicted(wide, u_wide)
            lo, hi = u_wide, u_wide * 100
            if predicted(narrow, hi) > target:
                print(f"  d{narrow} never reaches d{wide}'s loss at {u_wide} updates ({target:.3f})")
                continue
            for _ in range(60):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if predicted(narrow, mid) > target else (lo, mid)
            print(f"  d{narrow} needs {hi / u_wide:.2f}x the updates of d{wide} at {u_wide} ({target:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
