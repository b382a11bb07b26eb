"""Every command the README and the docs show is run, page by page, against a fresh registry,
and what it prints must be what the page shows (tests/docs/pages.py says how a page is read,
tests/docs/expect.py what may differ).

Each page runs in order in one bash session (tests/docs/shell.py) in an empty working
directory ``~/work`` (holding the checkout's ``manifests/``, as a checkout does), with HOME in
a temporary directory — so the registry is the default one
under ``~/.local/share/modelreg``, new for the page — and this checkout's ``modelreg`` and
``python`` first on PATH. What varies from one host or run to the next, and the pages show, is
fixed or mapped:

- who did it: ``MODELREG_ACTOR`` is ``alice@build-1``; the time zone is UTC;
- where: the temporary HOME prints as ``/home/alice`` (so the working directory as
  ``/home/alice/work``) and this host's name as ``build-1``;
- a page's ``8765`` (the team service's default port) is a free port in the commands, and
  ``8765`` again in what they print.

tests/docs/expect.py says what else is normalised (times, measured durations and speeds).

Pages that verify load the bundled SmolLM2 through llama.cpp: they are marked ``model``.

To update a page after a change of wording: ``MODELREG_DOCS_UPDATE=1 pytest tests/docs`` writes
what each mismatching command printed into the page in place of what it showed; read the diff,
put back the ``…`` for what varies, and commit.
"""

from __future__ import annotations

import os
import re
import socket
import sys
from pathlib import Path

import pytest

from tests.docs.expect import matches
from tests.docs.pages import Command, Page, read_page
from tests.docs.shell import CommandTimeout, Shell

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
UPDATE = os.environ.get("MODELREG_DOCS_UPDATE") == "1"
PORT = "8765"
HOST_SHOWN = "build-1"
HOME_SHOWN = "/home/alice"
ACTOR = f"alice@{HOST_SHOWN}"
COMMAND_TIMEOUT_S = 300
TIMED_OUT = " (the rest of the page was not run)"


def _runs_a_model(page: Page) -> bool:
    texts = [c.text for s in page.steps for c in s.commands] + [s.source for s in page.steps]
    return any(re.search(r"\bverify\b|\.verify\(", text) for text in texts)


def _params() -> list[object]:
    params: list[object] = []
    for path in PAGES:
        page = read_page(path)
        if not page.steps:
            continue
        marks = [pytest.mark.model] if _runs_a_model(page) else []
        params.append(pytest.param(path, marks=marks, id=str(path.relative_to(REPO))))
    return params


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(home: Path) -> dict[str, str]:
    keep = {"LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
    for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):  # the host's, see env/README
        if name in os.environ:
            keep[name] = os.environ[name]
    return {
        **keep,
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "PYTHONPATH": str(REPO),  # this checkout's modelreg, whatever the venv installed
        "PYTHONUNBUFFERED": "1",  # stdout and stderr in the order they were written
        "MODELREG_ACTOR": ACTOR,
        "TZ": "UTC",
        "TERM": "dumb",
        "NO_COLOR": "1",
    }


def _describe(page: Path, command: Command, code: int, printed: str) -> str:
    where = f"{page.relative_to(REPO)}:{command.line}"
    lines = [f"{where}: $ {command.text}"]
    if code != command.exit_code:
        lines.append(f"  exit {code}, the page says {command.exit_code}")
    if command.expected is not None:
        lines.append("  the page shows:")
        lines += [f"    {line}" for line in command.expected]
    lines.append("  it printed:")
    lines += [f"    {line}" for line in printed.splitlines()]
    return "\n".join(lines)


def _rewrite(page: Path, rewrites: list[tuple[Command, list[str]]]) -> None:
    lines = page.read_text(encoding="utf-8").split("\n")
    for command, printed in sorted(rewrites, key=lambda r: -r[0].line):
        assert command.expected is not None
        start = command.line - 1 + command.text.count("\n") + 1
        lines[start : start + len(command.expected)] = printed
    page.write_text("\n".join(lines), encoding="utf-8")


@pytest.mark.parametrize("path", _params())
def test_every_command_prints_what_the_page_shows(path: Path, tmp_path: Path) -> None:
    page = read_page(path)
    home, scripts = tmp_path / "home", tmp_path / "steps"
    work = home / "work"
    for directory in (home, work, scripts):
        directory.mkdir()
    # The pages run from a checkout: its reference manifests are where they say.
    (work / "manifests").symlink_to(REPO / "manifests")
    this_host = re.compile(rf"(?<![\w.-]){re.escape(socket.gethostname())}(?![\w-])")
    port = str(_free_port())
    serves = any(PORT in c.text for step in page.steps for c in step.commands)
    shell = Shell(work, scripts, _environment(home))
    failures: list[str] = []
    rewrites: list[tuple[Command, list[str]]] = []
    try:
        for step in page.steps:
            if failures and failures[-1].endswith(TIMED_OUT):
                break
            if step.kind == "file":
                target = work / step.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(step.source, encoding="utf-8")
                continue
            if step.kind == "python":
                script = scripts / f"block-{step.line}.py"
                script.write_text(step.source, encoding="utf-8")
                command = Command(f"python {script}", None, 0, step.line)
                commands = [command]
            else:
                commands = step.commands
            for command in commands:
                try:
                    printed, code = shell.run(
                        command.text.replace(PORT, port), timeout=COMMAND_TIMEOUT_S
                    )
                except CommandTimeout as timeout:
                    failures.append(
                        f"{path.relative_to(REPO)}:{command.line}: {timeout}{TIMED_OUT}"
                    )
                    break
                if serves:
                    printed = printed.replace(port, PORT)
                printed = printed.replace(str(home), HOME_SHOWN)
                printed = this_host.sub(HOST_SHOWN, printed)
                shown = command.expected
                if code != command.exit_code or (shown is not None and not matches(shown, printed)):
                    failures.append(_describe(path, command, code, printed))
                    if shown is not None:
                        lines = [line.rstrip() for line in printed.splitlines()]
                        while lines and not lines[-1]:
                            lines.pop()
                        rewrites.append((command, lines))
    finally:
        shell.close()
        if UPDATE and rewrites:
            _rewrite(path, rewrites)
    assert not failures, "\n\n".join(failures)


def test_pages_say_why_a_block_is_not_run() -> None:
    """A block marked not-run names why; the marked blocks stay few (tests/docs/conftest.py
    reports them after every run)."""
    skipped = [(path, s) for path in PAGES for s in read_page(path).skipped]
    for path, block in skipped:
        assert len(block.reason) >= 10, f"{path.relative_to(REPO)}:{block.line}: say why"
    run = sum(len(read_page(path).steps) for path in PAGES)
    assert len(skipped) <= run // 3, f"{len(skipped)} blocks not run against {run} run"
