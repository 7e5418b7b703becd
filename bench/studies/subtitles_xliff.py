"""Real subtitle and XLIFF files through mtkit's document path (issue #52): every file reopens in an
independent library with the same cues or units, timings and ids; no byte outside the text written
changes; no text is lost; malformed files are refused in one line.

    python bench/studies/subtitles_xliff.py fetch    # sources -> bench/work/subtitles_xliff (manifest.json)
    python bench/studies/subtitles_xliff.py check    # fake models, no trained model needed
    python bench/studies/subtitles_xliff.py speed    # the document path alone on the largest files

`fetch` takes the test files of three subtitle libraries' source distributions from PyPI (pip
download: pysrt, srt, webvtt-py; SubRip in UTF-8, UTF-16/32 with BOMs, windows-1252, gb2312, files
meant to be invalid; WebVTT with styles, regions, notes, cue tags, YouTube's and Netflix's) and the
XLIFF 1.2 catalogs of three Debian packages of Symfony (apt-get download: validator, form,
security-core; 57 languages each), with their sha256 in the manifest; and XLIFF 2.0 files written by
translate-toolkit from the validator catalogs' English sources (no package here ships real 2.0
files).

`check` translates each file with two stand-in models, ``fake`` (words upper-cased and their order
reversed, tags kept as they are) and ``hostile`` (on some strings drops, doubles, reorders or invents
tags, or answers nothing), and measures: refused (one line) or not, and whether the independent
reader accepts the input; cues/units in and out; timings, numbers, identifiers and unit ids equal;
bytes outside cue text (or outside what XLIFF targets may gain) equal; cues with words that lost
them; cues or units translated and left. XLIFF files are checked as they are (their targets are
filled, so nothing is to translate: the file must come back byte for byte) and with ``retranslate``
(every target written again, inline codes checked per unit). Markdown on stdout, JSON in
bench/results/subtitles_xliff.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
WORK = ROOT / "bench/work/subtitles_xliff"
SDISTS = ("pysrt==1.1.2", "srt==3.5.3", "webvtt-py==0.6.0")
DEBS = ("php-symfony-validator", "php-symfony-form", "php-symfony-security-core")


def fetch() -> None:
    files = WORK / "files"
    files.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:", "--no-deps",
                        "--no-build-isolation", "-d", tmp, *SDISTS], check=True)
        for sdist in Path(tmp).glob("*.tar.gz"):
            with tarfile.open(sdist) as tar:
                for member in tar.getmembers():
                    if member.isfile() and member.name.endswith((".srt", ".vtt")):
                        target = files / sdist.name.split("-")[0] / Path(member.name).name
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(tar.extractfile(member).read())  # type: ignore[union-attr]
        subprocess.run(["apt-get", "download", *DEBS], cwd=tmp, check=True, capture_output=True)
        for deb in Path(tmp).glob("*.deb"):
            root = Path(tmp) / deb.stem
            subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
            for xlf in root.rglob("*.xlf"):
                target = files / deb.name.split("_")[0] / f"{xlf.parent.parent.parent.name}.{xlf.name}"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(xlf.read_bytes())
    made_xliff2(files)
    manifest = {str(p.relative_to(files)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(files.rglob("*")) if p.is_file()}
    (WORK / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    print(f"{len(manifest)} files in {files}")


def made_xliff2(files: Path) -> None:
    """XLIFF 2.0 files as translate-toolkit writes them (no real ones come in a package here): the
    English sources of the Debian validator catalogs, one 2.0 file per language, without targets."""
    from translate.storage import xliff as ttk_xliff
    from translate.storage import xliff2 as ttk_xliff2

    made = files / "xliff2-made"
    made.mkdir(exist_ok=True)
    for path in sorted((files / "php-symfony-validator").glob("*.xlf")):
        store = ttk_xliff2.Xliff2File()
        store.setsourcelanguage("en")
        for unit in ttk_xliff.xlifffile.parsestring(path.read_bytes()).units:
            store.addsourceunit(unit.source).setid(unit.getid().rsplit("\x04", 1)[-1])
        (made / path.name).write_bytes(bytes(store))


# --- stand-in models ---------------------------------------------------------------------------------
#: what the fake model keeps as it is: tags, entities, placeholders (printf, Symfony's %name%, braces)
_KEPT = r"(?:<[^>]*>|&#?\w+;|%\w+%|%[sd]|\{[^}]*\})+"


def fake(lines: list[str]) -> list[str]:
    """Words upper-cased in reverse order; tags, entities and placeholders kept where they are."""
    out = []
    for line in lines:
        words = re.split(r"(\s+)", line)
        text = [w for w in words if w.strip() and not re.fullmatch(_KEPT, w)]
        it = iter(reversed(text))
        out.append("".join(next(it).upper() if w.strip() and not re.fullmatch(_KEPT, w) else w
                           for w in words))
    return out


def hostile(seed: int):
    rng = random.Random(seed)

    def model(lines: list[str]) -> list[str]:
        out = []
        for line in fake(lines):
            parts = re.split(r"(<[^>]*>)", line)
            choice = rng.randrange(6)
            if choice == 0:
                parts = [p for p in parts if not p.startswith("<")]
            elif choice == 1:
                parts += ["<i>", "<x9/>"]
            elif choice == 2:
                rng.shuffle(parts)
            elif choice == 3:
                parts = [""]
            out.append("".join(parts))
        return out
    return model


# --- checks ------------------------------------------------------------------------------------------
def _skeleton(text: str, cues) -> list[str]:
    out, at = [], 0
    for line in re.findall(r"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+$", text):
        inside = any(start <= at < end for start, end in (c.span for c in cues))
        out.append("<text>" + line[len(line.rstrip("\r\n")):] if inside else line)
        at += len(line)
    return out


def _decoded(data: bytes) -> str:
    for bom, codec in ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe\x00\x00", "utf-32-le"),
                       (b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe", "utf-16-le"),
                       (b"\xfe\xff", "utf-16-be")):
        if data.startswith(bom):
            return data[len(bom):].decode(codec)
    return data.decode("utf-8")


def check_subtitle(path: Path, model, model_name: str) -> dict:
    import srt
    import webvtt

    from mtkit.errors import DataError
    from mtkit.formats.captions.subtitles import read_srt, read_vtt, translate_srt, translate_vtt
    from mtkit.formats.documents import DocumentJob

    vtt = path.suffix == ".vtt"
    data = path.read_bytes()
    row: dict = {"file": f"{path.parent.name}/{path.name}", "model": model_name}
    try:
        text = _decoded(data)
        before = webvtt.from_string(text) if vtt else list(srt.parse(text))
        row["library_reads_input"] = True
    except Exception as exc:  # noqa: BLE001 (whatever the library raises: it refuses the file)
        row["library_reads_input"], before = f"{type(exc).__name__}", None
    try:
        result = (translate_vtt if vtt else translate_srt)(data, path.name, DocumentJob("de", model))
    except DataError as exc:
        row["refused"] = str(exc)
        return row
    out = _decoded(result.data)
    after = webvtt.from_string(out) if vtt else list(srt.parse(out))
    key = ((lambda c: (c.identifier, c.start, c.end)) if vtt
           else (lambda c: (c.index, c.start, c.end, c.proprietary)))
    body = (lambda c: c.raw_text) if vtt else (lambda c: c.content)
    reader = read_vtt if vtt else read_srt
    row.update(cues_in=len(before) if before is not None else None, cues_out=len(after),
               keys_equal=before is not None and [key(c) for c in before] == [key(c) for c in after],
               other_bytes_equal=_skeleton(_decoded(data), reader(_decoded(data), "x"))
               == _skeleton(out, reader(out, "x")),
               bom_kept=result.data[:4] == data[:4],
               text_lost=sum(1 for a, b in zip(before or [], after, strict=False)
                             if re.search(r"[^\W\d_]", re.sub(r"<[^>]*>", "", body(a)))
                             and not re.search(r"[^\W\d_]", re.sub(r"<[^>]*>", "", body(b)))),
               tags_changed=sum((_tags(before or [], body) - _tags(after, body)).values())
               + sum((_tags(after, body) - _tags(before or [], body)).values()),
               tags_moved=sum(1 for a, b in zip(before or [], after, strict=False)
                              if _tags([a], body) != _tags([b], body)),
               summary=result.summary, left=len(result.left))
    return row


#: a styling tag, a WebVTT timestamp, an ASS override (text such as "2<3,5>1" is none)
_TAG = r"</?[A-Za-z][^<>]*>|<\d[\d:.,]*\d>|\{\\[^}]*\}"


def _tags(cues, body) -> Counter:
    """The styling tags and overrides of ``cues``, all together (a tag may move with its words to
    another cue of the same sentence)."""
    return Counter(t for c in cues for t in re.findall(_TAG, body(c)))


def _codes(content: str) -> Counter:
    return Counter(re.findall(r"<[^>]*>", content))


def _without_writes(text: str) -> str:
    text = re.sub(r"\s*<target\b[^>]*?(?:/>|>.*?</target>)", "", text, flags=re.S)
    return re.sub(r'\s(?:state|state-qualifier|subState|target-language|trgLang)="[^"]*"', "", text)


def check_xliff(path: Path, model, model_name: str, retranslate: bool) -> dict:
    from translate.storage import xliff as ttk_xliff
    from translate.storage import xliff2 as ttk_xliff2

    from mtkit.errors import DataError
    from mtkit.formats.documents import DocumentJob
    from mtkit.formats.interchange.xliff import translate_xliff

    data = path.read_bytes()
    lang = re.search(rb'target-language="([^"]+)"', data) or re.search(rb"\.(\w+)\.xlf$", path.name.encode())
    row: dict = {"file": f"{path.parent.name}/{path.name}", "model": model_name, "retranslate": retranslate}
    try:
        result = translate_xliff(data, path.name, DocumentJob(lang[1].decode() if lang else "de", model,
                                                              retranslate=retranslate))
    except DataError as exc:
        row["refused"] = str(exc)
        return row
    reader = ttk_xliff2.Xliff2File if b'version="2.0"' in data[:500] else ttk_xliff.xlifffile
    before, after = (reader.parsestring(d).units for d in (data, result.data))
    codes_changed = 0
    for unit in re.findall(r"<(?:trans-unit|segment)\b.*?</(?:trans-unit|segment)>", result.data.decode(),
                           flags=re.S):
        mine = "mt-suggestion" in unit or "mtkit:mt" in unit
        target = re.search(r"<target[^>]*>(.*?)</target>", unit, flags=re.S) if mine else None
        source = re.search(r"<source[^>]*>(.*?)</source>", unit, flags=re.S)
        codes_changed += bool(target and source and _codes(target[1]) != _codes(source[1]))
    row.update(units_in=len(before), units_out=len(after),
               ids_equal=[u.getid() for u in before] == [u.getid() for u in after],
               sources_equal=[u.source for u in before] == [u.source for u in after],
               identical=result.data == data,
               other_bytes_equal=_without_writes(result.data.decode()) == _without_writes(data.decode()),
               codes_changed=codes_changed,
               summary=result.summary, left=len(result.left))
    return row


def check() -> None:
    files = sorted((WORK / "files").rglob("*.*"))
    if not files:
        sys.exit(f"no files in {WORK / 'files'}: run `python {Path(__file__).name} fetch` first")
    rows = []
    for n, path in enumerate(files):
        for name, model in (("fake", fake), ("hostile", hostile(n))):
            if path.suffix in (".srt", ".vtt"):
                rows.append(check_subtitle(path, model, name))
            else:
                made = path.parent.name == "xliff2-made"  # no targets: retranslate would change nothing
                rows += [check_xliff(path, model, name, again)
                         for again in ((False,) if made else (False, True))]
    out = ROOT / "bench/results/subtitles_xliff.json"
    out.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(report(rows))


def report(rows: list[dict]) -> str:
    lines = ["| format | model | files | refused | reread, same cues/units and timings/ids "
             "| other bytes equal | text lost | tags/codes changed "
             "| cues whose tags moved to a neighbour of their sentence "
             "| translated | left |", "|" + " --- |" * 11]
    for fmt in (".srt", ".vtt", ".xlf", "2.0 .xlf"):
        for model in ("fake", "hostile"):
            for again in ((False, True) if fmt == ".xlf" else (False,) if fmt == "2.0 .xlf" else (None,)):
                mine = [r for r in rows if r["file"].endswith(fmt.split()[-1]) and r["model"] == model
                        and r.get("retranslate") == again
                        and r["file"].startswith("xliff2-made/") == fmt.startswith("2.0")]
                ok = [r for r in mine if "refused" not in r]
                same = sum(1 for r in ok if r.get("keys_equal", r.get("ids_equal")) and
                           r.get("cues_in", r.get("units_in")) == r.get("cues_out", r.get("units_out")))
                done = sum(int(re.search(r": (\d+) of", r["summary"])[1]) for r in ok)
                label = f"{fmt}{' retranslate' if again else ''}"
                lines.append(f"| {label} | {model} | {len(mine)} | {len(mine) - len(ok)} "
                             f"| {same} of {len(ok)} "
                             f"| {sum(1 for r in ok if r['other_bytes_equal'])} of {len(ok)} "
                             f"| {sum(r.get('text_lost', 0) for r in ok)} "
                             f"| {sum(r.get('tags_changed', r.get('codes_changed', 0)) for r in ok)} "
                             f"| {sum(r.get('tags_moved', 0) for r in ok) if 'xlf' not in fmt else '-'} "
                             f"| {done} | {sum(r['left'] for r in ok)} |")
    refused = sorted({(r["file"], r["refused"].split(": ", 1)[1][:70]) for r in rows if "refused" in r
                      and r["file"].endswith((".srt", ".vtt"))})
    lines += ["", "Refused files (in brackets: what the independent library does with the same input):"]
    verdicts = {r["file"]: r.get("library_reads_input") for r in rows}
    lines += [f"- {f}: {why} [{'read' if verdicts.get(f) is True else 'refused: ' + str(verdicts.get(f))}]"
              for f, why in refused]
    return "\n".join(lines)


def speed() -> None:
    """The document path alone, without a model (an upper-casing stand-in): CPU seconds for the largest
    WebVTT file and the largest XLIFF catalog, three rounds."""
    import time

    from mtkit.formats.captions.subtitles import translate_vtt
    from mtkit.formats.documents import DocumentJob
    from mtkit.formats.interchange.xliff import translate_xliff

    files = sorted((WORK / "files").rglob("*.*"), key=lambda p: p.stat().st_size)
    vtt = [p for p in files if p.suffix == ".vtt"][-1]
    xlf = [p for p in files if p.suffix == ".xlf" and p.parent.name != "xliff2-made"][-1]
    upper = lambda lines: [line.upper() for line in lines]  # noqa: E731
    for round_ in range(3):
        for path, translate, again in ((vtt, translate_vtt, False), (xlf, translate_xliff, True)):
            data = path.read_bytes()
            lang = re.search(rb'target-language="([^"]+)"', data)
            job = DocumentJob(lang[1].decode() if lang else "de", upper, retranslate=again)
            start = time.process_time()
            result = translate(data, path.name, job)
            print(f"round {round_}: {time.process_time() - start:.3f} CPU-s  {result.summary}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("fetch", "check", "speed"))
    {"fetch": fetch, "check": check, "speed": speed}[parser.parse_args().step]()
