"""Files that do not say their charset (SubRip, plain text): a legacy charset is read, written back the
same, and said (mtkit.formats.text.charsets); --encoding is taken as given; what cannot be decided is refused
naming its line; a translation the charset cannot write is left as it was."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from cli_helpers import assert_one_error_line  # noqa: E402
from test_translator import exact, run_cli  # noqa: E402, F401

from mtkit.errors import ConfigError, DataError  # noqa: E402
from mtkit.formats.documents import translate_document  # noqa: E402
from mtkit.formats.text.charsets import guess_legacy  # noqa: E402

SRT = ("1\r\n00:00:01,000 --> 00:00:02,000\r\nCafé crème, déjà vu — “quoted”.\r\n\r\n"
       "2\r\n00:00:03,000 --> 00:00:04,000\r\nÜber Größe müssen wir reden.\r\n")


def upper(lines: list[str]) -> list[str]:
    return [line.upper() for line in lines]


def test_a_windows_1252_subrip_file_is_read_and_written_back_in_it():
    result = translate_document(SRT.encode("cp1252"), "film.srt", "srt", "de", upper, src_lang="fr")
    assert result.data == SRT.upper().replace("ß", "SS").encode("cp1252")  # timings, CRLF: as they were
    assert result.left == ["film.srt: read as cp1252, the usual charset of fr files (not UTF-8; give "
                           "--encoding if it is another)"]
    assert result.summary.endswith("(cp1252)")


def test_the_language_decides_between_code_pages_that_all_decode_the_bytes():
    polish = "Zażółć gęślą jaźń, proszę.".encode("cp1250")
    assert guess_legacy(polish, "pl").codec == "cp1250"
    assert guess_legacy("Привет, как дела у тебя сегодня?".encode("cp1251"), "ru").codec == "cp1251"


def test_a_translation_the_charset_cannot_write_is_left_as_it_was():
    result = translate_document(SRT.encode("cp1252"), "film.srt", "srt", "hu",
                                lambda lines: [line + " ő" for line in lines], src_lang="en")
    assert result.data == SRT.encode("cp1252")  # nothing could be written: every cue as it was
    assert any("film.srt:3: left as it was" in line and "(cp1252) cannot write: 'ő'" in line
               for line in result.left)


def test_encoding_is_taken_as_given_and_only_where_a_file_has_no_charset_of_its_own():
    data = "Straße\n".encode("latin-1")
    result = translate_document(data, "a.txt", "text", "de", upper, encoding="latin-1")
    assert result.data == "STRASSE\n".encode("latin-1") and not result.left
    with pytest.raises(ConfigError, match="--encoding applies to text and srt files"):
        translate_document(b'msgid "a"\nmsgstr ""\n', "a.po", "po", "de", upper, encoding="cp1252")
    with pytest.raises(ConfigError, match="not a charset Python knows"):
        translate_document(data, "a.txt", "text", "de", upper, encoding="klingon")
    with pytest.raises(DataError, match=r"a\.txt:1: not cp1251 text"):
        translate_document(b"ok \x98\n", "a.txt", "text", "de", upper, encoding="cp1251")  # 0x98: none


def test_what_no_charset_can_be_decided_for_is_refused_naming_the_line():
    data = (b"1\n00:00:01,000 --> 00:00:02,000\nfine\n\n"
            b"2\n00:00:03,000 --> 00:00:04,000\n\x81\x8d\x8f\x90\x9d\n")  # bytes cp1252 does not have
    with pytest.raises(DataError, match=r"x\.srt:7: not utf-8 text \(byte 0x81\).*--encoding"):
        translate_document(data, "x.srt", "srt", "de", upper, src_lang="en")


def test_the_command_reads_a_legacy_subrip_file_and_says_so(model_dir: Path, tmp_path: Path):
    source = tmp_path / "film.srt"
    source.write_bytes(SRT.encode("cp1252"))
    result = run_cli("-m", str(model_dir), "-i", str(source), "-o", str(tmp_path / "out.srt"),
                     "--device", "cpu", "--precision", "fp32")
    assert result.returncode == 0, result.stderr
    assert "read as cp1252, the usual charset of en files" in result.stderr
    (tmp_path / "out.srt").read_bytes().decode("cp1252")  # written back in cp1252
    text = tmp_path / "notes.txt"
    text.write_bytes("Grüße\r\n".encode("cp1252"))
    done = run_cli("-m", str(model_dir), "-i", str(text), "-o", str(tmp_path / "out.txt"),
                   "--encoding", "cp1252", "--device", "cpu")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.txt").read_bytes().endswith(b"\r\n")  # one document: its line ending kept
    vtt = tmp_path / "a.vtt"
    vtt.write_bytes(b"WEBVTT\n\n00:01.000 --> 00:02.000\nhi\n")
    refused = run_cli("-m", str(model_dir), "-i", str(vtt), "-o", str(tmp_path / "o.vtt"),
                      "--encoding", "cp1252")
    assert_one_error_line(refused, "--encoding applies to text and srt files", "vtt files say their own")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from test_translator import make_model_dir

    return make_model_dir(tmp_path_factory.mktemp("charsets"), beam_size=1, max_len_a=1.0, max_len_b=4)
