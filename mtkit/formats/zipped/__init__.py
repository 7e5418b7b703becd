"""Zip containers, each part that is not translated kept byte for byte (ziparts.py): Word, PowerPoint
and Excel files (office.py), OpenDocument (opendocument.py) and EPUB books (epub.py)."""
