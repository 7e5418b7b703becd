"""Data stage: binarized shards, their preparation, and batching for training."""
