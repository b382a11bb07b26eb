"""Answers that need no ORM: read a SQLite registry with the standard library when the answer
is "nothing", so that a command on an empty registry does not pay for importing SQLAlchemy
(about 0.3 s of a CLI call on this machine).

Every function returns None whenever it cannot be sure — another backend, a missing or
outdated schema, any error — and the caller then takes the full path.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from modelreg.registry.db_head import SCHEMA_HEAD


def _sqlite_path(url: str) -> Path | None:
    prefix = "sqlite:///"
    if not url.startswith(prefix) or "?" in url:
        return None
    path = Path(url.removeprefix(prefix))
    return path if path.is_file() else None


def nothing_in_production(url: str) -> bool | None:
    """True when the SQLite registry at ``url`` is current and has no promotion at all."""
    path = _sqlite_path(url)
    if path is None:
        return None
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
        try:
            revision = connection.execute("SELECT version_num FROM alembic_version").fetchone()
            if revision is None or revision[0] != SCHEMA_HEAD:
                return None
            return connection.execute("SELECT 1 FROM promotions LIMIT 1").fetchone() is None
        finally:
            connection.close()
    except sqlite3.Error:
        return None
