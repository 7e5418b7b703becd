"""The four special token ids every mtkit vocabulary shares.

Sentencepiece models are trained with these ids (`mtkit.bpe`), so models, batching and search can
use constants without importing sentencepiece.
"""

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

__all__ = ["BOS_ID", "EOS_ID", "PAD_ID", "UNK_ID"]
