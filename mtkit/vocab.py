"""The four special token ids every mtkit vocabulary shares, and how many sentences its BPE models
are trained on by default.

Sentencepiece models are trained with these ids (`mtkit.data.bpe`), so models, batching and search can
use constants without importing sentencepiece.
"""

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3

#: Default size of the sample a BPE model is trained on (`bpe.input_sentence_size`, `mtkit bpe train
#: --input-sentence-size`): sentencepiece holds the whole sample, so this bounds the memory of
#: `prepare`; 500k sentences (~10M words) is plenty for vocabularies of 8k-32k and keeps `prepare` of
#: 15M pairs within 1.5× the memory of 145k pairs (docs/results.md, "Preparation at scale").
BPE_SAMPLE_SENTENCES = 500_000

__all__ = ["BOS_ID", "BPE_SAMPLE_SENTENCES", "EOS_ID", "PAD_ID", "UNK_ID"]
