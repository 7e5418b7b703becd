"""Placeholders, catalogs and speed of `mtkit translate --format po` / `--placeholders` (docs/notebook,
"Files and placeholders"). Three measurements with one model:

1. the deb-en-de test lines whose English holds a placeholder (printf, brace, dollar, tag, entity or a
   written ``\\n``): translated plainly and with ``--placeholders``; how many keep every placeholder (as a
   multiset, printf order too), how many are left untranslated, and chrF of both against the references
   (`mtkit score`, paired bootstrap);
2. real gettext catalogs of Debian packages outside the corpus (the German .mo of grep, sed, diffutils,
   nano and apt: `apt-get download`, `dpkg-deb -x`, `msgunfmt`), flagged c-format where the msgid holds
   a printf directive as xgettext flags them, their msgstrs blanked: translated, checked with
   `msgfmt --check --use-fuzzy`, scored against the human msgstrs;
3. a catalog of 5,000 entries (training source lines) against the same lines as plain text: whole
   commands, greedy, same model (``--speed-model``, e.g. the int8 export users run on a CPU) and
   threads, in one run.

    python bench/studies/formats.py --model recipes/deb-en-de/work/transformer --data ../shared/data/deb-en-de
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import polib

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from mtkit.placeholders.strings import kept, placeholders  # noqa: E402

PACKAGES = ("grep", "sed", "diffutils", "nano", "apt")


def mtkit(*args: str) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", "mtkit", *args], capture_output=True, text=True, cwd=ROOT)
    if run.returncode != 0:
        sys.exit(f"mtkit {' '.join(args)} failed:\n{run.stderr}")
    return run


def has_placeholder(line: str) -> bool:
    return bool(placeholders(line)) or "\\n" in line


def test_lines(args: argparse.Namespace, work: Path) -> dict:
    src = (Path(args.data) / "test.en").read_text(encoding="utf-8").splitlines()
    ref = (Path(args.data) / "test.de").read_text(encoding="utf-8").splitlines()
    chosen = [n for n, line in enumerate(src) if has_placeholder(line)]
    (work / "ph.en").write_text("".join(src[n] + "\n" for n in chosen), encoding="utf-8")
    (work / "ph.de").write_text("".join(ref[n] + "\n" for n in chosen), encoding="utf-8")
    result: dict = {"lines": len(chosen),
                    "references_keep": sum(not kept(src[n], ref[n]) for n in chosen)}
    for name, extra in (("plain", []), ("placeholders", ["--placeholders"])):
        out = work / f"ph.{name}.de"
        run = mtkit("translate", "-m", args.model, "-i", str(work / "ph.en"), "-o", str(out), "--beam", "5",
                    *extra)
        hyp = out.read_text(encoding="utf-8").splitlines()
        result[name] = {"keep": sum(not kept(src[n], h) for n, h in zip(chosen, hyp, strict=True)),
                        "left": len(re.findall(r"left untranslated", run.stderr))}
    score = mtkit("score", "--hyp", str(work / "ph.plain.de"), "--hyp", str(work / "ph.placeholders.de"),
                  "--ref", str(work / "ph.de"), "--metrics", "chrf,bleu", "--bootstrap", "1000", "--json")
    result["scores"] = json.loads(score.stdout)
    return result


def catalogs(args: argparse.Namespace, work: Path) -> dict:
    debs = work / "debs"
    debs.mkdir(exist_ok=True)
    packages = args.packages.split(",") if args.packages else list(PACKAGES)
    subprocess.run(["apt-get", "download", *packages], cwd=debs, check=True, capture_output=True)
    results = {}
    for package in packages:
        deb = next(debs.glob(f"{package}_*.deb"))
        subprocess.run(["dpkg-deb", "-x", str(deb), str(debs / "x")], check=True)
        mo = debs / "x" / "usr/share/locale/de/LC_MESSAGES" / f"{package}.mo"
        human = work / f"{package}.human.po"
        subprocess.run(["msgunfmt", str(mo), "-o", str(human)], check=True)
        catalog = polib.pofile(str(human), wrapwidth=79)
        for entry in catalog:
            if any(p.startswith("%") and p != "%%" for p in placeholders(entry.msgid)):
                entry.flags.append("c-format")
        catalog.save(str(human))
        blank = polib.pofile(str(human), wrapwidth=79)
        for entry in blank:
            if entry.msgid:
                entry.msgstr = ""
                entry.msgstr_plural = dict.fromkeys(entry.msgstr_plural, "")
        blank_path, out = work / f"{package}.blank.pot", work / f"{package}.mt.po"
        blank.save(str(blank_path))
        run = mtkit("translate", "-m", args.model, "-i", str(blank_path), "-o", str(out), "--beam", "5")
        check = subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(out)],
                               capture_output=True, text=True)
        mt = {(e.msgctxt, e.msgid): e for e in polib.pofile(str(out))}
        pairs = [(mt[(e.msgctxt, e.msgid)].msgstr, e.msgstr) for e in polib.pofile(str(human))
                 if e.msgid and not e.msgid_plural and e.msgstr]
        (work / f"{package}.hyp").write_text("".join(" ".join(h.split()) + "\n" for h, _ in pairs))
        (work / f"{package}.ref").write_text("".join(" ".join(r.split()) + "\n" for _, r in pairs))
        score = mtkit("score", "--hyp", str(work / f"{package}.hyp"), "--ref", str(work / f"{package}.ref"),
                      "--metrics", "bleu,chrf", "--json")
        summary = re.search(r"(\d+) of (\d+) entries translated.*?(\d+) left untranslated", run.stderr)
        results[package] = {
            "entries": int(summary[2]), "translated": int(summary[1]), "left": int(summary[3]),
            "c_format": sum("c-format" in e.flags for e in catalog),
            "msgfmt_check": check.returncode == 0, "msgfmt_stderr": check.stderr.strip()[-500:],
            "scores": json.loads(score.stdout)["systems"][0]["scores"],
        }
    return results


def speed(args: argparse.Namespace, work: Path) -> dict:
    lines, seen = [], set()
    for line in subprocess.run(["zcat", str(Path(args.data) / "train.en.gz")], capture_output=True,
                               text=True, check=True).stdout.splitlines():
        if line.strip() and line not in seen and len(line) < 300:
            seen.add(line)
            lines.append(line)
        if len(lines) == args.entries:
            break
    text = work / "speed.en"
    text.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    catalog = polib.POFile(wrapwidth=79)
    catalog.metadata = {"Content-Type": "text/plain; charset=UTF-8", "Language": "de",
                        "Plural-Forms": "nplurals=2; plural=(n != 1);"}
    for line in lines:
        catalog.append(polib.POEntry(msgid=line, msgstr=""))
    catalog.save(str(work / "speed.pot"))
    times = {}
    for name, source in (("plain lines", text), ("catalog", work / "speed.pot"),
                         ("plain lines again", text)):
        start = time.perf_counter()
        mtkit("translate", "-m", args.speed_model or args.model, "-i", str(source),
              "-o", str(work / f"speed.out{source.suffix}"), "--greedy")
        times[name] = round(time.perf_counter() - start, 1)
    return {"entries": len(lines), "seconds": times}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/deb-en-de"))
    parser.add_argument("--work", default=str(ROOT / "bench/work/formats"))
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--speed-model", help="the model of the speed step (default --model), e.g. an export")
    parser.add_argument("--only", choices=("lines", "catalogs", "speed"))
    parser.add_argument("--packages", help="the catalogs of these packages only (comma-separated; default "
                        + ",".join(PACKAGES) + ")")
    args = parser.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if shutil.which("msgfmt") is None:
        sys.exit("needs GNU gettext (msgfmt, msgunfmt): apt-get install gettext")
    report = {}
    for name, step in (("lines", test_lines), ("catalogs", catalogs), ("speed", speed)):
        if args.only in (None, name):
            report[name] = step(args, work)
            print(json.dumps({name: report[name]}, indent=1), flush=True)
    (work / "report.json").write_text(json.dumps(report, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
