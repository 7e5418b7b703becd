"""Data preparation and the data it makes: the prepare stage, corpora, sentencepiece BPE; meta.json,
binary shards read sentence by sentence, token-budget batching.
"""
