"""The README is a front door: short, its first commands the two a contributor runs, every link
in it resolving; the manual builds with no broken link; no page hides a command in a block the
docs tests would not run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from markdown_it import MarkdownIt

from tests.docs.pages import NOT_RUN, SHELL_LANGUAGES, TITLE

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").rglob("*.md"))]


def test_the_readme_is_a_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "# modelreg"
    assert len(lines) <= 250, f"README.md has {len(lines)} lines: move the detail into docs/"
    first_block = text.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split()[:2] for line in first_block[:2]] == [["make", "demo"], ["make", "test"]]
    for heading in ("## Install", "## The three jobs", "## Four concepts", "## At 3 a.m."):
        assert heading in lines, heading
    assert "## Trust and safety" in lines


def test_the_readmes_release_discipline_covers_one_offs_hygiene_and_latency() -> None:
    """Issue 42's acceptance: the section names one-off runs, suite hygiene and latency gates,
    each with the word a user would act on, and sends the rest to the page that runs them."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Release discipline\n", 1)[1].split("\n## ", 1)[0]
    for needle in (
        "**one-off run**\n(`verify --suite S`)",
        "never counted",
        "--accept-relaxed-gate",
        "**Suite hygiene:**",
        "near-duplicates",
        "--calibration",
        "**Latency**",
        "concurrency",
        "p50/p95",
        "(docs/release-discipline.md)",
    ):
        assert needle in section, needle


def test_every_relative_link_in_the_readme_resolves() -> None:
    tokens = MarkdownIt("commonmark").parse(README.read_text(encoding="utf-8"))
    links = [
        child.attrGet("href") or child.attrGet("src")
        for token in tokens
        for child in token.children or []
        if child.type in ("link_open", "image")
    ]
    relative = [str(link) for link in links if link and not re.match(r"[a-z]+:|#", str(link))]
    assert relative, "the README links into docs/"
    missing = [link for link in relative if not (REPO / link.split("#", 1)[0]).exists()]
    assert missing == []


def test_the_manual_builds_with_no_broken_link(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "team-service" / "index.html").is_file()


def test_no_command_hides_in_a_block_that_is_not_run() -> None:
    """A ``$ command`` in a block the docs tests neither run nor count as not-run (a fence with
    no language, ``text``, ``yaml`` without a title…) would be a command nobody checks."""
    hidden = []
    for path in PAGES:
        previous = None
        for token in MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8")):
            before, previous = previous, token
            if token.type != "fence":
                continue
            language = token.info.strip().split(" ")[0]
            marked = before is not None and before.type == "html_block"
            marked = marked and NOT_RUN.search(before.content) is not None
            runs = language in SHELL_LANGUAGES | {"console", "python"} or TITLE.search(token.info)
            if not runs and not marked and re.search(r"^\$ ", token.content, re.MULTILINE):
                assert token.map is not None
                hidden.append(f"{path.relative_to(REPO)}:{token.map[0] + 1}")
    assert hidden == []
