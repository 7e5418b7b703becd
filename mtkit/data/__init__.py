"""Data on disk and in batches: meta.json, binary shards read sentence by sentence, token-budget batching."""
