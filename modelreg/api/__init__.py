"""The public Python API: what the CLI and the HTTP server call, and what a notebook imports.

    import modelreg

    registry = modelreg.open()               # $MODELREG_DATABASE_URL, else the local SQLite
    added = registry.add(["model.gguf"], model_id="org/name", source="pypi://pkg==1.0")
    report = registry.verify(added.record.record_id, "cpu")
    if report.deployability.deployable:
        registry.promote(added.record.record_id, "cpu", why="release 1")
    print(registry.status("org/name").entries)

Every decision goes through the rules module (``modelreg.rules``) with the target's current
runtime fingerprint, and every decision that writes (promote, rollback, hold, release, retire,
verify) re-checks state and deployability inside one transaction that holds the model's lock:
nothing public can skip a gate. Reporting methods return the pydantic output models of
``modelreg.schemas.output`` — the same objects ``--json`` prints and the HTTP API serves.

The package is split by concern — ``records``, ``verify``, ``deploy``, ``status``, ``team``
(each a part of ``Registry`` over ``core.Core``), ``judging`` (deployability for one call),
``views`` (every conversion from the domain to the output contract) and ``offline`` (what
needs no registry) — and ``Registry`` only puts the parts together.
"""

from __future__ import annotations

from typing import Any

from modelreg import config
from modelreg.api.browse import Browse
from modelreg.api.deploy import Deploy
from modelreg.api.fleet import Fleet
from modelreg.api.offline import (
    check_suite,
    diff,
    fit,
    inspect,
    signed_run_problem_for,
    targets,
    validate_card_file,
)
from modelreg.api.records import Records
from modelreg.api.status import Status
from modelreg.api.team import Team
from modelreg.api.verify import Verify
from modelreg.errors import InvalidInput, ModelregError
from modelreg.judging import load_suite_ref, suite_label
from modelreg.validators.base import VerifyOptions

__all__ = [
    "Registry",
    "VerifyOptions",
    "check_suite",
    "database_unavailable",
    "diff",
    "fit",
    "inspect",
    "load_suite_ref",
    "open",
    "redact",
    "signed_run_problem_for",
    "suite_label",
    "targets",
    "upgrade",
    "validate_card_file",
]


def open(url: str | None = None) -> Registry:
    """Open the registry at ``url`` (a SQLAlchemy URL), else ``$MODELREG_DATABASE_URL``, else
    the SQLite file under ``$MODELREG_HOME``.

    SQLite is created or upgraded on first use; a PostgreSQL registry is created when empty and
    must be upgraded on purpose (``Registry.upgrade`` / ``modelreg db upgrade``) when older.
    Verdicts stored under older rules are derived again, once, by the first process of this
    modelreg that opens the registry. Raises ``RegistryUnavailable`` (exit 4) when the server
    cannot be reached.
    """
    from sqlalchemy.exc import DBAPIError

    from modelreg.registry.db import create_registry_engine, prepare
    from modelreg.registry.store import Store

    resolved = config.database_url(url)
    engine = create_registry_engine(resolved)
    try:
        prepare(engine, resolved)
        store = Store(engine)
        store.ensure_verdicts()
    except DBAPIError as exc:
        raise _database_error(exc, resolved) from None
    return Registry(store, resolved)


def upgrade(url: str | None = None) -> tuple[str | None, str]:
    """Bring the registry's schema to this modelreg's (under the schema lock); returns the
    revisions before and after."""
    from sqlalchemy.exc import DBAPIError

    from modelreg.registry.db import create_registry_engine, current_revision, migrate
    from modelreg.registry.db_head import SCHEMA_HEAD

    resolved = config.database_url(url)
    engine = create_registry_engine(resolved)
    try:
        before = current_revision(engine)
        migrate(engine)
        from modelreg.registry.store import Store

        Store(engine).ensure_verdicts()
    except DBAPIError as exc:
        raise _database_error(exc, resolved) from None
    return before, SCHEMA_HEAD


def _database_error(exc: Any, url: str) -> Exception:
    from modelreg.registry.db import redact, unavailable

    found = unavailable(exc, url)
    if found is not None:
        return found
    from modelreg.urls import redact_text

    reason = redact_text(str(exc.orig or exc).strip().splitlines()[0])
    return InvalidInput(
        f"cannot open the registry at {redact(url)}: {reason}",
        "check --db or MODELREG_DATABASE_URL",
    )


class Registry(Records, Verify, Deploy, Status, Team, Browse, Fleet):
    """The registry, as a library: every operation the CLI and the HTTP server offer. Each
    concern is a module of this package; this class only puts them together.

    ``with modelreg.open() as registry:`` closes its database connections at the end
    (``close()``: the same, by hand)."""

    def close(self) -> None:
        """Close the registry's database connections (a later call opens new ones)."""
        self.store.engine.dispose()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def redact(url: str) -> str:
    """A database URL with its password hidden, for messages."""
    from modelreg.registry.db import redact as redact_url

    return redact_url(url)


def database_unavailable(exc: Exception, url: str) -> ModelregError | None:
    """The error to report when ``exc`` (raised mid-call) means the database cannot be
    reached (exit 4); None when it means something else."""
    from sqlalchemy.exc import DBAPIError

    from modelreg.registry.db import unavailable

    return unavailable(exc, url) if isinstance(exc, DBAPIError) else None
