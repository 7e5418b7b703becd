"""Localisation interchange: XLIFF 1.2 and 2.0 files (xliff.py) and their inline codes (xliff_inline.py)."""
