"""Every documentation citation in the code resolves to a file and a numbered section in ``docs/``.

A citation is ``docs/<name>.md`` optionally followed by ``§<number>``, with follow-on numbers as in
"docs/probes.md §4.13, §11.11" or "§2.2–§2.6"; the cited file must exist and, for a number, have a
markdown heading that starts with it ("## 4.6 conservativeness", "## 1. The attacks").  Citations of
the working notes that are not in the repository (the upper-case note names) must not remain.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
THIS = pathlib.Path(__file__).resolve()

#: Where citations are collected (the code, plus the tests, the docs and the README for good measure).
CITING = ("jaxcert", "bridges", "benchmarks", "tests", "docs", "README.md")
SUFFIXES = {".py", ".md", ".txt", ".toml", ".json", ".cfg", ".yml", ".yaml"}

_NUM = r"(\d+(?:\.\d+)*)"
_CITE = re.compile(r"(?<![\w/])docs/([A-Za-z0-9_-]+)\.md")
_FIRST = re.compile(r"`{0,2}[\s#*]*§\s*" + _NUM)
# ", §11.11", " and §5", "–§2.6" (an en-dash range may drop the §: "§6.3–6.4")
_MORE = re.compile(r"\s*(?:(?:,|and|or)\s*§\s*|[–—]\s*§?\s*)" + _NUM)
#: Upper-case note names that used to be cited; built from parts so this file does not cite them itself.
_NOTES = ("PROBES", "ATTACKS", "DESIGN", "ENVIRONMENT")
_BARE = re.compile(r"(?<![\w/])(?:" + "|".join(_NOTES) + r")\.md")


def citations(text: str) -> list[tuple[str, str | None]]:
    """``(file name, section number or None)`` for every ``docs/<name>.md`` citation in ``text``."""
    out = []
    for m in _CITE.finditer(text):
        name = m.group(1) + ".md"
        first = _FIRST.match(text, m.end())
        if first is None:
            out.append((name, None))
            continue
        out.append((name, first.group(1)))
        pos = first.end()
        while (more := _MORE.match(text, pos)) is not None:
            out.append((name, more.group(1)))
            pos = more.end()
    return out


def sections(path: pathlib.Path) -> list[tuple[str, list[str]]]:
    """``(heading text, body lines)`` of every markdown heading of ``path``; fenced code is skipped."""
    out, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*)", line)):
            out.append((m.group(1).strip(), []))
        elif out:
            out[-1][1].append(line)
    return out


def headings(path: pathlib.Path) -> list[str]:
    """Markdown headings of ``path`` (text after the #'s), fenced code blocks skipped."""
    return [h for h, _ in sections(path)]


def _starts_with(number: str):
    return re.compile(re.escape(number) + r"\.?(?:\s|$)")


def has_section(heads: list[str], number: str) -> bool:
    """True if a heading starts with ``number`` as a whole section number ("4.6" or "1." but not "4.60")."""
    pat = _starts_with(number)
    return any(pat.match(h) for h in heads)


def resolves(secs: list[tuple[str, list[str]]], number: str) -> bool:
    """A heading starts with ``number``, or ``number`` = <heading>.<k> and that section has a list item "k."."""
    if has_section([h for h, _ in secs], number):
        return True
    parent, _, item = number.rpartition(".")
    if not parent:
        return False
    pat, item_pat = _starts_with(parent), re.compile(r"\s*" + re.escape(item) + r"\.\s")
    return any(pat.match(h) and any(item_pat.match(line) for line in body) for h, body in secs)


def unresolved(text: str, docs: pathlib.Path) -> list[str]:
    """The citations in ``text`` that do not land on an existing file and numbered heading under ``docs``."""
    bad, cache = [], {}
    for name, number in citations(text):
        path = docs / name
        if not path.is_file():
            bad.append(f"docs/{name} (no such file)")
            continue
        if number is not None:
            secs = cache.setdefault(name, sections(path))
            if not resolves(secs, number):
                bad.append(f"docs/{name} §{number} (no heading starts with {number})")
    return bad


def _files():
    for top in CITING:
        p = ROOT / top
        paths = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
        for q in paths:
            if q.resolve() != THIS and q.suffix in SUFFIXES and "__pycache__" not in q.parts:
                yield q


def _text(path: pathlib.Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


# ------------------------------------------------------------------ the helpers can fail


def test_parser_reads_single_and_follow_on_numbers():
    text = ("see docs/probes.md §4.13, §11.11 and `docs/attacks.md` §2. Also docs/probes.md §2.2–§2.6,\n"
            "docs/probes.md §4.10 and §5, docs/probes.md\n    §1.5 (wrapped) and docs/cli.md alone.")
    assert citations(text) == [
        ("probes.md", "4.13"), ("probes.md", "11.11"), ("attacks.md", "2"), ("probes.md", "2.2"),
        ("probes.md", "2.6"), ("probes.md", "4.10"), ("probes.md", "5"), ("probes.md", "1.5"), ("cli.md", None),
    ]


def test_section_match_is_whole_number():
    heads = ["1. The attacks", "1.5 PGD", "4.6 conservativeness", "11.10 Stress-consistency norms"]
    assert has_section(heads, "1") and has_section(heads, "1.5") and has_section(heads, "4.6")
    assert not has_section(heads, "4") and not has_section(heads, "11.1") and not has_section(heads, "4.60")


def test_planted_bad_citations_are_caught():
    docs = ROOT / "docs"
    assert unresolved("fine: docs/probes.md §4.6 and docs/attacks.md §1.", docs) == []
    assert unresolved("planted: docs/probes.md §99.9", docs) == ["docs/probes.md §99.9 (no heading starts with 99.9)"]
    assert unresolved("planted: docs/probes.md §4.6, §4.99", docs) == [
        "docs/probes.md §4.99 (no heading starts with 4.99)"]
    assert unresolved("planted: docs/nowhere.md §1", docs) == ["docs/nowhere.md (no such file)"]
    # a number one level below a heading may name an item of a numbered list in that section
    secs = [("1.8 Departures", ["1. first", "7. seventh"]), ("2. Pipeline", ["text"])]
    assert resolves(secs, "1.8.7") and resolves(secs, "1.8") and resolves(secs, "2")
    assert not resolves(secs, "1.8.6") and not resolves(secs, "2.1") and not resolves(secs, "1.9")
    assert _BARE.search("as " + "PROBES" + ".md §4.6 says") is not None
    assert _BARE.search("as docs/probes.md §4.6 says") is None


# ------------------------------------------------------------------ the repository


def test_every_docs_citation_resolves():
    docs = ROOT / "docs"
    bad = [f"{q.relative_to(ROOT)}: {b}" for q in _files() for b in unresolved(_text(q), docs)]
    assert bad == []


@pytest.mark.parametrize("number", ["4.1", "4.2", "4.3", "4.4", "4.5", "4.6", "4.7", "4.8", "4.9", "4.10", "4.11",
                                    "4.12", "4.13", "4.14"])
def test_every_probe_has_its_section(number):
    assert has_section(headings(ROOT / "docs" / "probes.md"), number)


def test_architecture_has_the_cited_named_sections():
    heads = headings(ROOT / "docs" / "architecture.md")
    for name in ("Contracts", "Batching", "Errors"):
        assert any(name in h for h in heads), name


def test_no_bare_note_citation_outside_docs():
    found = []
    for q in _files():
        if q.relative_to(ROOT).parts[0] == "docs":
            continue
        for k, line in enumerate(_text(q).splitlines(), 1):
            if _BARE.search(line):
                found.append(f"{q.relative_to(ROOT)}:{k}: {line.strip()[:100]}")
    ci = ROOT / ".ci"
    for q in sorted(ci.rglob("*")) if ci.is_dir() else []:
        if q.is_file():
            found += [f"{q.relative_to(ROOT)}:{k}" for k, line in enumerate(_text(q).splitlines(), 1)
                      if _BARE.search(line)]
    assert found == []
