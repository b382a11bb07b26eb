"""What a documentation page asks a reader to run, read with markdown-it-py (the CommonMark
parser rich already brings) rather than with regular expressions over fences.

A page is a list of *steps*, in page order:

- a ``console`` block: ``$ command`` lines (a line ending in ``\\`` continues on the next; a
  here-document runs to its terminator), each followed by the output the command prints —
  stdout and stderr as one stream, as a terminal shows them. An empty output means the command
  prints nothing.
- an ``sh`` / ``bash`` / ``shell`` block: commands without prompts; their output is not shown,
  so it is not compared, but each must exit as the page says.
- a ``python`` block: run as a script in the page's working directory; it must exit 0.
- a block whose info string carries ``title="NAME"`` (any language): a file the reader writes;
  its text is written to NAME in the page's working directory before the next step runs.

A command's expected exit code is 0 unless its line ends with a comment naming another
(``$ modelreg verify r_1 --target cpu   # exit 1``).

A block after ``<!-- not-run: REASON -->`` (an HTML comment on its own line, alone before the
block) is shown and not run; every such block is counted and reported with its reason. Other
fenced blocks (``yaml`` snippets without a title, ``text``, ``ini``…) are illustrations, not
commands.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

SHELL_LANGUAGES = frozenset({"sh", "bash", "shell"})
NOT_RUN = re.compile(r"<!--\s*not-run:\s*(?P<reason>.+?)\s*-->", re.DOTALL)
TITLE = re.compile(r'title="(?P<name>[^"]+)"')
EXIT = re.compile(r"#[^#'\"]*\bexit (?P<code>\d+)\b[^#'\"]*$")
HEREDOC = re.compile(r"<<-?\s*(['\"]?)(?P<word>[A-Za-z_]+)\1")


@dataclass
class Command:
    """One command of a page: the text bash runs, the output the page shows (None: not shown),
    the exit code it must end with, and where it is (for messages)."""

    text: str
    expected: list[str] | None
    exit_code: int
    line: int


@dataclass
class Step:
    kind: str  # "commands", "python", "file"
    line: int  # 1-based line of the fence in the page
    commands: list[Command] = field(default_factory=list)
    source: str = ""  # python: the code; file: the content
    name: str = ""  # file: where it is written


@dataclass
class Skipped:
    line: int
    reason: str


@dataclass
class Page:
    path: Path
    steps: list[Step]
    skipped: list[Skipped]


def _exit_code(command: str) -> int:
    last = command.rstrip().splitlines()[-1]
    found = EXIT.search(last)
    return int(found["code"]) if found else 0


def _take_command(lines: list[str], start: int, first: str) -> tuple[str, int]:
    """The command starting at ``lines[start]`` (its first line given without a prompt): its
    text with continuation lines and here-documents, and the index after it."""
    taken = [first]
    index = start + 1
    current = first
    while True:
        heredoc = HEREDOC.search(current)
        if heredoc:
            word = heredoc["word"]
            while index < len(lines):
                taken.append(lines[index])
                index += 1
                if lines[index - 1].strip() == word:
                    break
            current = taken[-1]
            continue
        stripped = current.rstrip()
        if stripped.endswith(("\\", "|", "&&", "||")) and index < len(lines):
            current = lines[index]
            taken.append(current)
            index += 1
            continue
        return "\n".join(taken), index


def console_commands(text: str, first_line: int) -> list[Command]:
    lines = text.splitlines()
    commands: list[Command] = []
    index = 0
    while index < len(lines):
        if not lines[index].startswith("$ "):
            raise ValueError(
                f"line {first_line + index}: a console block's output must follow a `$ ` "
                f"command: {lines[index]!r}"
            )
        line = first_line + index
        command, index = _take_command(lines, index, lines[index][2:])
        output: list[str] = []
        while index < len(lines) and not lines[index].startswith("$ "):
            output.append(lines[index])
            index += 1
        commands.append(Command(command, output, _exit_code(command), line))
    return commands


def shell_commands(text: str, first_line: int) -> list[Command]:
    lines = text.splitlines()
    commands: list[Command] = []
    index = 0
    while index < len(lines):
        if not lines[index].strip() or lines[index].lstrip().startswith("#"):
            index += 1
            continue
        line = first_line + index
        command, index = _take_command(lines, index, lines[index])
        commands.append(Command(command, None, _exit_code(command), line))
    return commands


def read_page(path: Path) -> Page:
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    steps: list[Step] = []
    skipped: list[Skipped] = []
    previous = None
    for token in tokens:
        before, previous = previous, token
        if token.type != "fence":
            continue
        assert token.map is not None
        line = token.map[0] + 1
        language, _, rest = token.info.strip().partition(" ")
        marker = NOT_RUN.search(before.content) if before and before.type == "html_block" else None
        if marker:
            skipped.append(Skipped(line, " ".join(marker["reason"].split())))
            continue
        title = TITLE.search(rest)
        if title:
            steps.append(Step("file", line, source=token.content, name=title["name"]))
        elif language == "console":
            steps.append(Step("commands", line, console_commands(token.content, line + 1)))
        elif language in SHELL_LANGUAGES:
            steps.append(Step("commands", line, shell_commands(token.content, line + 1)))
        elif language == "python":
            steps.append(Step("python", line, source=token.content))
    return Page(path, steps, skipped)
