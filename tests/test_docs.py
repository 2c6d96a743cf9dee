"""The documentation: the site builds with `mkdocs build --strict`, and that check can fail.

`make test` runs the same strict build (`make docs-check`); these tests add what MkDocs does
not see: the README's links into docs/ (the README is not part of the site), and the blocks
that a test runs as printed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MKDOCS = [sys.executable, "-m", "mkdocs"]

pytestmark = pytest.mark.timeout(120)


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*MKDOCS, "build", "--strict", "--site-dir", str(site)],
        cwd=root,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=110,
    )


def copy_site_sources(into: Path) -> Path:
    shutil.copy(REPO / "mkdocs.yml", into / "mkdocs.yml")
    shutil.copytree(DOCS, into / "docs")
    return into


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The repository's own site, built once with --strict."""
    out = tmp_path_factory.mktemp("docs") / "site"
    done = build(REPO, out)
    assert done.returncode == 0, done.stderr
    return out


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    for page in DOCS.glob("*.md"):
        name = "" if page.stem == "index" else page.stem
        assert (site / name / "index.html").is_file(), page.name


@pytest.mark.parametrize(
    ("added", "named"),
    [
        ("[gone](no-such-page.md)", "no-such-page.md"),
        ("[gone](http.md#no-such-heading)", "no-such-heading"),
    ],
)
def test_a_broken_link_or_anchor_fails_the_strict_build(
    tmp_path: Path, added: str, named: str
) -> None:
    root = copy_site_sources(tmp_path)
    page = root / "docs" / "tools.md"
    page.write_text(page.read_text() + f"\nSee {added}.\n")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert named in done.stderr, done.stderr


def test_a_page_left_out_of_the_nav_fails_the_strict_build(tmp_path: Path) -> None:
    root = copy_site_sources(tmp_path)
    (root / "docs" / "orphan.md").write_text("# Orphan\n")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert "orphan.md" in done.stderr, done.stderr


def slug(heading: str) -> str:
    """The anchor MkDocs' toc extension gives a heading (its default slugify)."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(page: Path) -> set[str]:
    found, fence = set(), False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            found.add(slug(line.lstrip("#").strip()))
    return found


def test_every_readme_link_names_a_file_and_heading_that_exist() -> None:
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(([^)\s]+)\)", readme)
    local = [link for link in links if "://" not in link]
    assert any(link.startswith("docs/") for link in local), links
    for link in local:
        path, _, anchor = link.partition("#")
        target = REPO / path
        assert target.exists(), f"README links to {link}, which does not exist"
        if anchor:
            assert anchor in anchors(target), f"README links to {link}: no such heading"


def test_the_slug_rule_matches_what_mkdocs_wrote(site: Path) -> None:
    """The README check above assumes MkDocs' anchors: compare with a built page."""
    html = (site / "setup" / "index.html").read_text()
    built = set(re.findall(r'<h[1-6] id="([^"]+)"', html))
    assert anchors(DOCS / "setup.md") == built


def test_blocks_run_as_printed_name_a_test_that_reads_their_page() -> None:
    marked = 0
    for page in sorted(DOCS.glob("*.md")):
        for test_file in re.findall(
            r"<!-- [\w-]+: (tests/\S+\.py) runs this block", page.read_text()
        ):
            marked += 1
            test = REPO / test_file
            assert test.is_file(), f"{page.name} names {test_file}, which does not exist"
            assert f'"{page.name}"' in test.read_text(), f"{test_file} does not read {page.name}"
    assert marked >= 1
