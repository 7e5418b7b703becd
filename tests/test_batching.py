"""Token-budget batching: budget, coverage, determinism, shuffling, DDP sharding, collation."""

from __future__ import annotations

import numpy as np
import pytest

from mtkit.data.batching import TokenBatchSampler, batch_cost_lengths, collate, pack_sorted, sampler_for
from mtkit.data.meta import DataMeta, write_meta
from mtkit.data.shards import ParallelData, Shard, ShardWriter
from mtkit.errors import DataError
from mtkit.vocab import BOS_ID, EOS_ID, PAD_ID


@pytest.fixture()
def lengths() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    src = rng.integers(1, 60, size=500)
    tgt = np.clip(src + rng.integers(-5, 6, size=500), 1, None)
    return src, tgt


def _cost(batch: np.ndarray, src: np.ndarray, tgt: np.ndarray) -> int:
    return len(batch) * int(batch_cost_lengths(src[batch], tgt[batch]).max())


def test_batches_respect_the_budget_and_cover_each_sentence_once(lengths):
    src, tgt = lengths
    sampler = TokenBatchSampler(src, tgt, max_tokens=300, seed=3)
    batches = sampler.epoch_batches(1)
    assert all(_cost(b, src, tgt) <= 300 for b in batches)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(src)))
    # the budget is used: joining any batch with a neighbour of the sorted order would overflow it
    assert np.mean([_cost(b, src, tgt) for b in batches]) > 0.7 * 300


def test_sorting_keeps_padding_small(lengths):
    src, tgt = lengths
    sampler = TokenBatchSampler(src, tgt, max_tokens=300, seed=3)
    rng = np.random.default_rng(1)
    random_order = rng.permutation(len(src))
    # same budget, no length sorting: batches of random lengths (greedy packing in random order)
    unsorted = []
    start = 0
    cost_len = batch_cost_lengths(src, tgt)
    while start < len(src):
        end = start + 1
        while end < len(src) and (end - start + 1) * cost_len[random_order[start:end + 1]].max() <= 300:
            end += 1
        unsorted.append(random_order[start:end])
        start = end
    from mtkit.data.batching import padding_fraction

    assert sampler.padding_fraction(1) < 0.1
    assert sampler.padding_fraction(1) < padding_fraction(unsorted, src, tgt) / 3


def test_epoch_lists_are_reproducible_and_shuffled(lengths):
    src, tgt = lengths
    a = TokenBatchSampler(src, tgt, max_tokens=300, seed=7)
    b = TokenBatchSampler(src, tgt, max_tokens=300, seed=7)
    for epoch in (1, 2, 5):
        assert [x.tolist() for x in a.epoch_batches(epoch)] == [x.tolist() for x in b.epoch_batches(epoch)]
    e1, e2 = a.epoch_batches(1), a.epoch_batches(2)
    assert [x.tolist() for x in e1] != [x.tolist() for x in e2]
    other_seed = TokenBatchSampler(src, tgt, max_tokens=300, seed=8).epoch_batches(1)
    assert [x.tolist() for x in e1] != [x.tolist() for x in other_seed]
    # the order of batches is shuffled, not ascending in length
    first_len = [int(batch_cost_lengths(src[x], tgt[x]).max()) for x in e1]
    assert first_len != sorted(first_len)


def test_unshuffled_sampler_is_length_sorted(lengths):
    src, tgt = lengths
    batches = TokenBatchSampler(src, tgt, max_tokens=300, shuffle=False).epoch_batches(1)
    longest = [int(batch_cost_lengths(src[b], tgt[b]).max()) for b in batches]
    assert longest == sorted(longest)


def test_a_sentence_longer_than_the_budget_gets_a_batch_of_its_own():
    lengths = np.array([5, 5, 50, 5])
    order = np.argsort(lengths, kind="stable")
    batches = pack_sorted(order, lengths, max_tokens=20)
    assert [b.tolist() for b in batches] == [[0, 1, 3], [2]]


def test_ddp_ranks_get_disjoint_shards_of_equal_length(lengths):
    src, tgt = lengths
    full = TokenBatchSampler(src, tgt, max_tokens=300, seed=2).epoch_batches(4)
    ranks = [TokenBatchSampler(src, tgt, max_tokens=300, seed=2, rank=r, world_size=3).epoch_batches(4)
             for r in range(3)]
    assert len({len(r) for r in ranks}) == 1
    assert len(ranks[0]) == -(-len(full) // 3)
    seen = [x.tolist() for r in ranks for x in r]
    # every batch of the full list is trained on; only the padding repeats (at most world_size - 1)
    assert {tuple(x) for x in seen} == {tuple(x.tolist()) for x in full}
    assert len(seen) - len(full) < 3


def _write_split(tmp_path, pairs):
    dtype = np.dtype(np.uint16)
    src_w, tgt_w = ShardWriter(tmp_path / "train.src", dtype), ShardWriter(tmp_path / "train.tgt", dtype)
    for s, t in pairs:
        src_w.add(s)
        tgt_w.add(t)
    src_w.close()
    tgt_w.close()
    write_meta(tmp_path, DataMeta(dtype="uint16", src_vocab_size=50, tgt_vocab_size=50, joint=True,
                                  src_bpe="bpe.model", tgt_bpe="bpe.model",
                                  splits={"train": {"sentences": len(pairs)}}))
    return ParallelData(tmp_path, "train")


def test_shards_stream_their_offsets_to_disk(tmp_path, monkeypatch):
    """Offsets go to the .idx file block by block (memory does not grow with the corpus), and the
    sentences read back are the ones written, across block boundaries and with empty ones."""
    monkeypatch.setattr(ShardWriter, "_BLOCK", 3)
    rng = np.random.default_rng(0)
    sentences = [rng.integers(4, 50, size=int(n)).tolist() for n in rng.integers(0, 6, size=17)]
    writer = ShardWriter(tmp_path / "x.src", np.dtype(np.uint16))
    for ids in sentences:
        writer.add(ids)
        assert len(writer._pending) < 3  # never more than a block in memory
    assert len(writer) == 17 and writer.num_tokens == sum(map(len, sentences))
    writer.close()
    shard = Shard(tmp_path / "x.src", np.dtype(np.uint16))
    assert len(shard) == 17 and [shard[i].tolist() for i in range(17)] == sentences
    assert not list(tmp_path.glob("*.tmp"))


def test_shard_reads_every_sentence_from_compact_lengths_without_a_memory_map(tmp_path, monkeypatch):
    monkeypatch.setattr(Shard, "BLOCK", 4)  # sentences found from a stored offset every 4
    rng = np.random.default_rng(1)
    sentences = [rng.integers(4, 900, size=int(n)).tolist() for n in rng.integers(0, 9, size=41)]
    sentences.append([4 + i % 800 for i in range(70_000)])  # longer than uint16 counts: lengths widen
    writer = ShardWriter(tmp_path / "x.src", np.dtype(np.uint16))
    for ids in sentences:
        writer.add(ids)
    writer.close()
    shard = Shard(tmp_path / "x.src", np.dtype(np.uint16))
    assert shard.lengths.dtype == np.uint32 and shard.lengths.tolist() == [len(x) for x in sentences]
    assert [shard[i].tolist() for i in range(len(sentences))] == sentences
    assert [shard[i].tolist() for i in (17, 3, 40, 0)] == [sentences[i] for i in (17, 3, 40, 0)]
    with open("/proc/self/maps", encoding="utf-8") as maps:  # read, not mapped: nothing to grow in RSS
        assert str(tmp_path / "x.src.bin") not in maps.read()
    short = Shard(tmp_path / "x.src", np.dtype(np.uint16))
    (tmp_path / "x.src.bin").write_bytes(b"")  # the file changed under a running reader
    with pytest.raises(DataError, match="short read at sentence 1"):
        short[1]


def test_collate_pads_and_adds_bos_eos(tmp_path):
    data = _write_split(tmp_path, [([10, 11, 12], [20]), ([13], [21, 22, 23]), ([14, 15], [24, 25])])
    batch = collate(data, np.array([1, 0]))
    assert batch.src.tolist() == [[13, PAD_ID, PAD_ID], [10, 11, 12]]
    assert batch.tgt_in.tolist() == [[BOS_ID, 21, 22, 23], [BOS_ID, 20, PAD_ID, PAD_ID]]
    assert batch.tgt_out.tolist() == [[21, 22, 23, EOS_ID], [20, EOS_ID, PAD_ID, PAD_ID]]
    assert batch.num_tgt_tokens == 6 and batch.num_src_tokens == 4
    assert batch.ids.tolist() == [1, 0]


def test_sampler_reads_lengths_from_the_shards(tmp_path):
    data = _write_split(tmp_path, [([1] * n, [2] * (n + 1)) for n in range(1, 30)])
    sampler = sampler_for(data, max_tokens=64, seed=1)
    batches = sampler.epoch_batches(1)
    for b in batches:
        collated = collate(data, b)
        assert collated.src.numel() <= 64 and collated.tgt_in.numel() <= 64


# ------------------------------------------------------------------------------------ shape buckets
def test_bucket_lengths_are_multiples_of_8_with_at_most_an_eighth_of_padding_above_64():
    from mtkit.data.batching import bucket_length

    lengths = np.arange(1, 1025)
    buckets = bucket_length(lengths)
    assert (buckets >= lengths).all() and (buckets % 8 == 0).all()
    assert buckets[:64].tolist() == [8 * ((x + 7) // 8) for x in range(1, 65)]
    assert ((buckets[64:] - lengths[64:]) <= lengths[64:] / 4).all()
    assert len(set(bucket_length(np.arange(1, 252)).tolist())) == 16  # the recipe's max_len 250 + 1


def test_bucketed_batches_fit_few_fixed_shapes_and_cover_each_sentence_once(lengths):
    from mtkit.data.batching import bucket_length, bucket_rows

    src, tgt = lengths
    sampler = TokenBatchSampler(src, tgt, max_tokens=300, seed=3, buckets=True)
    batches = sampler.epoch_batches(1)
    assert sorted(np.concatenate(batches).tolist()) == list(range(len(src)))
    cost = batch_cost_lengths(src, tgt)
    for b in batches:
        rows, length = sampler.batch_shape(b)
        assert len(set(bucket_length(cost[b]).tolist())) == 1  # one bucket per batch
        assert length == bucket_length(int(cost[b].max())) and rows == bucket_rows(length, 300)
        assert len(b) <= rows and rows * length <= 300
    assert sampler.shapes(1) == sampler.shapes(2)  # the set of shapes does not depend on the epoch
    assert len(sampler.shapes(1)) <= 8  # lengths up to 65: buckets 8, 16, ..., 64, 80
    # unbucketed, nearly every batch has a shape of its own
    plain = TokenBatchSampler(src, tgt, max_tokens=300, seed=3)
    plain_shapes = {(len(b), int(cost[b].max())) for b in plain.epoch_batches(1)}
    assert len(plain_shapes) > 3 * len(sampler.shapes(1))


def test_bucketed_batches_are_seeded_shuffled_and_resumable(lengths):
    src, tgt = lengths
    a = TokenBatchSampler(src, tgt, max_tokens=300, seed=3, buckets=True)
    b = TokenBatchSampler(src, tgt, max_tokens=300, seed=3, buckets=True)
    assert all(np.array_equal(x, y) for x, y in zip(a.epoch_batches(4), b.epoch_batches(4), strict=True))
    first, second = a.epoch_batches(1), a.epoch_batches(2)
    assert not all(np.array_equal(x, y) for x, y in zip(first, second, strict=False))
    dev = TokenBatchSampler(src, tgt, max_tokens=300, shuffle=False, buckets=True)
    assert all(np.array_equal(x, y) for x, y in zip(dev.epoch_batches(0), dev.epoch_batches(9), strict=True))


def test_collate_to_a_shape_pads_rows_and_columns(tmp_path):
    import torch

    data = _write_split(tmp_path, [([10, 11, 12], [20]), ([13], [21, 22, 23]), ([14, 15], [24, 25])])
    ids = np.array([0, 1])
    plain = collate(data, ids)
    shaped = collate(data, ids, shape=(4, 16))
    for name in ("src", "tgt_in", "tgt_out"):
        small, big = getattr(plain, name), getattr(shaped, name)
        assert big.shape == (4, 16)
        assert torch.equal(big[:2, : small.size(1)], small)
        assert (big[:2, small.size(1):] == PAD_ID).all() and (big[2:] == PAD_ID).all()
    assert (shaped.num_tgt_tokens, shaped.num_src_tokens) == (plain.num_tgt_tokens, plain.num_src_tokens)
    with pytest.raises(ValueError, match="does not fit"):
        collate(data, ids, shape=(1, 16))
