"""JSON from files and lines modelreg did not write: bounded size, bounded nesting, one line.

``json.loads`` recurses once per nesting level, so ``[[[[…]]]]`` a few thousand levels deep
ends in a ``RecursionError`` (an internal error, exit 3). Here the depth is measured first,
without recursion and without parsing, and anything deeper than ``max_depth`` is refused;
``NaN`` and ``Infinity`` (not JSON) are refused too. Every problem is one line that names the
file or the origin.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from modelreg.boundedfile import read_bounded
from modelreg.errors import InvalidArtifact, InvalidInput

# Manifests, configs and safetensors headers nest a handful of levels; a config's deepest
# legitimate nesting (quantization or rope settings) stays well below this.
MAX_JSON_DEPTH = 64

_STRING_LITERAL = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_AS_PARENS = bytes.maketrans(b"[]{}", b"()()")


def nesting_exceeds(text: str | bytes, max_depth: int) -> bool:
    """Would parsing ``text`` go deeper than ``max_depth`` arrays/objects?

    Exact for valid JSON; for broken JSON it is True whenever ``json.loads`` could go deeper
    than ``2 * max_depth`` before failing, so a parse that follows a False never recurses far.
    Works level by level on the brackets outside string literals, without recursion.
    """
    data = text.encode("utf-8", errors="surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= max_depth:
        return False
    brackets = _STRING_LITERAL.sub(b"", data).translate(_AS_PARENS, _NOT_BRACKETS)
    run = b"(" * (max_depth + 1)
    # Each pass removes the innermost pairs: valid JSON no deeper than max_depth is empty after
    # max_depth passes; a pair still left had max_depth levels nested inside it.
    for _ in range(max_depth):
        if run in brackets:
            return True
        shorter = brackets.replace(b"()", b"")
        if shorter == brackets:
            # Only unmatched brackets are left: ")))(((". Openers beyond max_depth in a row
            # would still take the parser deep before it finds the text broken.
            return run in brackets
        brackets = shorter
        if not brackets:
            return False
    return bool(brackets)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON no deeper than ``max_depth``; any problem is a ``ValueError`` whose message is
    one line (callers turn it into their own error, with their file and offset)."""
    if nesting_exceeds(text, max_depth):
        raise ValueError(f"nested deeper than {max_depth} levels")
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte {exc.start})") from None
    except RecursionError:  # cannot happen after the depth check; never let it out
        raise ValueError(f"nested deeper than {max_depth} levels") from None
    except ValueError as exc:  # JSONDecodeError, and int() refusing a 5000-digit number
        raise ValueError(f"not valid JSON: {str(exc).splitlines()[0]}") from None


def loads_bounded(text: str | bytes, *, origin: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON that did not come from a file of its own (an import line, a child's answer);
    problems are one ``InvalidInput`` line starting with ``origin``."""
    try:
        return parse_json(text, max_depth=max_depth)
    except ValueError as exc:
        raise InvalidInput(f"{origin}: {exc}") from None


def read_json_file(
    path: Path, *, max_bytes: int, max_depth: int = MAX_JSON_DEPTH, what: str = "JSON file"
) -> Any:
    """Read and parse a JSON file with bounded size and depth; one ``InvalidArtifact`` line
    naming the file otherwise."""
    data = read_bounded(path, max_bytes=max_bytes, what=what)
    try:
        return parse_json(data, max_depth=max_depth)
    except ValueError as exc:
        raise InvalidArtifact(path, str(exc)) from None
