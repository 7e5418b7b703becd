"""Strings translated with their placeholders and inline tags kept, what every file format and the
server use: the syntaxes of placeholders (syntaxes.py), the steps that keep them through translation
(strings.py: translate_strings), translating with them out of the model's reach and placing them back
by the word alignment (masking.py), and ICU MessageFormat's plural and select arguments (icu.py).
Imports no decoding module: a caller gives it the translation functions (its TranslateFn protocol).
"""
