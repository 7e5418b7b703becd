"""``metrics.jsonl``: the training log of a model directory, one JSON object a line.

Every line has an "event" of "train" (periodic training statistics) or "valid" (a validation), the
update "step", "epoch" and "elapsed" seconds. Non-finite numbers are written as null.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any


class MetricsLog:
    """Appends events to metrics.jsonl; on resume drops the events newer than the checkpoint."""

    def __init__(self, path: Path, resume_step: int | None):
        self.path = Path(path)
        if resume_step is None:
            self.path.write_text("", encoding="utf-8")
        elif self.path.exists():
            kept = [e for e in read_metrics(self.path) if int(e.get("step", 0)) <= resume_step]
            tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text("".join(json.dumps(e) + "\n" for e in kept), encoding="utf-8")
            tmp.replace(self.path)

    def write(self, event: dict[str, Any]) -> None:
        clean = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in event.items()}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(clean) + "\n")


def read_metrics(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line cut short by a kill
    return events
