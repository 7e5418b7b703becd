"""Files with structure, and strings with placeholders: gettext catalogs (po.py) and HTML (html.py)
read into strings to translate with their placeholders and tags protected (placeholders.py), written
back whole. Used by `mtkit translate`, `mtkit serve` and the Python API; imports no stage.
"""
