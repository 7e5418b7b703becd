"""Files with structure, bytes in and bytes out: each read into the strings a model translates, and
written back whole with what is not translated byte for byte. Used by `mtkit translate`, `mtkit serve`
and the Python API (`Translator.translate_file`); imports no stage and no decoding module: a format gets
its translation functions from its caller (`mtkit.decode.formats_adapter` makes them of a Translator).

One package per family, and one table of formats (documents.py: HANDLERS, by name and extension):

- gettext/      catalogs: reading them (po_read.py), translating them (po.py), CLDR plural rules
- xml/          HTML/XHTML pages (html.py) and the XML machinery every XML format shares: tokens and
                attributes (markup.py), runs of formatting (xml_runs.py), paragraphs (xml_paragraph.py),
                the dialects of office and book files (xml_dialects.py)
- zipped/       zip containers: the parts of a zip kept byte for byte (ziparts.py), Word/PowerPoint/Excel
                (office.py), OpenDocument (opendocument.py), EPUB (epub.py)
- captions/     SubRip and WebVTT (subtitles.py), the text of a cue with its styling tags (subtitle_text.py)
- interchange/  XLIFF 1.2 and 2.0 (xliff.py) and its inline codes (xliff_inline.py)
- text/         plain text (plaintext.py) and the legacy charsets of files that do not say theirs
                (charsets.py)

The placeholder machinery every format uses (strings translated with their placeholders and tags
kept) is a package of its own beside this one: `mtkit.placeholders`.
"""
