"""Decoding stage: search algorithms over the Seq2Seq interface, and the Translator."""
