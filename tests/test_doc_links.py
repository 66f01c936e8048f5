"""Every relative link and anchor in the README and docs/ resolves: the file exists and the
heading an anchor names is there (GitHub's heading anchors)."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", REPO / "DEVELOPERS.md", REPO / "BENCHMARKS.md", *sorted((REPO / "docs").rglob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lowercased, punctuation dropped, spaces to '-'."""
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.DOTALL)
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        n, base = 1, slug
        while slug in found:
            slug, n = f"{base}-{n}", n + 1
        found.add(slug)
    return found


def links() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.DOTALL)
        for target in LINK.findall(text):
            if not re.match(r"[a-z]+:", target):
                out.append((str(doc.relative_to(REPO)), target))
    return out


LINKS = links()


def test_the_docs_link_to_each_other():
    assert len(LINKS) > 30


@pytest.mark.parametrize("doc,target", LINKS, ids=[f"{d}->{t}" for d, t in LINKS])
def test_link_resolves(doc, target):
    file, _, anchor = target.partition("#")
    path = (REPO / doc).parent / file if file else REPO / doc
    assert path.exists(), f"{doc}: {target}: no such file"
    if anchor:
        assert anchor in anchors(path), f"{doc}: {target}: no heading with that anchor in {path.name}"


def test_every_docs_page_is_linked_from_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for page in (REPO / "docs").glob("*.md"):
        assert f"docs/{page.name}" in readme, page.name
