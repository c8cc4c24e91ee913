"""Every relative link in README.md and docs/*.md points at a file that exists, and every
``#anchor`` into a Markdown file at one of its headings (GitHub's rule for heading ids).

The docs link into each other's session sections by hand-written anchors; a renamed heading
would otherwise leave a dead link that no one sees until a reader clicks it.
"""
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_LINK = re.compile(r"\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def heading_id(text: str) -> str:
    """GitHub's id for a heading: lower case, code marks dropped, every character that is not
    a letter, a digit, a space, '-' or '_' dropped, spaces turned into '-'."""
    kept = [ch for ch in text.strip().lower().replace("`", "")
            if ch in " -_" or unicodedata.category(ch)[0] in "LN"]
    return "".join(kept).replace(" ", "-")


def _unfenced(text: str) -> list[str]:
    """The file's lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def anchors(path: Path) -> set[str]:
    """The ids of a Markdown file's headings; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    ids = set()
    for line in _unfenced(path.read_text()):
        m = _HEADING.match(line)
        if m:
            base = heading_id(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            ids.add(base if n == 0 else f"{base}-{n}")
    return ids


def broken_links(path: Path) -> list[str]:
    """Each relative link of ``path`` whose file is missing or whose anchor is not a heading."""
    bad = []
    cache: dict[Path, set[str]] = {}
    for line in _unfenced(path.read_text()):
        for target in _LINK.findall(re.sub(r"`[^`]*`", "``", line)):  # not inside inline code
            if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
                continue
            file_part, _, frag = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                bad.append(f"{target}: no such file")
            elif frag and dest.suffix == ".md":
                if dest not in cache:
                    cache[dest] = anchors(dest)
                if frag not in cache[dest]:
                    bad.append(f"{target}: no heading with that id in {dest.name}")
    return bad


@pytest.mark.parametrize("path", DOCS, ids=[p.relative_to(ROOT).as_posix() for p in DOCS])
def test_links_resolve(path):
    bad = broken_links(path)
    assert not bad, f"{path.relative_to(ROOT)}: {len(bad)} broken link(s):\n" + "\n".join(bad)


@pytest.mark.parametrize("heading, expected", [
    ("Performance today", "performance-today"),
    ("Decoding (`flash_attn_with_kvcache`)", "decoding-flash_attn_with_kvcache"),
    ("Session 58: three forward changes measured and not kept, where the causal mask's cycles go",
     "session-58-three-forward-changes-measured-and-not-kept-where-the-causal-masks-cycles-go"),
    ("Sessions 36 and 37: the d64 K/V tiles, 1.4× — done", "sessions-36-and-37-the-d64-kv-tiles-14--done"),
])
def test_heading_id(heading, expected):
    assert heading_id(heading) == expected


def test_broken_links_are_reported(tmp_path):
    (tmp_path / "other.md").write_text("# Title\n\n## A section\n\n## A section\n")
    doc = tmp_path / "doc.md"
    doc.write_text(
        "[ok](other.md#a-section) [repeat](other.md#a-section-1) [self](#here)\n"
        "# Here\n"
        "[gone](missing.md) [bad anchor](other.md#no-such) [web](https://example.com/x.md#y)\n"
        "`[code](not-a-link.md)`\n"
        "```\n[fenced](also-not.md)\n```\n")
    assert broken_links(doc) == ["missing.md: no such file",
                                 "other.md#no-such: no heading with that id in other.md"]
