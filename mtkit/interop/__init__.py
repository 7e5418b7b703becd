"""Models in and out of mtkit, in one package: `mtkit export` (export.py: a model directory as
CTranslate2 or an Argos Translate package, written by ct2_spec.py and argos.py), `mtkit import-hf` and
`mtkit export --format hf` (hf.py: MarianMT directories, with the conversion tables of marian.py and the
sentencepiece files renumbered by spm_proto.py), and the export manifest (manifest.py).

export.py and hf.py are stages (floor 2); the rest is library (floor 3), because the ct2 engine
(`mtkit.decode.ct2`) reads what manifest.py describes. Outputs are built beside their target and renamed
into place (`mtkit.staging`).
"""
