"""Where minimum risk training's candidate weight goes: beam n-best against samples.

    python bench/studies/mrt_candidates.py MODEL_DIR DATA_DIR [--sentences 120] [--beam 4] [--samples 4]
        [--alpha 1.0] [--metric bleu] [--split train] [--seed 1]

For ``--sentences`` random pairs of ``DATA_DIR``'s split, generates the candidates an MRT update with
``training.mrt_search: both`` would (the ``--beam`` n-best of a beam, then ``--samples`` ancestral
samples, duplicates dropped, in eval mode and bf16 where the CPU has it, as `mtkit.train.mrt` does),
and prints, averaged over the sentences: the share of Q(y|x) ∝ P(y|x)^α that falls on the sampled
candidates, how many candidates hold more than 1% of it, the cost (1 − sentence BLEU or chrF / 100) of
the beam's best and of the cheapest candidate, the expected cost, and the length ratios. On the
deb-en-de recipe's annealed model at α = 1 the samples held 0.8% of the weight (docs/notebook,
"Minimum risk training from beam candidates"): they cost most of an update and move almost nothing,
which is why recipes/deb-en-de/mrt3.yaml uses the beam alone.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from mtkit.data.batching import collate
from mtkit.data.bpe import Bpe
from mtkit.data.shards import ParallelData
from mtkit.decode.loader import load_model
from mtkit.decode.search import search
from mtkit.decode.translation import Hypothesis
from mtkit.device import autocast, autocast_dtype, resolve_device
from mtkit.train.costs import sentence_costs
from mtkit.train.mrt import _references, candidate_decoding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model_dir")
    parser.add_argument("data_dir")
    parser.add_argument("--sentences", type=int, default=120)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=1.0)
    parser.add_argument("--metric", choices=["bleu", "chrf"], default="bleu")
    parser.add_argument("--split", default="train")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    device = resolve_device("auto")
    loaded = load_model(args.model_dir, device=device)
    data = ParallelData(args.data_dir, args.split)
    bpe = Bpe(f"{args.data_dir}/bpe.model")
    ids = np.sort(np.random.default_rng(args.seed).choice(len(data), min(args.sentences, len(data)),
                                                          replace=False))
    batch = collate(data, ids)
    src = batch.src[: len(ids)].to(device)
    cfg = candidate_decoding(loaded.config.decoding)
    generator = torch.Generator(device).manual_seed(args.seed)
    with torch.no_grad(), autocast(device, autocast_dtype("auto", device)):
        beam = search(loaded.model, src, cfg, beam_size=args.beam, nbest=args.beam) if args.beam else None
        drawn = (search(loaded.model, src, cfg, nbest=args.samples, sample=True, generator=generator)
                 if args.samples else None)
    references = _references(batch)
    rows: dict[str, list[float]] = {k: [] for k in ("sampled weight", "candidates over 1%", "distinct",
                                                    "cost of the beam's best", "cost of the cheapest",
                                                    "expected cost", "length ratio, beam's best",
                                                    "length ratio, cheapest")}
    for i, reference in enumerate(references):
        found = [(h, False) for h in (beam[i] if beam else [])]
        found += [(h, True) for h in (drawn[i] if drawn else [])]
        first: dict[tuple[int, ...], tuple[Hypothesis, bool]] = {}
        for h, sampled in found:
            first.setdefault(tuple(h.tokens), (h, sampled))  # as MRT dedupes: the first found stays
        distinct = list(first.values())
        log_probs = torch.tensor([h.log_prob for h, _ in distinct], dtype=torch.float64)
        q = torch.softmax(args.alpha * log_probs, 0)
        texts = bpe.decode_ids([h.tokens for h, _ in distinct])
        costs = torch.tensor(sentence_costs(args.metric, texts, bpe.decode_ids([reference])[0]),
                             dtype=torch.float64)
        cheapest = int(costs.argmin())
        length = max(1, len(reference))
        rows["sampled weight"].append(float(q[torch.tensor([s for _, s in distinct])].sum()))
        rows["candidates over 1%"].append(int((q > 0.01).sum()))
        rows["distinct"].append(len(distinct))
        rows["cost of the beam's best"].append(float(costs[0]))
        rows["cost of the cheapest"].append(float(costs[cheapest]))
        rows["expected cost"].append(float((q * costs).sum()))
        rows["length ratio, beam's best"].append(len(distinct[0][0].tokens) / length)
        rows["length ratio, cheapest"].append(len(distinct[cheapest][0].tokens) / length)
    print(f"{len(references)} {args.split} sentences, beam {args.beam} + {args.samples} samples, "
          f"α {args.alpha}, {args.metric} costs (means per sentence):")
    for name, values in rows.items():
        print(f"  {name:28} {np.mean(values):.3f}")


if __name__ == "__main__":
    main()
