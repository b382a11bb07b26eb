"""Nothing is stored that cannot be read back: one check for every row, from any door.

Every row the ORM writes — an add, a verify, an upload, an import, a location, an event, a
target, a token — passes ``check_rows`` before it is flushed (a ``before_flush`` listener on
every session): every text is valid Unicode (no lone surrogate: a JSON ``"\\ud800"`` decodes
to one, and a file name with a non-UTF-8 byte becomes one), and every JSON column parses, is
nested at most ``MAX_DEPTH`` deep and holds only valid text. A row that fails is refused with
one line (``InvalidInput``: exit 2 / 422) and its transaction rolls back: nothing is written.

Rows stored before this check (or by a writer that bypassed it) are found by ``problems``
(``modelreg db check``) and made readable by ``sanitized`` (``db check --quarantine``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session

from modelreg.errors import InvalidInput

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


def column_problem(name: str, value: Any) -> str | None:
    """Why one column's value cannot be stored and read back (None: it can)."""
    if not isinstance(value, str):
        return None
    problem = text_problem(value)
    # Only JSON that could hide a problem is parsed: an escape (\\ud800 is one) or deep nesting.
    suspicious = (
        _SURROGATE_ESCAPE.search(value) is not None
        or value.count("[") + value.count("{") > MAX_DEPTH
    )
    if problem is None and name.endswith("_json") and suspicious:
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return "is not readable JSON"
        problem = value_problem(parsed)
    return problem


def _columns(row: Any) -> Iterator[tuple[str, Any]]:
    for attribute in inspect(row).mapper.column_attrs:
        yield attribute.key, getattr(row, attribute.key, None)


def row_problem(row: Any) -> str | None:
    """``table.column: why`` for the first value of ``row`` that cannot be read back."""
    for name, value in _columns(row):
        problem = column_problem(name, value)
        if problem is not None:
            return f"{getattr(row, '__tablename__', type(row).__name__)}.{name} {problem}"
    return None


def check_rows(session: Session, _context: Any = None, _instances: Any = None) -> None:
    """The ``before_flush`` check: refuse (``InvalidInput``) a flush that would store a value
    that cannot be read back."""
    for row in (*session.new, *session.dirty):
        problem = row_problem(row)
        if problem is not None:
            raise InvalidInput(
                f"refused, nothing was written: {problem}",
                "send valid UTF-8 text and JSON nested at most "
                f"{MAX_DEPTH} levels (a JSON \\ud800 escape alone is not a character)",
            )


def install() -> None:
    """Check every flush of every session (idempotent)."""
    if not event.contains(Session, "before_flush", check_rows):
        event.listen(Session, "before_flush", check_rows)


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


# -- finding and quarantining rows stored before the boundary ------------------------------


def audit(session: Session) -> list[tuple[Any, str, str]]:
    """Every stored value that cannot be read back: (row, column, why), table by table."""
    from sqlalchemy import select
    from sqlmodel import SQLModel

    found: list[tuple[Any, str, str]] = []
    for mapper in SQLModel._sa_registry.mappers:  # every table model
        for row in session.scalars(select(mapper.class_)):
            for name, value in _columns(row):
                problem = column_problem(name, value)
                if problem is not None:
                    found.append((row, name, problem))
    return found


def quarantine_value(name: str, value: str) -> str:
    """The value made readable: lone surrogates replaced by U+FFFD; a JSON column re-encoded
    from its sanitized parse (what nests too deep replaced by a note saying so)."""
    if not name.endswith("_json"):
        return sanitized_text(value)
    try:
        parsed = json.loads(sanitized_text(value))
    except (ValueError, RecursionError):
        return json.dumps({"quarantined": "the stored JSON was not readable"})
    return json.dumps(sanitized(parsed), sort_keys=True)
