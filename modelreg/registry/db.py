"""Engine creation and migrations, for SQLite (default) and PostgreSQL.

Migrations run under a database lock — a PostgreSQL advisory lock, an exclusive (``BEGIN
IMMEDIATE``) transaction on SQLite — and re-read the schema revision once they hold it, so any
number of processes may open a fresh or outdated registry at once: one migrates, the others
find the work done.

The embedded SQLite registry upgrades itself. A shared PostgreSQL registry is created on first
use but upgraded only on purpose (``modelreg db upgrade``): a client that finds an older schema
says which command to run, one that finds a newer schema says it is too old itself.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event, inspect, text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError

from modelreg.errors import InvalidInput, RegistryUnavailable, SchemaMismatch
from modelreg.registry.db_head import SCHEMA_HEAD
from modelreg.steps import Step

MIGRATIONS = Path(__file__).parent / "migrations"

# pg_advisory_xact_lock key for schema changes: "modelreg" in ASCII, as a bigint.
_MIGRATION_LOCK_KEY = 0x6D6F64656C726567


def redact(url: str) -> str:
    """The URL with its password hidden — in the userinfo and in query parameters — for
    messages and logs (never raises, whatever the URL looks like)."""
    from modelreg.urls import redact_url

    return redact_url(url)


def create_registry_engine(url: str) -> Engine:
    from modelreg.registry import boundary

    boundary.install()  # every row any session writes passes the storage boundary
    try:
        parsed = make_url(url)
        parsed.port  # noqa: B018 - a malformed port raises here, not at connect time
        if parsed.host:
            parsed.host.encode("idna")  # a host no resolver can be asked about (UnicodeError)
    except (ArgumentError, ValueError):  # UnicodeError is a ValueError
        raise InvalidInput(
            f"database URL {redact(url)!r} is not a SQLAlchemy URL",
            "percent-encode special characters in the password (@ → %40, / → %2F)",
        ) from None
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url, parsed.database)
    from sqlmodel import create_engine

    try:
        return create_engine(
            url,
            pool_pre_ping=True,
            # An unreachable server must not hang a deploy pipeline: fail, say "retry".
            connect_args={"connect_timeout": 10}
            if parsed.get_backend_name() == "postgresql"
            else {},
        )
    except (ImportError, ArgumentError) as exc:
        raise InvalidInput(f"cannot use database {redact(url)}: {exc}") from None


def _sqlite_engine(url: str, database: str | None) -> Engine:
    from sqlmodel import create_engine

    if database and database != ":memory:" and not database.startswith("file:"):
        path = Path(database)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists():
                # The registry may hold paths and hostnames: readable by its owner only.
                os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
        except (FileExistsError, NotADirectoryError):
            raise InvalidInput(
                f"cannot create the registry at {path}: a parent of it is a file, not a directory",
                "check MODELREG_HOME / --db",
            ) from None
        except OSError as exc:
            raise InvalidInput(f"cannot create the registry at {path}: {exc.strerror}") from None
        if path.is_dir():
            raise InvalidInput(f"the registry {path} is a directory, not a SQLite file")
        with path.open("rb") as fh:
            head = fh.read(16)
        if head and head != b"SQLite format 3\x00":
            raise InvalidInput(
                f"{path} is not a SQLite database", "point --db / MODELREG_HOME elsewhere"
            )
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
        # deferred transaction cannot wait for the lock once it has read. A read-only
        # transaction (``Store.read``) needs no lock: in WAL mode it reads a snapshot.
        options = connection.get_execution_options()
        if options.get("isolation_level") == "AUTOCOMMIT":
            return  # one statement, one implicit transaction (``Store.peek``)
        if options.get("modelreg_read_only"):
            connection.exec_driver_sql("BEGIN")
        else:
            connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def is_sqlite(engine: Engine) -> bool:
    return engine.dialect.name == "sqlite"


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


def _revision(connection: Connection) -> str | None:
    if not inspect(connection).has_table("alembic_version"):
        return None
    return connection.execute(text("SELECT version_num FROM alembic_version")).scalar()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return _revision(connection)


@contextmanager
def _migration_lock(engine: Engine) -> Iterator[Connection]:
    """One connection in one transaction holding the schema lock until it commits."""
    with engine.begin() as connection:  # SQLite: BEGIN IMMEDIATE (see _sqlite_engine)
        if engine.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK_KEY})
        yield connection


def _upgrade_locked(connection: Connection, revision: str) -> None:
    from alembic import command

    config = _alembic_config()
    config.attributes["connection"] = connection
    command.upgrade(config, revision)


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema to ``revision`` under the schema lock (a no-op when it is there)."""
    if revision == "head" and current_revision(engine) == SCHEMA_HEAD:
        return
    with _migration_lock(engine) as connection:
        if revision == "head" and _revision(connection) == SCHEMA_HEAD:
            return  # another process did it while we waited for the lock
        _upgrade_locked(connection, revision)


def _known_revisions() -> set[str]:
    return {p.name.split("_", 1)[0] for p in (MIGRATIONS / "versions").glob("[0-9]*_*.py")}


def prepare(engine: Engine, url: str) -> None:
    """Make the registry usable by this modelreg, or say exactly why it is not.

    - SQLite: create or upgrade the schema (under the lock).
    - PostgreSQL (and other servers): create the schema of an empty database (under the
      lock); an older schema needs ``modelreg db upgrade``; a newer one a newer modelreg.
    """
    revision = current_revision(engine)
    if revision == SCHEMA_HEAD:
        return
    if revision is not None and revision not in _known_revisions():
        raise SchemaMismatch(
            f"the registry at {redact(url)} has schema {revision}, newer than this modelreg "
            f"knows ({SCHEMA_HEAD})",
            "upgrade modelreg on this host to the version the registry was upgraded with",
        )
    if is_sqlite(engine) or revision is None:
        migrate(engine)
        return
    raise SchemaMismatch(
        f"the registry at {redact(url)} has schema {revision}, older than this modelreg "
        f"({SCHEMA_HEAD})",
        step=Step("upgrade", "upgrade this registry once, for every client"),
    )


def unavailable(exc: DBAPIError, url: str) -> RegistryUnavailable | None:
    """The error to raise when ``exc`` means the database server cannot be reached (refused,
    timed out, unknown host, dropped connection); None when it means something else."""
    if url.startswith("sqlite"):
        return None
    if not isinstance(exc, OperationalError) and not exc.connection_invalidated:
        return None
    from modelreg.urls import redact_text

    text = str(exc.orig or exc).strip()
    reason = redact_text(text.splitlines()[0]) if text else ""
    return RegistryUnavailable(
        f"the registry at {redact(url)} cannot be reached: {reason}",
        "nothing was changed; retry, or check --db / MODELREG_DATABASE_URL",
    )
