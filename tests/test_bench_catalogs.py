"""bench/studies/catalogs.py's own parts (offline): blanking keeps every other byte, the fake model keeps
every placeholder where it was, the hostile one breaks some, mikutter's Ruby flags."""

import importlib.util
from pathlib import Path

import polib

spec = importlib.util.spec_from_file_location("bench_catalogs",
                                              Path(__file__).parents[1] / "bench/studies/catalogs.py")
catalogs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(catalogs)

PO = b'''msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\\n"
"Plural-Forms: nplurals=3; plural=(n==1 ? 0 : n%10>=2 && n%10<=4 && (n%100<10 || n%100>=20) ? 1 : 2);\\n"

#: a.c:1
#, c-format
msgid "Cannot open %s: %m"
msgstr ""
"Nie mo\xc5\xbcna "
"otworzy\xc4\x87 %s: %m"

msgid "%d file"
msgid_plural "%d files"
msgstr[0] "%d plik"
msgstr[1] "%d pliki"
msgstr[2] "%d plik\xc3\xb3w"

#~ msgid "old"
#~ msgstr "stary"
'''


def test_blank_keeps_header_and_obsolete():
    out = catalogs.blank(PO)
    entries = polib.pofile(out.decode())
    assert "Plural-Forms" in entries.metadata
    active = [e for e in entries if not e.obsolete]
    assert all(not e.msgstr and not any(e.msgstr_plural.values()) for e in active)
    assert [e.msgstr for e in entries.obsolete_entries()] == ["stary"]
    assert out.count(b"\n") == PO.count(b"\n") - 2  # the msgstr's two continuation lines went, nothing else
    assert b'#, c-format\nmsgid "Cannot open %s: %m"\nmsgstr ""\n' in out


def test_fake_keeps_tokens_hostile_breaks_some():
    for line in ["Cannot open %s: %m", "%1 of %2 files", "@%{user} liked it", "{count} files in {dir}",
                 "Set RTC to %<PRId64> (%<PRId64> + %d)", "file '%.*s'", "escape `\\%c'"]:
        fake = catalogs.fake_line(line, "ru")
        assert [t for is_t, t in catalogs.split_tokens(fake) if is_t] == \
               [t for is_t, t in catalogs.split_tokens(line) if is_t]
        assert fake != line
    lines = [f"Line {n}: %s of %d" for n in range(60)]
    hostile = [catalogs.hostile_line(line, "de") for line in lines]
    assert hostile == [catalogs.hostile_line(line, "de") for line in lines]  # deterministic
    assert sum(h.count("%") != 2 for h in hostile) >= 10


def test_ruby_flags():
    data = b'#: a.rb:1\nmsgid "%{user} liked"\nmsgstr ""\n\nmsgid "plain"\nmsgstr ""\n'
    out, added = catalogs.add_ruby_flags(data)
    assert added == 1
    assert out == b'#: a.rb:1\n#, ruby-format\nmsgid "%{user} liked"\nmsgstr ""\n\nmsgid "plain"\nmsgstr ""\n'
