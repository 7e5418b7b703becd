#!/usr/bin/env python3
"""Forgetting: how much of the parent's quality on its own test set a fine-tuned model keeps.

Reads the JSON of `mtkit score --json` with two systems, the parent first and the fine-tuned model
second, and prints one line per metric: both scores and the share kept (fine-tuned / parent), so 100%
means nothing was forgotten. Only the standard library; a malformed input is one line on stderr.

Usage:  python forgetting.py SCORES.json
"""

from __future__ import annotations

import json
import sys


def report(scores: dict) -> str:
    systems = scores["systems"]
    if len(systems) != 2:
        raise ValueError(f"expected two systems (the parent, then the fine-tuned model), got {len(systems)}")
    parent, tuned = systems
    lines = [f"forgetting on the parent's test set ({scores['sentences']} sentences): "
             f"{tuned['name']} against {parent['name']}"]
    for metric, label in scores.get("labels", {}).items():
        before, after = parent["scores"][metric], tuned["scores"][metric]
        kept = f"{100 * after / before:.1f}%" if before else "n/a"
        lines.append(f"  {label:6} parent {before:6.2f}  fine-tuned {after:6.2f}  kept {kept}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: forgetting.py SCORES.json", file=sys.stderr)
        return 2
    try:
        with open(argv[0], encoding="utf-8") as f:
            print(report(json.load(f)))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"error: {argv[0]}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
