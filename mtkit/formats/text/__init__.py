"""Plain text as one document (plaintext.py) and the legacy charsets of files that do not say theirs
(charsets.py)."""
