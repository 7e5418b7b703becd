"""Everything between a model directory (or an export) and a translation: the Translator, the torch
and ct2 engines, search and constrained search, glossaries, segmentation, streaming, shortlists.
"""
