"""Does what a command printed match the output its page shows?

The page is the expectation, line for line, with two kinds of give:

1. What truly varies from one run or host to the next is normalised on both sides before they
   are compared, and nothing else is:
   - dates and times (``2026-12-04 17:53``, ``…T17:53:02Z``, ``… UTC``): when it ran;
   - measured durations and speeds (``233 ms``, ``10.8 s``, ``14.3 tok/s``): how loaded the
     host was.
2. A page may elide with ``…`` (U+2026) what it does not show: within a line, ``…`` matches any
   text on that line (the host's memory budget, a peak RSS, a temporary path); a line that is
   only ``…`` matches any number of lines (the rest of a long listing). ``...`` (three dots) is
   literal text, as commands print it.

Record ids are *not* normalised: a record's id follows from the artifact's facts only
(invariants.md, 9), so the id a page shows is the id a reader gets for the same file and flags,
and ``modelreg show r_b459`` typed from the page must find it.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"
TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2}| UTC)?"
)
MEASURED = re.compile(r"(?<![\w.])\d+(?:\.\d+)? (?:ms|s|tok/s)(?![\w/])")


def normalise(line: str) -> str:
    line = TIME.sub("<time>", line.rstrip())
    return MEASURED.sub("<measured>", line)


def _trimmed(lines: list[str]) -> list[str]:
    lines = [normalise(line) for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _pattern(expected: list[str]) -> re.Pattern[str]:
    parts: list[str] = []
    for line in expected:
        if line.strip() == ELLIPSIS:
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            pieces = [re.escape(piece) for piece in line.split(ELLIPSIS)]
            parts.append("[^\n]*?".join(pieces) + r"\n")
    return re.compile("".join(parts))


def matches(expected: list[str], printed: str) -> bool:
    want = _trimmed(expected)
    got = _trimmed(printed.splitlines())
    text = "".join(line + "\n" for line in got)
    return _pattern(want).fullmatch(text) is not None
