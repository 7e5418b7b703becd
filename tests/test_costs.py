"""MRT's candidate costs (`mtkit.train.costs`): worker processes give the inline result, in order."""

from __future__ import annotations

import random

from mtkit.train.costs import SentenceCost, auto_workers, sentence_costs


def test_worker_processes_score_exactly_as_inline():
    rng = random.Random(3)
    words = ["der", "die", "das", "Hund", "Katze", "bellt", "schläft", "laut", "leise", "heute"]
    refs = [" ".join(rng.choices(words, k=rng.randint(1, 9))) for _ in range(40)]
    cands = [[" ".join(rng.choices(words, k=rng.randint(0, 9))) for _ in range(rng.randint(1, 5))]
             for _ in refs]
    for metric in ("bleu", "chrf"):
        inline = SentenceCost(metric).batch(cands, refs)
        pooled = SentenceCost(metric, workers=2)
        try:
            assert pooled.batch(cands, refs) == inline
            assert pooled._pool is not None  # the work did go to the workers
        finally:
            pooled.close()
        assert [len(c) for c in inline] == [len(c) for c in cands]
        assert inline[0] == sentence_costs(metric, cands[0], refs[0])


def test_workers_only_where_a_gpu_leaves_cores_idle():
    assert auto_workers("cpu") == 0
    assert 0 <= auto_workers("cuda") <= 8
    assert auto_workers("cuda", local_processes=10_000) == 0
