"""Real gettext catalogs through mtkit's catalog path (issue #48): 0 entries lost, 0 `msgfmt --check`
errors, every byte of what was not translated kept, on Debian's catalogs of C, Python, Qt/KDE and Ruby
programs and gettext's own examples (sh, perl-brace, php, java, ... formats), in German and in Slavic
languages of three plural forms.

    python bench/studies/catalogs.py fetch               # sources -> bench/work/catalogs (manifest.json)
    python bench/studies/catalogs.py check               # fake models, no trained model needed
    python bench/studies/catalogs.py check --model DIR [--tgt-lang de]  # `mtkit translate --no-fuzzy` instead

`fetch` downloads the Debian source tarballs named in SOURCES (pool address, snapshot address as a
fallback, sha256 checked) and takes their .po/.pot files out, with their format flags and comments
(a .mo loses both). mikutter's catalogs (Ruby, `%{name}` placeholders) carry no format flags (rxgettext
writes none); `fetch` adds `ruby-format` where a msgid holds a Ruby format directive, as xgettext
does for Ruby, so that msgfmt checks them (recorded in the manifest).

`check` blanks every msgstr of each .po (the header kept, the rest of every line as it was) and takes
each .pot as it is, translates it with ``translate_document(..., fuzzy=False)`` and a fake model:

- ``fake``: deterministic, keeps every placeholder-like token where it was and reverses the order of
  the words around them, letters marked for the language (umlauts, Cyrillic, Polish/Czech diacritics);
- ``hostile``: the same, but on some strings drops, duplicates, swaps or invents a placeholder
  (printf, Qt ``%1``, Ruby ``%{x}``, brace, tag), or adds a stray ``%``.

Measured per catalog: entries in and out, entries lost (msgctxt+msgid keys missing) and added,
translated, left untranslated, `msgfmt --check` errors of the output (without --use-fuzzy; and of the
original and of the blanked input, for comparison), blocks of untranslated entries whose bytes changed,
translated entries whose comments/flags/msgctxt/msgid changed, and plural entries with the wrong number
of forms. Markdown on stdout, JSON in bench/results/catalogs.json; the outputs in bench/work/catalogs/out.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import re
import subprocess
import sys
import tarfile
import time
import urllib.request
import zlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "bench/work/catalogs"
POOL = "http://deb.debian.org/debian/pool/main/"
SNAPSHOT = "http://snapshot.debian.org/archive/debian/20250520T000000Z/pool/main/"
SLAVIC = ("ru", "pl", "cs")
LANGS = ("de", *SLAVIC)

#: (package, version, suite, family, pool path, sha256, catalogs inside the tarball: patterns with {lang})
SOURCES = [
    (
        "util-linux",
        "2.38.1-5+deb12u3",
        "bookworm",
        "C (c-format)",
        "u/util-linux/util-linux_2.38.1.orig.tar.xz",
        "60492a19b44e6cf9a3ddff68325b333b8b52b6c59ce3ebd6a0ecaa4c5117e84f",
        ["util-linux-2.38.1/po/{lang}.po", "util-linux-2.38.1/po/util-linux.pot"],
    ),
    (
        "findutils",
        "4.9.0-4",
        "bookworm",
        "C (c-format)",
        "f/findutils/findutils_4.9.0.orig.tar.xz",
        "a2bfb8c09d436770edc59f50fa483e785b161a3b7b9d547573cb08065fd462fe",
        ["findutils-4.9.0/po/{lang}.po", "findutils-4.9.0/po/findutils.pot"],
    ),
    (
        "dnf",
        "4.14.0-3+deb12u1",
        "bookworm",
        "Python (python-format, python-brace-format)",
        "d/dnf/dnf_4.14.0.orig.tar.gz",
        "7de4eb8e85c4d9a74db6f1f827d2dd3348e265631f8678a1dbf7e3346beaad53",
        ["dnf-4.14.0/po/{lang}.po", "dnf-4.14.0/po/dnf.pot"],
    ),
    (
        "system-config-printer",
        "1.5.18-1",
        "bookworm",
        "Python (python-format)",
        "s/system-config-printer/system-config-printer_1.5.18.orig.tar.xz",
        "b1a69e1b4ec2add569a87aeca811a37c5361ee6ae327ec852b79e64223e34bee",
        [
            "system-config-printer-1.5.18/po/{lang}.po",
            "system-config-printer-1.5.18/po/system-config-printer.pot",
        ],
    ),
    (
        "meld",
        "3.22.3-1",
        "trixie",
        "Python/GTK (python-format, python-brace-format, _ accelerators)",
        "m/meld/meld_3.22.3.orig.tar.xz",
        "37f7f29eb1ff0fec4d8b088d5483c556de1089f6d018fe6d481993caf2499d84",
        ["meld-3.22.3/po/{lang}.po"],
    ),
    (
        "kio",
        "5.103.0-1+deb12u1",
        "bookworm",
        "KDE (kde-format)",
        "k/kio/kio_5.103.0.orig.tar.xz",
        "0b4837365aa489cc4007badb21f49e7d7729b758020cf2a0717ab12fbf97f447",
        ["kio-5.103.0/po/{lang}/kio5.po"],
    ),
    (
        "kconfig",
        "5.103.0-2",
        "bookworm",
        "Qt (qt-format)",
        "k/kconfig/kconfig_5.103.0.orig.tar.xz",
        "5f41e6f566e1eb0ee455886d9ffb69e080ed219e40f4a315b6dd0fd8de3bb918",
        ["kconfig-5.103.0/poqm/{lang}/kconfig5_qt.po"],
    ),
    (
        "kcoreaddons",
        "5.103.0-1",
        "bookworm",
        "Qt (qt-format)",
        "k/kcoreaddons/kcoreaddons_5.103.0.orig.tar.xz",
        "beb99d0274c2bffd8e6aa87199438393222a0317e2e1118d510b5b6abf772f6a",
        ["kcoreaddons-5.103.0/poqm/{lang}/kcoreaddons5_qt.po"],
    ),
    (
        "gettext-examples",
        "0.23.1-2",
        "trixie",
        "many (c, sh, perl-brace, python, qt, kde, php, java, ...)",
        "g/gettext/gettext_0.23.1.orig.tar.xz",
        "c1f97a72a7385b7e71dd07b5fea6cdaf12c9b88b564976b23bd8c11857af2970",
        [
            "gettext-0.23.1/gettext-tools/examples/po/{lang}.po",
            "gettext-0.23.1/gettext-tools/examples/po/gettext-examples.pot",
        ],
    ),
    (
        "mikutter",
        "5.1.0+dfsg-1",
        "trixie",
        "Ruby (ruby-format added; Japanese msgids)",
        "m/mikutter/mikutter_5.1.0+dfsg.orig.tar.xz",
        "27a00a1911d681ef3dcd2495814122a0f2415c050f1c65f7d8c79a14be72bcd8",
        ["mikutter-5.1.0+dfsg/plugin/*/po/{lang}/*.po"],
    ),
]
RUBY_DIRECTIVE = re.compile(
    r"%(?:\{\w+\}|<\w+>[-+ #0]*\d*(?:\.\d+)?[a-zA-Z]|[-+ #0]*\d*(?:\.\d+)?[sdifgexXobc])"
)


# ---------------------------------------------------------------------------------------------- fetch


def download(path: str, sha256: str, dest: Path) -> bytes:
    if dest.exists() and hashlib.sha256(dest.read_bytes()).hexdigest() == sha256:
        return dest.read_bytes()
    for base in (POOL, SNAPSHOT):
        try:
            with urllib.request.urlopen(base + path.replace("+", "%2b"), timeout=120) as r:
                data = r.read()
        except OSError as exc:
            print(f"  {base + path}: {exc}", file=sys.stderr)
            continue
        if hashlib.sha256(data).hexdigest() != sha256:
            sys.exit(f"{base + path}: sha256 differs from {sha256}")
        dest.write_bytes(data)
        return data
    sys.exit(f"{path}: not found at {POOL} nor {SNAPSHOT}")


def add_ruby_flags(data: bytes) -> tuple[bytes, int]:
    """`#, ruby-format` on every entry whose msgid holds a Ruby format directive (xgettext's rule for
    Ruby strings), the rest of the file as it was; the count."""
    out, added = [], 0
    for block in re.split(rb"(\n\n+)", data):
        text = block.decode("utf-8")
        msgid = re.search(r'^msgid ((?:"(?:[^"\\]|\\.)*"\s*)+)', text, re.M)
        if (
            msgid
            and RUBY_DIRECTIVE.search(msgid[1])
            and "ruby-format" not in text
            and not text.startswith("#~")
        ):
            lines = text.split("\n")
            i = next(
                n
                for n, line in enumerate(lines)
                if not line.startswith("#") or line.startswith("#,") or line.startswith("#|")
            )
            if lines[i].startswith("#,"):
                lines[i] += ", ruby-format"
            else:
                lines.insert(i, "#, ruby-format")
            text, added = "\n".join(lines), added + 1
        out.append(text.encode("utf-8"))
    return b"".join(out), added


def fetch(args: argparse.Namespace) -> None:
    (WORK / "src").mkdir(parents=True, exist_ok=True)
    manifest = []
    for package, version, suite, family, path, sha256, patterns in SOURCES:
        data = download(path, sha256, WORK / "src" / Path(path).name)
        wanted = [
            re.compile(
                re.escape(p).replace(r"\{lang\}", f"(?P<lang>{'|'.join(LANGS)})").replace(r"\*", "[^/]*")
                + "$"
            )
            for p in patterns
        ]
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            for member in tar:
                match = next((m for w in wanted if (m := w.match(member.name))), None)
                if not member.isfile() or match is None:
                    continue
                body = tar.extractfile(member).read()  # type: ignore[union-attr]
                lang = match.groupdict().get("lang") or ""
                note = ""
                if package == "mikutter":
                    body, n = add_ruby_flags(body)
                    note = f"#, ruby-format added to {n} entries"
                plugin = member.name.split("/")[2] + "-" if package == "mikutter" else ""
                local = (
                    WORK / "corpus" / package / (plugin + (f"{lang}.po" if lang else Path(member.name).name))
                )
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(body)
                manifest.append(
                    {
                        "package": package,
                        "version": version,
                        "suite": suite,
                        "family": family,
                        "tarball": POOL + path,
                        "tarball_sha256": sha256,
                        "path": member.name,
                        "file": str(local.relative_to(WORK)),
                        "lang": lang,
                        "sha256": hashlib.sha256(body).hexdigest(),
                        "note": note,
                    }
                )
        print(
            f"{package} {version}: {sum(m['package'] == package for m in manifest)} catalogs", file=sys.stderr
        )
    (WORK / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")


# ----------------------------------------------------------------------------------------- fake models

#: what a fake model treats as a placeholder (broader than mtkit's on purpose: Qt/KDE %1, Ruby %{x})
TOKEN = re.compile(
    r"%<\w+>|%(?:\([^)]*\)|\{\w+\})?[-+ #0']*(?:\d+\$)?(?:\d+|\*)?(?:\.(?:\d+|\*))?"
    r"(?:hh|h|ll|l|L|q|j|z|t)?[a-zA-Z%]|%\d+|%\{\w+\}|\{[^{}\s]*\}|\$\{?\w+\}?|</?\w[^<>]*>"
    r"|&#?\w+;|\\[\\ntr\"]|[\\%$&{}<>]"
)
MARKS = {
    "de": str.maketrans("aouAOU", "äöüÄÖÜ"),
    "ru": str.maketrans("aekmopcxyABEKMHOPCTXy", "аекморсхуАВЕКМНОРСТХу"),
    "pl": str.maketrans("aeoszlcn", "ąęóśżłćń"),
    "cs": str.maketrans("aeiouyrszcn", "áěíóůýřšžčň"),
}


def split_tokens(line: str) -> list[tuple[bool, str]]:
    """``line`` as (is a placeholder-like token, text) pieces, the whitespace left in the word pieces."""
    out, at = [], 0
    for m in TOKEN.finditer(line):
        if m.start() > at:
            out.append((False, line[at : m.start()]))
        out.append((True, m[0]))
        at = m.end()
    if at < len(line):
        out.append((False, line[at:]))
    return out


def fake_line(line: str, lang: str) -> str:
    """Every token where it was; the words between two tokens in reverse order, letters marked."""
    out = []
    for is_token, text in split_tokens(line):
        if is_token:
            out.append(text)
            continue
        parts = re.split(r"(\S+)", text)
        words = parts[1::2][::-1]
        parts[1::2] = [w.translate(MARKS.get(lang, MARKS["de"])) for w in words]
        out.append("".join(parts))
    return "".join(out)


def hostile_line(line: str, lang: str) -> str:
    """fake_line, then on some strings one placeholder dropped, duplicated, swapped or invented."""
    text = fake_line(line, lang)
    roll = zlib.crc32(line.encode("utf-8")) % 10
    pieces = split_tokens(text)
    tokens = [n for n, (is_token, t) in enumerate(pieces) if is_token and len(t) > 1]
    if roll == 0 and tokens:  # drop the first
        pieces[tokens[0]] = (True, "")
    elif roll == 1 and tokens:  # duplicate the last
        pieces.append((True, " " + pieces[tokens[-1]][1]))
    elif roll == 2 and len(tokens) >= 2 and pieces[tokens[0]][1] != pieces[tokens[-1]][1]:  # swap two
        a, b = tokens[0], tokens[-1]
        pieces[a], pieces[b] = pieces[b], pieces[a]
    elif roll == 3:  # invent one of another family
        pieces.append((True, " " + ("%s", "%1", "%{x}", "{0}", "<b>", "%d")[zlib.crc32(text.encode()) % 6]))
    elif roll == 4:  # a stray percent sign (msgfmt reads "% d" as a directive in c-format)
        pieces.append((True, " 100% done"))
    return "".join(t for _, t in pieces)


def fake_model(kind: str, lang: str) -> Callable[[list[str]], list[str]]:
    line_fn = fake_line if kind == "fake" else hostile_line
    return lambda lines: [line_fn(line, lang) for line in lines]


# ------------------------------------------------------------------------------------------ catalogs


def blank(data: bytes) -> bytes:
    """Every msgstr/msgstr[n] of an active entry emptied, the header's kept; every other line as it was."""
    out, skipping, header_seen, in_header = [], False, False, False
    lines = data.split(b"\n")
    for n, line in enumerate(lines):
        if skipping and line.startswith(b'"'):
            continue
        skipping = False
        if line.startswith(b"msgid ") and not header_seen:
            header_seen = True
            nxt = lines[n + 1] if n + 1 < len(lines) else b""
            in_header = line.strip() == b'msgid ""' and nxt.startswith(b"msgstr")
        elif line.startswith(b"msgid "):
            in_header = False
        m = re.match(rb"(msgstr(?:\[\d+\])?)\s", line)
        if m and not in_header:
            out.append(m[1] + b' ""')
            skipping = True
            continue
        out.append(line)
    return b"\n".join(out)


def entries(path: Path) -> dict:
    import polib

    return {
        (e.msgctxt, e.msgid): e for e in polib.pofile(str(path), wrapwidth=0) if e.msgid and not e.obsolete
    }


def blocks(data: bytes) -> list[bytes]:
    return [b for b in re.split(rb"\n[ \t]*\n", data.strip(b"\n")) if b.strip()]


def msgfmt_errors(path: Path) -> tuple[int, list[str]]:
    run = subprocess.run(["msgfmt", "--check", "-o", "/dev/null", str(path)], capture_output=True, text=True)
    lines = [line for line in run.stderr.splitlines() if "msgfmt: found" not in line]
    found = re.search(r"found (\d+) fatal error", run.stderr)
    return (int(found[1]) if found else (0 if run.returncode == 0 else max(1, len(lines)))), lines


def translate_api(data: bytes, name: str, lang: str, fake: Callable) -> tuple[bytes, list[str], str, str]:
    """translate_document's bytes API; while it is not there yet, HEAD's text path (read_catalog,
    translate_catalog, write_catalog) as translate_document ran it."""
    from mtkit.formats.documents import translate_document
    from mtkit.formats.gettext import po

    if hasattr(po, "translate_catalog_bytes"):
        result = translate_document(
            data, name, "po", lang, plain=fake, constrained=None, retranslate=False, fuzzy=False
        )
        return result.data, result.left, result.summary, "translate_document(bytes)"
    from functools import partial

    from mtkit.placeholders.strings import translate_strings

    text = data.decode("utf-8")
    catalog = po.read_catalog(text, name)
    strings = partial(translate_strings, translate=fake, constrained=None, accelerators="_&~")
    report = po.translate_catalog(catalog, name, strings, lang, False, False)
    return po.write_catalog(catalog, text, report).encode("utf-8"), report.left, "", "HEAD text path (shim)"


def translate_model(
    src: Path, out: Path, lang: str, args: argparse.Namespace
) -> tuple[bytes, list[str], str, str]:
    cmd = [
        sys.executable,
        "-m",
        "mtkit",
        "translate",
        "-m",
        args.model,
        "-i",
        str(src),
        "-o",
        str(out),
        "--no-fuzzy",
        *(["--tgt-lang", lang] if args.tgt_lang_flag else []),
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if run.returncode != 0:
        raise RuntimeError(run.stderr.strip()[-800:])
    left = [
        line for line in run.stderr.splitlines() if "left untranslated" in line and ":" in line.split()[0]
    ]
    summary = next((line for line in run.stderr.splitlines() if " entries translated" in line), "")
    return out.read_bytes(), left, summary, "mtkit translate --no-fuzzy"


def check_one(item: dict, lang: str, kind: str, args: argparse.Namespace) -> dict:
    src = WORK / item["file"]
    out_dir = WORK / "out" / kind / item["package"]
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = src.name.rsplit(".", 1)[0]
    blank_path = out_dir / (f"{stem}.blank.po" if src.suffix == ".po" else f"{stem}.{lang}.pot")
    out_path = out_dir / f"{stem}.{lang}.{kind}.po"
    original = src.read_bytes()
    data = blank(original) if src.suffix == ".po" else original
    blank_path.write_bytes(data)
    row = {
        "package": item["package"],
        "family": item["family"],
        "file": item["file"],
        "lang": lang,
        "kind": kind,
    }
    started = time.perf_counter()
    try:
        if kind == "model":
            written, left, summary, api = translate_model(blank_path, out_path, lang, args)
        else:
            written, left, summary, api = translate_api(
                data, str(blank_path.relative_to(WORK)), lang, fake_model(kind, lang)
            )
    except Exception as exc:  # noqa: BLE001 - a refused catalog is a result
        row.update(error=f"{type(exc).__name__}: {exc}"[:600])
        return row
    out_path.write_bytes(written)
    row.update(api=api, seconds=round(time.perf_counter() - started, 2), summary=summary)
    before, after = entries(blank_path), entries(out_path)
    todo = [k for k, e in before.items() if not e.msgstr and not any(e.msgstr_plural.values())]
    translated = [k for k in todo if k in after and (after[k].msgstr or any(after[k].msgstr_plural.values()))]
    nplurals = re.search(r"nplurals\s*=\s*(\d+)", plural_forms(out_path))
    wrong_forms = [
        k
        for k in translated
        if after[k].msgid_plural and nplurals and len(after[k].msgstr_plural) != int(nplurals[1])
    ]
    meta_changed = [k for k in translated if k in after and _meta(before[k]) != _meta(after[k])]
    # untranslated entries (and comments, obsolete entries): their blocks byte for byte in the output
    out_blocks = Counter(blocks(written))
    changed = []
    for block in blocks(data)[1:]:  # the header may be completed (Language, Plural-Forms)
        if out_blocks[block]:
            out_blocks[block] -= 1
            continue
        key = _key(block)
        if key not in translated:
            changed.append(key)
    errors, messages = msgfmt_errors(out_path)
    row.update(
        entries_in=len(before),
        entries_out=len(after),
        lost=len(set(before) - set(after)),
        added=len(set(after) - set(before)),
        to_translate=len(todo),
        translated=len(translated),
        left=len(left),
        left_lines=left[:50],
        msgfmt_errors=errors,
        msgfmt_messages=messages[:30],
        msgfmt_errors_original=msgfmt_errors(src)[0] if src.suffix == ".po" else None,
        msgfmt_errors_blank=msgfmt_errors(blank_path)[0],
        untranslated_blocks_changed=len(changed),
        changed_keys=[list(k) for k in changed[:10]],
        translated_meta_changed=len(meta_changed),
        plural_forms_wrong=len(wrong_forms),
        flags=dict(Counter(f for e in before.values() for f in e.flags if f.endswith("format"))),
    )
    return row


def plural_forms(path: Path) -> str:
    import polib

    return polib.pofile(str(path)).metadata.get("Plural-Forms", "")


def _meta(e) -> tuple:  # noqa: ANN001
    return (
        e.msgctxt,
        e.msgid,
        e.msgid_plural,
        e.comment,
        e.tcomment,
        e.occurrences,
        [f for f in e.flags if f != "fuzzy"],
        e.previous_msgid,
        e.previous_msgctxt,
    )


def _key(block: bytes) -> tuple:
    import polib

    try:
        found = [e for e in polib.pofile(block.decode("utf-8"), wrapwidth=0) if e.msgid]
    except Exception:  # noqa: BLE001
        return ("?", block[:60].decode("utf-8", "replace"))
    return (found[0].msgctxt, found[0].msgid) if found else ("comment", block[:60].decode("utf-8", "replace"))


def check(args: argparse.Namespace) -> None:
    manifest = json.loads((WORK / "manifest.json").read_text(encoding="utf-8"))
    if args.only:
        manifest = [m for m in manifest if m["package"] in args.only]
    kinds = ["model"] if args.model else args.kinds
    rows = []
    for item in manifest:
        for lang in [item["lang"]] if item["lang"] else list(args.pot_langs):
            if args.langs and lang not in args.langs:
                continue
            for kind in kinds:
                row = check_one(item, lang, kind, args)
                rows.append(row)
                print(
                    f"{row['kind']:8} {row['file']:60} {lang}: "
                    + (
                        row.get("error")
                        or f"{row['translated']}/{row['to_translate']} translated, "
                        f"{row['left']} left, lost {row['lost']}, msgfmt {row['msgfmt_errors']}, "
                        f"changed {row['untranslated_blocks_changed']}"
                    ),
                    file=sys.stderr,
                    flush=True,
                )
    results = ROOT / "bench/results"
    results.mkdir(exist_ok=True)
    path = (
        Path(args.json)
        if args.json
        else results / ("catalogs.json" if not args.model else "catalogs_model.json")
    )
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "mtkit"], capture_output=True, text=True, cwd=ROOT
    ).stdout.split("\n")
    path.write_text(
        json.dumps(
            {"commit": head, "mtkit_changed": [d for d in dirty if d], "rows": rows, "manifest": manifest},
            indent=1,
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    print(table(rows))


def table(rows: list[dict]) -> str:
    """One line per package, language and model, the catalogs summed (mikutter's 23 plugins one line)."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        kind = "pot" if r["file"].endswith(".pot") else "po"
        groups.setdefault((r["package"], r["lang"], kind, r["kind"]), []).append(r)
    cols = (
        "entries_in",
        "lost",
        "translated",
        "left",
        "msgfmt_errors",
        "untranslated_blocks_changed",
        "translated_meta_changed",
        "plural_forms_wrong",
    )
    head = (
        "| package | family | catalog | lang | model | files | entries | lost | translated | left | "
        "msgfmt errors | untranslated bytes changed | translated metadata changed | wrong plural forms |"
    )
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    for (package, lang, kind, model), rs in groups.items():
        errs = [r for r in rs if "error" in r]
        sums = [sum(r.get(c, 0) for r in rs if "error" not in r) for c in cols]
        out.append(
            f"| {package} | {rs[0]['family']} | {kind} | {lang} | {model} | {len(rs)}"
            + (f" ({len(errs)} refused)" if errs else "")
            + " | "
            + " | ".join(map(str, sums))
            + " |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("fetch", help="download the sources, take their catalogs out (bench/work/catalogs)")
    c = sub.add_parser("check", help="translate every catalog (fake models or --model) and measure")
    c.add_argument("--model", help="a trained model or export: `mtkit translate -m DIR --no-fuzzy`")
    c.add_argument(
        "--tgt-lang",
        dest="tgt_lang_flag",
        action="store_true",
        help="with --model: pass --tgt-lang (a multilingual model)",
    )
    c.add_argument("--kinds", nargs="+", default=["fake", "hostile"], choices=("fake", "hostile"))
    c.add_argument(
        "--pot-langs", nargs="+", default=["de", "ru"], help="the languages a .pot is translated to"
    )
    c.add_argument("--only", nargs="+", help="these packages alone")
    c.add_argument("--langs", nargs="+", help="these target languages alone (a model's own, with --model)")
    c.add_argument("--json", help="where the JSON goes (default bench/results/catalogs.json)")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    fetch(args) if args.command == "fetch" else check(args)


if __name__ == "__main__":
    main()
