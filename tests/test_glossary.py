"""Glossary files: the format, what is refused (with file and line), and where a term occurs."""

from __future__ import annotations

import pytest
from cli_helpers import run_mtkit

from mtkit.data.bpe import Bpe, train_bpe
from mtkit.decode.glossary import Glossary, encode_constraints, parse_terms
from mtkit.errors import DataError


def _glossary(tmp_path, text: str, ignore_case: bool = False) -> Glossary:
    path = tmp_path / "terms.tsv"
    path.write_text(text, encoding="utf-8")
    return Glossary.from_file(path, ignore_case)


def test_terms_occur_as_whole_words_longest_first(tmp_path):
    text = "# UI labels\nSave\tSpeichern\nSave As\tSpeichern unter\nLibreOffice\tLibreOffice\n\n"
    g = _glossary(tmp_path, text)
    assert [t.target for t in g.find("Click Save As to keep a copy.")] == ["Speichern unter"]
    assert [t.target for t in g.find("Save/Load in LibreOffice.")] == ["Speichern", "LibreOffice"]
    assert g.find("It saved the unsaved file. Saved. Save_all") == []
    assert [t.target for t in g.find("Save, then Save again")] == ["Speichern"]  # each term once
    assert g.find("save") == []
    assert [t.target for t in _glossary(tmp_path, "Save\tSpeichern\n", ignore_case=True).find("save it")] == \
        ["Speichern"]


@pytest.mark.parametrize(("text", "message"), [
    ("Save Speichern\n", "terms.tsv:1: expected 'source term<TAB>target term', found 0 tab"),
    ("ok\tgut\nSave\tSpeichern\tx\n", "terms.tsv:2: expected .*found 2 tab"),
    ("\tSpeichern\n", "terms.tsv:1: the source term is empty"),
    ("Save\t  \n", "terms.tsv:1: the target term is empty"),
    ("Save\tSpeichern\nSave\tSichern\n", "terms.tsv:2: 'Save' is translated as 'Sichern' here but as "
                                         "'Speichern' at .*terms.tsv:1"),
    ("# only a comment\n", "holds no term"),
])
def test_bad_glossaries_are_one_error_naming_file_and_line(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        _glossary(tmp_path, text)


def test_the_same_pair_twice_is_no_conflict():
    assert len(parse_terms(["Save\tSpeichern", "Save\t Speichern "], "g")) == 1


def test_a_target_term_the_bpe_cannot_encode_is_refused(tmp_path):
    corpus = tmp_path / "c.txt"
    lines = ["speichern sie die datei", "die datei ist klein"] * 50
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    bpe = Bpe(train_bpe([str(corpus)], str(tmp_path / "bpe"), vocab_size=30))
    g = _glossary(tmp_path, "Save\tspeichern\nSmall\tklein\nTree\tBaum 木\n")
    with pytest.raises(DataError, match=r"terms.tsv:3: the target term 'Baum 木' has characters"):
        g.encode_targets(bpe)
    ok = _glossary(tmp_path, "Save\tspeichern\nSmall\tklein\n")
    ok.encode_targets(bpe)
    assert ok.constraints("Save it. Small.") == bpe.encode_ids(["speichern", "klein"])
    assert encode_constraints(["die datei"], bpe, "<input>:1") == bpe.encode_ids(["die datei"])
    with pytest.raises(DataError, match="<input>:4: the constraint '木'"):
        encode_constraints(["木"], bpe, "<input>:4")


# ------------------------------------------------------------------------------- through translate
def _model(tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from test_translator import make_model_dir

    return make_model_dir(tmp_path / "model", beam_size=3, max_len_a=1.0, max_len_b=4)


def test_every_line_with_a_term_uses_it_and_the_others_are_unchanged(tmp_path):
    from mtkit.decode.translator import Translator

    model = _model(tmp_path)
    terms = tmp_path / "terms.tsv"
    terms.write_text("house\tstone table\ncat\twindow\n", encoding="utf-8")
    lines = ["the house is small .", "a cat sat on the mat", "we like green tea",
             "where is the house ? the cat !", "", "the houses are small"]
    plain = Translator(model, device="cpu", threads=1, precision="fp32").translate(lines)
    termed = Translator(model, device="cpu", threads=1, precision="fp32", glossary=terms)
    got = termed.translate(lines)
    assert "stone table" in got[0] and "window" in got[1]
    assert "stone table" in got[3] and "window" in got[3]
    assert [got[2], got[4], got[5]] == [plain[2], plain[4], plain[5]]  # no term: the same translation
    assert "stone table" not in plain[0] or "window" not in plain[1]  # the model would not have said so


def test_json_input_carries_per_line_constraints(tmp_path):
    import json

    model = _model(tmp_path)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"text": "we like green tea", "constraints": ["river stone"]}) + "\n"
                   + json.dumps({"text": "the cat sat"}) + "\n", encoding="utf-8")
    run = run_mtkit("translate", "-m", model, "--device", "cpu", "--precision", "fp32", "--json-input",
                    "-i", src)
    assert run.returncode == 0, run.stderr
    out = run.stdout.splitlines()
    assert len(out) == 2 and "river stone" in out[0]
    src.write_text('{"text": "ok"}\n{"text": 5}\n', encoding="utf-8")
    bad = run_mtkit("translate", "-m", model, "--json-input", "-i", src)
    assert bad.returncode != 0 and bad.stderr.startswith(f"error: {src}:2: expected {{\"text\"")
