"""What a stored value may be, and reading one back made readable: valid Unicode text (no NUL,
no lone surrogate) and JSON nested at most ``MAX_DEPTH`` deep. Pure functions on values; the
storage boundary (``registry.boundary``) applies them to every row a session writes, and a
reader (a record's manifest, ``registry.rows``) uses ``loads_readable`` on rows stored before
it."""

from __future__ import annotations

import json
import re
from typing import Any

MAX_DEPTH = 64


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored as UTF-8 text on both backends (None: it can): a NUL
    (PostgreSQL refuses it in text; SQLite would keep it) or a lone surrogate."""
    if "\x00" in text:
        return "holds a NUL character"
    return _surrogate_problem(text)


def _surrogate_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (a lone surrogate), None when it is. Inside JSON a
    NUL is written as an escape and reads back on both backends: only this is checked there."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"holds an invalid character (U+{ord(text[exc.start]):04X}, a lone surrogate)"
    return None


def value_problem(value: Any, max_depth: int = MAX_DEPTH) -> str | None:
    """Why a parsed JSON value cannot be stored and read back: a text that is not valid
    Unicode, or nesting deeper than ``max_depth`` (walked without recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            problem = _surrogate_problem(item)
            if problem is not None:
                return problem
        elif isinstance(item, dict | list):
            if depth > max_depth:
                return f"is nested deeper than {max_depth} levels"
            children = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in children:
                if isinstance(key, str) and (problem := _surrogate_problem(key)) is not None:
                    return problem
                stack.append((child, depth + 1))
    return None


def sanitized_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD."""
    if text_problem(text) is None:
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def sanitized(value: Any, max_depth: int = MAX_DEPTH, depth: int = 1) -> Any:
    """A parsed JSON value made storable: lone surrogates replaced, anything nested deeper
    than ``max_depth`` replaced by a note saying it was."""
    if isinstance(value, str):
        return sanitized_text(value)
    if isinstance(value, dict | list):
        if depth > max_depth:
            return f"(quarantined: nested deeper than {max_depth} levels)"
        if isinstance(value, dict):
            return {
                sanitized_text(str(k)): sanitized(v, max_depth, depth + 1) for k, v in value.items()
            }
        return [sanitized(v, max_depth, depth + 1) for v in value]
    return value


def loads_readable(text: str) -> Any:
    """``json.loads`` of a stored JSON column, made readable if it holds what the boundary
    now refuses (rows stored before it): reads never fail on one bad row."""
    try:
        value = json.loads(text)
    except RecursionError:
        return {"quarantined": "nested too deep to read"}
    if not (_SURROGATE_ESCAPE.search(text) or text.count("[") + text.count("{") > MAX_DEPTH):
        return value  # nothing the boundary refuses can be in it: no walk on the hot path
    if value_problem(value) is None:
        return value
    return sanitized(value)
