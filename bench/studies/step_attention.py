"""One decoding step's attention on the CPU: the fused kernel (SDPA) against the explicit path.

    python bench/studies/step_attention.py [--threads 1] [--rounds 3]

A single query per row over keys and values, as a decoder step has them: the self-attention over a
strided view of a preallocated cache (no mask) and the encoder-decoder attention over contiguous
source keys with an additive padding mask; 300 and 60 rows, 12 and 40 positions, 4 heads of 64, fp32
and bf16. Paths alternate within each round; prints the minimum milliseconds per call of each. What
``mtkit.models.attention`` picks for a step follows from it (explicit in fp32, fused in bf16).
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F


def _ms(fn, calls: int) -> float:
    for _ in range(5):
        fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rows_out = []
    for dtype in (torch.float32, torch.bfloat16):
        for rows, positions in ((300, 40), (300, 12), (60, 40)):
            q = torch.randn(rows, 1, 4, 64, dtype=dtype).transpose(1, 2)
            cache = torch.randn(2, rows, 4, positions + 32, 64, dtype=dtype)
            k, v = cache[0, :, :, :positions], cache[1, :, :, :positions]
            mask = torch.zeros(rows, 1, 1, positions, dtype=dtype)
            mask[: rows // 2, ..., positions - 3:] = float("-inf")

            def fused(mask=mask, q=q, k=k, v=v):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

            def explicit(mask=mask, q=q, k=k, v=v):
                scores = torch.matmul(q, k.transpose(-1, -2)) * 0.125 + mask
                return torch.matmul(scores.softmax(-1), v)

            best = {"fused": float("inf"), "explicit": float("inf")}
            for _ in range(args.rounds):
                for name, fn in (("fused", fused), ("explicit", explicit)):
                    best[name] = min(best[name], _ms(fn, args.calls))
            rows_out.append({"dtype": str(dtype).removeprefix("torch."), "rows": rows, "positions": positions,
                             **{f"{n}_ms": round(t, 3) for n, t in best.items()}})
            print(json.dumps(rows_out[-1]), flush=True)


if __name__ == "__main__":
    main()
