"""Models in and out of mtkit, in one package: `mtkit export` (export.py: a model directory as
CTranslate2 or an Argos Translate package, written by ct2_spec.py and argos.py), `mtkit import-hf` and
`mtkit export --format hf` (hf.py: MarianMT and Pegasus directories with the conversion tables of
marian.py and pegasus.py, M2M100/NLLB imports with m2m100.py and their tokenizers read by hf_m2m100.py,
the files of a directory read by hf_files.py, the tokenizer written by hf_tokenizer.py, the model card
by hf_card.py, the sentencepiece files renumbered by spm_proto.py), and the export manifest (manifest.py).

export.py and hf.py are stages (floor 2); the rest is library (floor 3), because the ct2 engine
(`mtkit.decode.ct2`) reads what manifest.py describes. Outputs are built beside their target and renamed
into place (`mtkit.staging`).
"""
