"""After a run that collected the docs tests: how many blocks the pages run, and which they
show without running, with why."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.pages import read_page

REPO = Path(__file__).resolve().parents[2]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    run = skipped = 0
    reasons: list[str] = []
    for path in pages:
        page = read_page(path)
        run += len(page.steps)
        skipped += len(page.skipped)
        reasons += [f"  {path.relative_to(REPO)}:{s.line}: {s.reason}" for s in page.skipped]
    terminalreporter.write_sep("-", f"docs: {run} blocks run, {skipped} shown and not run")
    for line in reasons:
        terminalreporter.write_line(line)
