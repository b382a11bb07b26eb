"""Engine creation and migrations, for SQLite (default) and PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlmodel import create_engine

from modelreg.errors import InvalidInput

MIGRATIONS = Path(__file__).parent / "migrations"
# The newest migration's revision. Checked against alembic's view in the tests; lets an
# up-to-date database open without importing alembic (a fifth of a CLI call's start-up).
SCHEMA_HEAD = "0003"


def redact(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<unparseable database URL>"


def create_registry_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise InvalidInput(f"database URL {redact(url)!r} is not a SQLAlchemy URL") from None
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, parsed.database)
    try:
        return create_engine(url, pool_pre_ping=True)
    except (ImportError, ArgumentError) as exc:
        raise InvalidInput(f"cannot use database {redact(url)}: {exc}") from None


def _sqlite_engine(url: str, database: str | None) -> Engine:
    if database and database != ":memory:" and not database.startswith("file:"):
        path = Path(database)
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            # The registry may hold paths and hostnames: readable by its owner only.
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    engine = create_engine(url, connect_args={"timeout": 30})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide where transactions begin...
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin(connection: Any) -> None:
        # ...and take the write lock up front: a transaction that reads, then writes (the
        # production pointer, a record state) must not interleave with another writer, and a
        # deferred transaction cannot wait for the lock once it has read.
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _alembic_config() -> Any:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` (a no-op when it is already there)."""
    if revision == "head" and current_revision(engine) == SCHEMA_HEAD:
        return
    from alembic import command

    config = _alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
