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
from collections.abc import Iterator
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.orm import Session

from modelreg.errors import InvalidInput
from modelreg.storable import (
    _SURROGATE_ESCAPE,
    MAX_DEPTH,
    sanitized,
    sanitized_text,
    text_problem,
    value_problem,
)


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
