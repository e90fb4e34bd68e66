"""The docs site holds together: a short README, every page in the nav, every relative link resolves.

`make docs` (`mkdocs build --strict`, part of `make test`) checks the pages' links from inside the
site; this test also covers the README, which is outside it, and says which link broke.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from markdown.extensions.toc import slugify

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
README_MAX_LINES = 300

LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str, keep_code: bool = False) -> Iterator[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code removed unless `keep_code`."""
    fence = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if stripped.startswith(("```", "~~~")):
            marker = stripped[:3]
            fence = "" if fence == marker else (fence or marker)
            continue
        if not fence:
            yield number, line if keep_code else INLINE_CODE.sub("", line)


def links(text: str) -> Iterator[tuple[int, str]]:
    for number, line in prose_lines(text):
        for match in LINK.finditer(line):
            yield number, match.group(1)


def anchors(path: Path) -> set[str]:
    """The ids Python-Markdown's toc extension gives the headings of a page (as mkdocs does)."""
    found: set[str] = set()
    for _, line in prose_lines(path.read_text(), keep_code=True):
        match = HEADING.match(line)
        if match:
            title = re.sub(r"[*_]", "", match.group(2))
            base = slugify(title, "-")
            slug, n = base, 1
            while slug in found:
                slug, n = f"{base}_{n}", n + 1
            found.add(slug)
    return found


def broken_links(path: Path) -> list[str]:
    """Every relative link of a Markdown file whose file or heading anchor does not exist."""
    problems = []
    for number, target in links(path.read_text()):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        where = (path.parent / file_part).resolve() if file_part else path
        if not where.exists():
            problems.append(f"{path.relative_to(REPO)}:{number}: {target} (no such file)")
        elif anchor and where.suffix == ".md" and anchor not in anchors(where):
            problems.append(f"{path.relative_to(REPO)}:{number}: {target} (no such heading)")
    return problems


def nav_pages(nav: object) -> Iterator[str]:
    if isinstance(nav, str):
        yield nav
    elif isinstance(nav, list):
        for item in nav:
            yield from nav_pages(item)
    elif isinstance(nav, dict):
        for value in nav.values():
            yield from nav_pages(value)


def markdown_files() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def test_the_readme_is_short() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move reference into docs/"


def test_every_page_is_in_the_nav_and_every_nav_entry_exists() -> None:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs"
    listed = list(nav_pages(config["nav"]))
    pages = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert sorted(pages - set(listed)) == [], "pages missing from mkdocs.yml's nav"
    assert sorted(set(listed) - pages) == [], "nav entries without a page"
    assert len(listed) == len(set(listed)), "a page listed twice in the nav"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path: Path) -> None:
    assert broken_links(path) == []


def test_the_readme_links_into_the_docs() -> None:
    targets = {target.partition("#")[0] for _, target in links((REPO / "README.md").read_text())}
    assert "docs/index.md" in targets
    assert {"docs/commands/run.md", "docs/commands/baseline.md", "docs/baselines.md"} <= targets


def test_the_link_check_finds_what_is_broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the checks above would pass vacuously if the parser saw no links: it must flag these
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    (tmp_path / "other.md").write_text("# Load shape\n\n## Definitions (same as `vllm bench serve`)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#load-shape) [ok](other.md#definitions-same-as-vllm-bench-serve)\n"
        "[missing](nowhere.md) and [bad anchor](other.md#no-such) ![img](gone.png)\n"
        "[web](https://example.com/x.md) [self](#page) [self-bad](#nope)\n"
        "`[not a link](in-code.md)`\n```\n[not a link](in-fence.md)\n```\n"
    )
    assert broken_links(page) == [
        "page.md:4: nowhere.md (no such file)",
        "page.md:4: other.md#no-such (no such heading)",
        "page.md:4: gone.png (no such file)",
        "page.md:5: #nope (no such heading)",
    ]
