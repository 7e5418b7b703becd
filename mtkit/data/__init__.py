"""Data on disk and in batches: meta.json, memory-mapped shards, token-budget batching."""
