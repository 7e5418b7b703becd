"""HTML/XHTML pages (html.py) and the XML machinery the XML formats share: tokens, attributes and
well-formedness (markup.py), runs of formatting in a paragraph (xml_runs.py), paragraphs (xml_paragraph.py)
and the dialects of office and book files (xml_dialects.py)."""
