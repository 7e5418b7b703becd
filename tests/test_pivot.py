"""Pivot translation (mtkit.decode.pivot, issue #41): `PivotTranslator` and `mtkit translate --pivot`
give the same lines as two chained commands (two bilingual models, a multilingual model's two
directions, one of each, two ct2 exports), with streaming stdin, --resume, --shard and the glossary on
the last leg; a pivoted line's confidence is the product of its legs'; n-best and attention are
refused in one line. The server side: test_serve_pivot.py."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from mtkit.decode.pivot import NO_ATTENTION, NO_NBEST, PivotTranslator
from mtkit.decode.translation import one_line
from mtkit.decode.translator import Translator
from mtkit.errors import ConfigError, MtkitError
from mtkit.options import SearchOptions
from mtkit.translate import OutputOptions, run_translate

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import Result, run_mtkit  # noqa: E402
from serve_helpers import multilingual_model, served_model  # noqa: E402

EXACT = {"device": "cpu", "threads": 1, "precision": "fp32"}
CLI = ["--device", "cpu", "--threads", "1", "--precision", "fp32"]
LINES = ["the house is small .", "", "we like green tea . where are you going ?", "a cat sat on the mat",
         "bread every day , but not sunday", "the river and the stone", "light window door table ."]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pivot")
    return {"es-en": served_model(root / "es-en", "en", seed=5, source="es"),
            "en-de": served_model(root / "en-de", "de", seed=6),
            "multi": multilingual_model(root / "multi")}


def chained(first: Translator, second: Translator, lines: list[str]) -> list[str]:
    """What two commands piped into each other write: the first's lines are the second's input."""
    return second.translate([one_line(t) for t in first.translate(lines)])


def mtkit(*args: str, stdin: str | None = None) -> Result:
    return run_mtkit(*args, input=stdin)


def test_the_api_equals_two_chained_translators_for_every_kind_of_leg(models):
    es_en, en_de = Translator(models["es-en"], **EXACT), Translator(models["en-de"], **EXACT)
    multi_en = Translator(models["multi"], tgt_lang="en", **EXACT)
    multi_es = Translator(models["multi"], tgt_lang="es", **EXACT)
    cases = [(PivotTranslator.open(models["es-en"], then=models["en-de"], **EXACT), es_en, en_de),
             (PivotTranslator.open(models["multi"], pivot="en", tgt_lang="es", **EXACT), multi_en, multi_es),
             (PivotTranslator.open(models["multi"], pivot="en", then=models["en-de"], **EXACT), multi_en,
              en_de)]
    for pivot, first, second in cases:
        expected = chained(first, second, LINES)
        assert pivot.translate(LINES) == expected and expected[1] == ""
        assert [t.text for t in pivot.translate_stream(iter(LINES), chunk_size=2)] == expected
        assert pivot.pivot == "en"
    # the multilingual model's two directions share one set of weights
    assert cases[1][0].first.model is cases[1][0].second.model


def test_a_pivoted_lines_confidence_is_the_product_of_its_legs(models):
    pivot = PivotTranslator.open(models["es-en"], then=models["en-de"], **EXACT)
    firsts = pivot.first.translate_hypotheses(LINES)
    lasts = pivot.second.translate_hypotheses([one_line(t.text) for t in firsts])
    for got, a, b in zip(pivot.translate_hypotheses(LINES), firsts, lasts, strict=True):
        assert got.source == a.source and got.text == b.text
        assert got.confidence == pytest.approx(a.confidence * b.confidence, rel=1e-6)
        assert got.mean_log_prob == pytest.approx(math.log(got.confidence), rel=1e-6, abs=1e-9)
        if a.hypotheses:
            assert got.hypotheses[0].pivot == a.text
            assert got.hypotheses[0].log_prob == pytest.approx(a.hypotheses[0].log_prob
                                                               + b.hypotheses[0].log_prob, rel=1e-6)


def test_the_glossary_of_the_pair_constrains_the_last_leg(models, tmp_path):
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("cat\tstone window\n", encoding="utf-8")
    plain = PivotTranslator.open(models["es-en"], then=models["en-de"], **EXACT)
    forced = PivotTranslator.open(models["es-en"], then=models["en-de"], glossary=str(glossary), **EXACT)
    out, before = forced.translate(LINES), plain.translate(LINES)
    for line, text, was in zip(LINES, out, before, strict=True):
        if "cat" in line.split():
            assert "stone window" in text  # the source term found in the input, its target in the output
        else:
            assert text == was
    assert forced.first.glossary is None and forced.second.glossary is None  # the legs have none
    # constraints of a line (--json-input) go to the last leg too
    wanted = [["stone window"] if i == 0 else [] for i in range(len(LINES))]
    constrained = plain.translate_chunk(LINES, constraints=wanted)
    assert "stone window" in constrained[0].text and [t.text for t in constrained[1:]] == before[1:]


def test_what_a_pivot_cannot_do_is_one_line(models, tmp_path):
    with pytest.raises(ConfigError, match="one candidate per line"):
        PivotTranslator.open(models["es-en"], then=models["en-de"], nbest=2, **EXACT)
    pivot = PivotTranslator.open(models["es-en"], then=models["en-de"], **EXACT)
    with pytest.raises(MtkitError, match="attention and alignments do not apply through a pivot"):
        pivot.translate_hypotheses(LINES, need_attention=True)
    with pytest.raises(ConfigError, match=r"translates es into en only; give the second leg's model"):
        PivotTranslator.open(models["es-en"], pivot="en", tgt_lang="de", **EXACT)
    with pytest.raises(ConfigError, match=r"^--pivot fr: the model translates into en only$"):
        PivotTranslator.open(models["es-en"], pivot="fr", then=models["en-de"], **EXACT)
    with pytest.raises(ConfigError, match=r"was not trained de→es"):
        PivotTranslator.open(models["multi"], pivot="de", tgt_lang="es", **EXACT)
    with pytest.raises(ConfigError, match=r"translates from en, not from the pivot language es"):
        PivotTranslator.open(models["multi"], pivot="es", then=models["en-de"], **EXACT)
    with pytest.raises(ConfigError, match=r"name the pivot language with --pivot"):
        PivotTranslator.open(models["multi"], then=models["en-de"], **EXACT)
    source = tmp_path / "in.txt"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    for out, search, message in ((OutputOptions(pivot="en", alignment=True), {}, NO_ATTENTION),
                                 (OutputOptions(pivot="en"), {"nbest": 3}, NO_NBEST),
                                 (OutputOptions(pivot="en", placeholders=True), {}, "plain text lines")):
        with pytest.raises(ConfigError) as caught:
            run_translate(models["multi"], str(source), str(tmp_path / "out.txt"), None,
                          SearchOptions(tgt_lang="es", **search), out)
        assert message in str(caught.value)
    assert not (tmp_path / "out.txt").exists()


@pytest.mark.slow
def test_the_cli_gives_the_lines_of_two_chained_commands(models, tmp_path):
    source = tmp_path / "in.es"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    first = mtkit("translate", "-m", str(models["es-en"]), "-i", str(source), "-o", str(tmp_path / "mid.en"),
                  *CLI)
    assert first.returncode == 0, first.stderr
    second = mtkit("translate", "-m", str(models["en-de"]), "-i", str(tmp_path / "mid.en"),
                   "-o", str(tmp_path / "two.de"), *CLI)
    assert second.returncode == 0, second.stderr
    two = (tmp_path / "two.de").read_text(encoding="utf-8")
    assert len(two.splitlines()) == len(LINES)
    pivot = ["translate", "-m", str(models["es-en"]), "--pivot-model", str(models["en-de"]), *CLI]
    one = mtkit(*pivot, "-i", str(source), "-o", str(tmp_path / "one.de"), "--scores")
    assert one.returncode == 0, one.stderr
    scored = (tmp_path / "one.de").read_text(encoding="utf-8").splitlines()
    assert [line.split("\t")[0] for line in scored] == two.splitlines()
    api = PivotTranslator.open(models["es-en"], then=models["en-de"], **EXACT).translate_hypotheses(LINES)
    assert [float(line.split("\t")[1]) for line in scored] == pytest.approx([t.confidence for t in api],
                                                                             abs=1e-4)
    streamed = mtkit(*pivot, stdin="".join(f"{line}\n" for line in LINES))  # stdin → stdout
    assert streamed.returncode == 0 and streamed.stdout == two, streamed.stderr
    # --resume continues a partial output; --shard translates every other line
    partial = tmp_path / "resumed.de"
    partial.write_text("".join(f"{line}\n" for line in two.splitlines()[:3]), encoding="utf-8")
    resumed = mtkit(*pivot, "-i", str(source), "-o", str(partial), "--resume")
    assert resumed.returncode == 0 and partial.read_text(encoding="utf-8") == two, resumed.stderr
    shard = mtkit(*pivot, "-i", str(source), "-o", str(tmp_path / "shard.de"), "--shard", "1/2")
    assert shard.returncode == 0, shard.stderr
    assert (tmp_path / "shard.de").read_text(encoding="utf-8").splitlines() == two.splitlines()[1::2]
    refused = mtkit(*pivot, "-i", str(source), "--alignment")
    assert refused.returncode != 0 and refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr


def test_the_cli_pivots_through_a_multilingual_models_own_directions(models, tmp_path):
    source = tmp_path / "in.de"
    source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    out = mtkit("translate", "-m", str(models["multi"]), "--pivot", "en", "--tgt-lang", "es",
                "-i", str(source), "--json", *CLI)
    assert out.returncode == 0, out.stderr
    records = [json.loads(line) for line in out.stdout.splitlines()]
    first = Translator(models["multi"], tgt_lang="en", **EXACT)
    expected = chained(first, Translator(models["multi"], tgt_lang="es", **EXACT), LINES)
    assert [r["text"] for r in records] == expected
    assert [r.get("pivot", "") for r in records] == [one_line(t) for t in first.translate(LINES)]


def test_a_pivot_over_two_ct2_exports_is_as_over_two_model_directories(models, tmp_path):
    pytest.importorskip("ctranslate2")
    from mtkit.interop.export import run_export

    exported = {}
    for name in ("es-en", "en-de"):
        run_export(models[name], tmp_path / name)
        exported[name] = tmp_path / name
    pivot = PivotTranslator.open(exported["es-en"], then=exported["en-de"], **EXACT)
    assert pivot.first.engine == pivot.second.engine == "ct2"
    first, second = Translator(exported["es-en"], **EXACT), Translator(exported["en-de"], **EXACT)
    assert pivot.translate(LINES) == chained(first, second, LINES)

