"""XLIFF 1.2 and 2.0, the CAT tools' exchange format: the targets a translator still has to write are
filled with machine translations marked as such; everything else comes back byte for byte.

Which units are filled:
- 1.2: a ``<trans-unit>`` with no ``<target>``, an empty one, or one whose ``state`` is ``new`` or
  ``needs-translation``. The target written gets ``state="needs-review-translation"`` and
  ``state-qualifier="mt-suggestion"``: the spec's own words for "a machine's suggestion, to review",
  which OmegaT, Okapi, memoQ and Trados import as unconfirmed, never as done.
- 2.0: a ``<segment>`` with no ``<target>``, an empty one, or ``state="initial"``. The segment gets
  ``state="translated"`` (2.0 has no state for "to review": initial, translated, reviewed, final) and
  ``subState="mtkit:mt"``, the spec's place for a tool's own finer state, which says it was a machine.
- Left as they are: ``translate="no"`` units (or of their group or file), 1.2's ``approved="yes"``
  and ``final``/``signed-off`` targets, 2.0's ``final`` segments; other existing targets unless
  ``retranslate`` (then every target but the signed-off ones is written again).
- A 1.2 unit segmented by ``<seg-source>`` gets each ``<mrk mtype="seg">`` translated inside a copy
  of the segmented source, so its target has the same segments.

Inline codes are kept with their ids (formats/interchange/xliff_inline.py); a translation that loses,
doubles or unnests one leaves its unit as it was, reported. The file's target language is added where missing
(1.2 ``target-language`` on each ``<file>``, 2.0 ``trgLang`` on ``<xliff>``); one naming another
language than the model's is refused. The file is read as written (formats/xml/markup.py) and each change
spliced into its bytes; its encoding (UTF-8, UTF-16 with a BOM, what its declaration names) and BOM are
kept. Ill-formed XML is refused in one line naming the file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mtkit.errors import ConfigError, DataError
from mtkit.formats.captions import subtitle_text
from mtkit.formats.documents import DocumentJob, DocumentResult
from mtkit.formats.interchange.xliff_inline import labelled_content
from mtkit.formats.xml import markup
from mtkit.formats.xml.markup import Node, Token
from mtkit.languages import is_language, same_language
from mtkit.placeholders.strings import placed_by_guess

_FILL_1 = frozenset(("new", "needs-translation"))
_SIGNED_1 = frozenset(("final", "signed-off"))
_MT_1 = {"state": "needs-review-translation", "state-qualifier": "mt-suggestion"}
_MT_2 = {"state": "translated", "subState": "mtkit:mt"}
_MT_REVIEW = "mtkit:mt-review"  # 2.0's subState of a unit whose placeholders were put by guessed position
#: where a target's content goes in a splice (a character no XML text holds)
CONTENT = "\x00"
#: characters XML 1.0 does not allow (a model may write one)
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass
class _Fill:
    """One target to write: the unit's line, the labelled strings to translate, and how the target's
    content is made of their translations (a template: the pieces between them, from the source)."""

    line: int
    strings: list[subtitle_text.Labelled]
    template: list[str]  # len(strings) + 1 pieces of source around the translations
    write: list[tuple[int, int, str]] = field(default_factory=list)  # splices, CONTENT where it goes


@dataclass
class _Report:
    units: int = 0
    translated: int = 0
    kept: int = 0
    left: list[str] = field(default_factory=list)
    review: list[str] = field(default_factory=list)  # translated units marked for review, and why


def translate_xliff(data: bytes, name: str, job: DocumentJob) -> DocumentResult:
    """An XLIFF 1.2 or 2.0 file (see the module docstring)."""
    text, encoding = markup.decode(data, name, xml=True)
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    body = text[len(bom):]
    problem = markup.xml_problem(body)
    if problem is not None:
        raise DataError(f"{name}:{problem[0]}: not well-formed XML: {problem[1]}")
    doc = _Document(body, name, job)
    out = bom + doc.translated()
    report = doc.report
    summary = (f"{name}: {report.translated} of {report.units} units translated, {report.kept} kept as "
               f"they were, {len(report.left)} left untranslated")
    return DocumentResult(encoding.encode(out), report.left + report.review, summary)


class _Document:
    def __init__(self, text: str, name: str, job: DocumentJob) -> None:
        self.text, self.name, self.job = text, name, job
        self.lines = markup.Lines(text)
        self.tokens: list[Token] = markup.tokenize(text, name, True)
        root = markup.build(self.tokens, text, True, frozenset())
        top = next((c for c in root.children if isinstance(c, Node)), None)
        if top is None or top.name != "xliff":
            raise DataError(f"{name}:1: not an XLIFF file: its root element is not <xliff>")
        self.version = 2 if top.attrs.get("version", "").startswith("2") else 1
        self.report = _Report()
        self.splices: dict[int, tuple[int, str]] = {}
        self.fills: list[_Fill] = []
        if self.version == 2:
            self._language(top, "trglang", "trgLang")
        self._visit(top, True)

    # --- where the targets are ----------------------------------------------------------------
    def _visit(self, node: Node, translate: bool) -> None:
        translate = node.attrs.get("translate", "yes" if translate else "no") != "no"
        if node.name == "file" and self.version == 1:
            self._language(node, "target-language", "target-language")
        if node.name == "trans-unit" and self.version == 1:
            self._unit_1(node, translate)
            return
        if node.name == "unit" and self.version == 2:
            for child in self._elements(node):
                if child.name == "segment":
                    self._segment_2(child, translate)
            return
        for child in self._elements(node):
            self._visit(child, translate)

    @staticmethod
    def _elements(node: Node, name: str = "") -> list[Node]:
        return [c for c in node.children if isinstance(c, Node) and (not name or c.name == name)]

    def _line(self, node: Node) -> int:
        return self.lines(self.tokens[node.start].start)

    def _language(self, node: Node, attr: str, written: str) -> None:
        want = self.job.tgt_lang.replace("_", "-")
        if not want:
            return
        have = node.attrs.get(attr, "")
        if not have:
            self._set_attributes(node, {written: want})
        elif not _same_language(have, want):
            raise DataError(f"{self.name}:{self._line(node)}: the file's target language is {have!r} but the "
                            f"model translates into {want!r}")

    def _unit_1(self, unit: Node, translate: bool) -> None:
        sources = self._elements(unit, "source")
        if not translate or not sources:
            return
        self.report.units += 1
        target = next(iter(self._elements(unit, "target")), None)
        state = target.attrs.get("state", "") if target else ""
        empty = target is None or not self._content(target).strip()
        signed = unit.attrs.get("approved") == "yes" or state in _SIGNED_1
        if not (empty or state in _FILL_1 or (self.job.retranslate and not signed)):
            self.report.kept += 1
            return
        segmented = next(iter(self._elements(unit, "seg-source")), None)
        fill = self._fill(segmented if segmented is not None else sources[0], segmented is not None)
        if fill is None:
            self.report.units -= 1
            return
        self._place_target(fill, target, segmented or sources[0], _MT_1)

    def _segment_2(self, segment: Node, translate: bool) -> None:
        source = next(iter(self._elements(segment, "source")), None)
        if not translate or source is None:
            return
        self.report.units += 1
        target = next(iter(self._elements(segment, "target")), None)
        state = segment.attrs.get("state", "")
        empty = target is None or not self._content(target).strip()
        if not (empty or state == "initial" or (self.job.retranslate and state != "final")):
            self.report.kept += 1
            return
        fill = self._fill(source, False)
        if fill is None:
            self.report.units -= 1
            return
        self._place_target(fill, target, source, {})
        fill.write.append(self._attribute_splice(segment, _MT_2))

    # --- what goes into them ------------------------------------------------------------------
    def _content(self, node: Node) -> str:
        if node.end is None:
            return ""
        return self.text[self.tokens[node.start].end:self.tokens[node.end].start]

    def _fill(self, source: Node, segmented: bool) -> _Fill | None:
        """The strings of ``source`` (each ``<mrk mtype="seg">`` of a segmented one) and the template
        its target is made of; None for a source with nothing in it."""
        if not self._content(source).strip():
            return None
        if not segmented:
            fill = _Fill(self._line(source), [labelled_content(source.children, self.text, self.tokens)],
                         ["", ""])
            self.fills.append(fill)
            return fill
        strings, template, at = [], [], self.tokens[source.start].end
        for mrk in self._elements(source, "mrk"):
            if mrk.attrs.get("mtype") != "seg" or mrk.end is None:
                continue
            template.append(self.text[at:self.tokens[mrk.start].end])
            strings.append(labelled_content(mrk.children, self.text, self.tokens))
            at = self.tokens[mrk.end].start
        template.append(self.text[at:self.tokens[source.end].start])  # type: ignore[index]
        if not strings:
            return None
        self.fills.append(_Fill(self._line(source), strings, template))
        return self.fills[-1]

    def _place_target(self, fill: _Fill, target: Node | None, after: Node, attrs: dict[str, str]) -> None:
        """Where the target's content goes: into the target there is, or a new one after ``after``."""
        if target is not None and target.end is not None:
            inner = (self.tokens[target.start].end, self.tokens[target.end].start)
            fill.write.append((*inner, CONTENT))
            if attrs:
                fill.write.append(self._attribute_splice(target, attrs))
            return
        if target is not None:  # <target/>
            tok = self.tokens[target.start]
            head = re.sub(r"\s*/>$", ">", markup.with_attributes(self.text[tok.start:tok.end], attrs))
            fill.write.append((tok.start, tok.end, f"{head}{CONTENT}</{_qname(head)}>"))
            return
        start = self.tokens[after.start]
        name = _qname(self.text[start.start:start.end]).rsplit("source", 1)
        qname = "target".join(name) if len(name) == 2 else "target"
        before = self.text[:start.start]
        indent = before[before.rfind("\n") + 1:]
        newline = "\r\n" if before.endswith("\r\n" + indent) else "\n"
        lead = newline + indent if before.rfind("\n") >= 0 and not indent.strip() else ""
        head = markup.with_attributes(f"<{qname}>", attrs)
        end = self.tokens[after.end if after.end is not None else after.start].end
        fill.write.append((end, end, f"{lead}{head}{CONTENT}</{qname}>"))

    def _attribute_splice(self, node: Node, attrs: dict[str, str]) -> tuple[int, int, str]:
        tok = self.tokens[node.start]
        return tok.start, tok.end, markup.with_attributes(self.text[tok.start:tok.end], attrs)

    def _set_attributes(self, node: Node, attrs: dict[str, str]) -> None:
        start, end, new = self._attribute_splice(node, attrs)
        self.splices[start] = (end, new)

    # --- translating and writing --------------------------------------------------------------
    def translated(self) -> str:
        wanted = [s for fill in self.fills for s in fill.strings]
        outcomes = iter(self.job.strings([s.string for s in wanted]) if wanted else [])
        for fill in self.fills:
            parts, problem, guessed = [], "", False
            for labelled in fill.strings:
                outcome = next(outcomes)
                guessed = guessed or (outcome.text is not None and placed_by_guess(outcome))
                text = outcome.text
                problem = problem or (outcome.problem if text is None
                                      else subtitle_text.check(labelled.string, text, labelled.tags))
                if not problem and _NOT_XML.search(text or ""):
                    problem = f"the translation has a character XML does not allow: {text!r}"
                parts.append("" if problem else subtitle_text.written(text or "", labelled.tags, True))
            if problem:
                self.report.left.append(f"{self.name}:{fill.line}: left untranslated: {problem}")
                continue
            self.report.translated += 1
            content = fill.template[0] + "".join(p + t for p, t in zip(parts, fill.template[1:], strict=True))
            for start, end, new in fill.write:
                if guessed:  # 1.2's state already asks for review; 2.0 says it in mtkit's subState
                    new = new.replace(_MT_2["subState"], _MT_REVIEW)
                self.splices[start] = (end, new.replace(CONTENT, content))
            if guessed:
                self.report.review.append(f"{self.name}:{fill.line}: placeholders put by guessed position: "
                                          "marked for review")
        out, at = [], 0
        for start in sorted(self.splices):
            end, new = self.splices[start]
            out += [self.text[at:start], new]
            at = end
        written = "".join(out) + self.text[at:]
        problem = markup.xml_problem(written)
        if problem is not None:  # never written: a fault of this module, not of the file
            raise DataError(f"{self.name}: the translated file would not be well-formed XML (line "
                            f"{problem[0]}: {problem[1]}); nothing written")
        return written


def _same_language(have: str, want: str) -> bool:
    """Whether the file's language code and the model's name the same language ('deu' and 'de-DE' do,
    'deu' and 'fr' do not: `mtkit.languages`); a code that is no language code (a test model's "tgt")
    cannot be compared, and is taken as the same."""
    try:
        return same_language(have, want) or not is_language(have)
    except ConfigError:
        return True


def _qname(tag: str) -> str:
    return re.match(r"<([^\s/>]+)", tag)[1]  # type: ignore[index]
