#!/usr/bin/env python3
"""Two parts of a training step measured alone, behind two constants of mtkit/train:

    python bench/studies/train_parts.py loss [ROWS ...]         # LOSS_BLOCK_ROWS (train/loss.py)
    python bench/studies/train_parts.py validation MODEL_DIR    # SEARCH_MAX_TOKENS (train/validation.py)

``loss`` times the output layer and the loss, forward and backward, on batches of ~3,800 target
positions (d 256, V 8,000, bf16, sizes varying as token-budget batches do), for each block size and
for the whole logits ("logits"), three rounds interleaved; it prints each round's median.
``validation`` loads MODEL_DIR/checkpoint_last.pt (e.g. the bench's bench/work/model-transformer) and
its data-bin, and reports how much each phase of a validation raises the resident size of a fresh
process: the dev loss over whole logits and in blocks, and greedy search at several token budgets.
Each phase runs in its own process, so that one phase's freed pages do not serve the next.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import threading
import time

import torch
import torch.nn.functional as F

TOKENS, DIM, VOCAB = 3800, 256, 8000
SEARCH_BUDGETS = (16000, 8000, 4000, 2000)


def time_loss(mode: str, weight: torch.Tensor, reps: int = 10) -> float:
    """Median milliseconds of one forward and backward of the output layer and the loss."""
    from mtkit.train.loss import label_smoothed_nll, projected_label_smoothed_nll

    times = []
    for i in range(reps):
        rows = TOKENS + (i * 37) % 300
        features = torch.randn(rows, DIM).requires_grad_()
        target = torch.randint(4, VOCAB, (rows,))
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            if mode == "logits":
                loss, _ = label_smoothed_nll(F.linear(features, weight), target, 0.1)
            else:
                loss, _ = projected_label_smoothed_nll(features, weight, target, 0.1, block_rows=int(mode))
        loss.backward()
        times.append(time.perf_counter() - start)
        weight.grad = None
    return 1000 * statistics.median(times[2:])


def loss_blocks(modes: list[str]) -> None:
    torch.manual_seed(0)
    weight = (0.06 * torch.randn(VOCAB, DIM)).requires_grad_()
    for round_ in range(3):
        print(f"round {round_ + 1}: " + ", ".join(f"{m} {time_loss(m, weight):.0f} ms" for m in modes),
              flush=True)


def validation_phase(model_dir: str, phase: str, budget: int) -> None:
    """One phase in this process; prints the rise of the resident size over it and its seconds."""
    from mtkit.checkpoint import load_checkpoint
    from mtkit.config.experiment import load_config
    from mtkit.data.batching import collate
    from mtkit.data.bpe import Bpe
    from mtkit.data.shards import ParallelData
    from mtkit.decode.search import search
    from mtkit.device import bound_kernel_caches
    from mtkit.models import build_model
    from mtkit.train import validation
    from mtkit.train.loss import label_smoothed_nll, projected_label_smoothed_nll
    from mtkit.train.runtime import resident_mib

    bound_kernel_caches()
    cfg = load_config(f"{model_dir}/config.yaml")
    state = load_checkpoint(f"{model_dir}/checkpoint_last.pt")
    vocab = state["vocab"]
    model = build_model(cfg.model, vocab["src_vocab_size"], vocab["tgt_vocab_size"], vocab["joint"])
    model.load_state_dict(state["model"])
    model.eval()
    if budget:
        validation.SEARCH_MAX_TOKENS = budget
    dev = validation.build_dev_set(ParallelData(cfg.data.dir, "dev"), cfg, Bpe(f"{model_dir}/bpe.model"))
    peak = [0.0]

    def sample() -> None:
        while True:
            peak[0] = max(peak[0], resident_mib()[0] or 0.0)
            time.sleep(0.01)

    base = resident_mib()[0] or 0.0
    threading.Thread(target=sample, daemon=True).start()
    start = time.perf_counter()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        if phase == "search":
            for ids in dev.search_batches:
                search(model, collate(dev.data, ids).src, cfg.decoding, beam_size=1)
        for ids in dev.loss_batches if phase != "search" else []:
            batch = collate(dev.data, ids)
            if phase == "loss-logits":
                label_smoothed_nll(model(batch.src, batch.tgt_in)[0], batch.tgt_out, 0.0)
            else:
                features, _ = model(batch.src, batch.tgt_in, project=False)
                projected_label_smoothed_nll(features, model.output_proj.weight, batch.tgt_out, 0.0)
    seconds = time.perf_counter() - start
    time.sleep(0.05)
    print(f"+{peak[0] - base:.0f} MiB, {seconds:.1f} s")


def validation_phases(model_dir: str) -> None:
    phases = [("loss-logits", 0), ("loss-blocks", 0)] + [("search", b) for b in SEARCH_BUDGETS]
    for phase, budget in phases:
        out = subprocess.run([sys.executable, __file__, "_phase", model_dir, phase, str(budget)],
                             capture_output=True, text=True, check=True).stdout.strip()
        print(f"{phase}{f' {budget}' if budget else ''}: {out}", flush=True)


def main() -> None:
    torch.set_num_threads(2)
    what, args = sys.argv[1], sys.argv[2:]
    if what == "loss":
        loss_blocks(args or ["logits", "256", "512", "1024", "2048"])
    elif what == "validation":
        validation_phases(args[0])
    elif what == "_phase":
        validation_phase(args[0], args[1], int(args[2]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
