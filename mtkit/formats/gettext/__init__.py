"""gettext catalogs: reading a .po/.pot file byte for byte (po_read.py), translating its entries with
their flags, plurals and header (po.py), and the plural rules of CLDR (plurals.py)."""
