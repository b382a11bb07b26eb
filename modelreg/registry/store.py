"""The store: records, verifications, promotions, record states and the event log.

The store only stores. It decides nothing — deployability, staleness and the rollback candidate
are the rules module's (``modelreg.rules``), applied by the API (``modelreg.api``). Every query
is a method of ``Reads``, written once, over one session: ``Store.read()`` is one read-only
transaction with one consistent view of the registry; every decision that reads then writes
runs inside ``Store.locked(model_id)`` — a ``Writes`` (``Reads`` and the writes) in one
transaction holding the model's lock, so promotions, rollbacks, holds, releases, retirements
and verifications of one model are serialized and their events are numbered in commit order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlmodel import Session, select

from modelreg.clock import utcnow
from modelreg.errors import InvalidInput, ModelNotFound, RecordNotFound
from modelreg.limits import ACTOR_MAX, check_length, check_manifest
from modelreg.record import Record
from modelreg.registry.reads import Reads
from modelreg.registry.rows import (
    ADD_RETRIES,
    BadValue,
    StoredToken,
    event_row,
    row_key,
)
from modelreg.registry.tables import (
    ApiTokenRow,
    ArtifactSignatureRow,
    ModelRow,
    RecordRow,
)
from modelreg.registry.writes import Writes
from modelreg.schemas.manifest import Manifest
from modelreg.steps import Step

T = TypeVar("T")


class Store:
    """The registry's database: transactions over one engine (``read``, ``write``,
    ``locked``) and the few writes that must retry or recover from a concurrent writer."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with Session(self.engine, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def read(self) -> Iterator[Reads]:
        """Reads in one transaction (rolled back at the end: it writes nothing). PostgreSQL:
        REPEATABLE READ, so every query of it sees the same committed state; SQLite: a deferred
        transaction (WAL: a snapshot at its first read), which takes no write lock."""
        options: dict[str, Any] = {"modelreg_read_only": True}
        if self.engine.dialect.name == "postgresql":
            options["isolation_level"] = "REPEATABLE READ"
        with self._session() as session:
            session.connection(execution_options=options)
            yield Reads(session, self._manifest_json)

    @contextmanager
    def write(self, *, dry_run: bool = False) -> Iterator[Writes]:
        """One transaction that may write (no model's lock); committed when the block ends
        without an exception, rolled back otherwise — and always with ``dry_run`` (what it
        read, its own writes included, is the answer; nothing is kept)."""
        with self._session() as session:
            writes = Writes(session, self._manifest_json)
            yield writes
            _end(session, writes, dry_run)

    @contextmanager
    def locked(self, model_id: str, *, dry_run: bool = False) -> Iterator[Writes]:
        """One transaction holding ``model_id``'s lock; committed when the block ends without
        an exception, rolled back otherwise (and with ``dry_run``, as ``write``).

        PostgreSQL: ``SELECT … FOR UPDATE`` on the model's row. SQLite: every writing
        transaction is ``BEGIN IMMEDIATE`` (see db.py), which holds the database's write lock.
        """
        with self._session() as session:
            found = session.exec(
                select(ModelRow.id).where(ModelRow.model_id == model_id).with_for_update()
            ).first()
            if found is not None:
                writes = Writes(session, self._manifest_json, model_id)
                yield writes
                _end(session, writes, dry_run)
        if found is None:  # the suggestions read after our transaction (SQLite: its lock)
            with self.read() as reads:
                raise ModelNotFound(model_id, reads.model_ids())

    def ensure_verdicts(self) -> None:
        """Derive every stored verdict again when they were derived under other rules (or
        never: a registry just upgraded). Once: the first writer re-checks under the lock; a
        reader that may not write reads them derived on the fly until someone does."""
        from modelreg.registry.verdicts import (
            RULES_VERSION,
            rules_version_stored,
            settle_everything,
        )

        with self.read() as reads:
            if rules_version_stored(reads) == RULES_VERSION:
                return
        try:
            with self.write() as tx:
                tx.lock_settling()
                if rules_version_stored(tx) != RULES_VERSION:
                    settle_everything(tx)
        except DBAPIError as exc:
            if "permission denied" not in str(exc).lower() and "readonly" not in str(exc).lower():
                raise

    def _manifest_json(self, record_id: str) -> str:
        with self.read() as reads:
            row = reads.session.get(RecordRow, record_id)
            if row is None:
                raise RecordNotFound(record_id)
            return row.manifest_json

    # -- writes that retry or recover ----------------------------------------------------

    def add(
        self, manifest: Manifest, root: Path, actor: str, detail: dict[str, Any] | None = None
    ) -> tuple[Record, bool]:
        """Record ``manifest``; returns the record and whether it was new. The same facts
        always give the same record, so adding twice (or from eight hosts at once) is one
        record and one add event."""
        if manifest.model_id is None:
            raise InvalidInput("a record needs a model id", "give `model_id` (org/name)")
        unhashed = [f.path for f in manifest.files if f.sha256 is None or f.bytes is None]
        if unhashed:
            raise InvalidInput(
                f"a record's files must be hashed; {', '.join(unhashed)} has no sha256/size",
                step=Step("add", "record the artifact itself", paths=None),
            )
        check_manifest(manifest)
        check_length("actor", actor, ACTOR_MAX)
        identity = manifest.identity_digest()
        # Concurrent writers: the unique identity makes the same artifact one record; a writer
        # that loses the race for the model row (or the record) retries and finds it.
        for _attempt in range(ADD_RETRIES + 1):
            with self.read() as reads:
                existing = reads.record_by_identity(identity)
            if existing is not None:
                return existing, False
            if _attempt == ADD_RETRIES:
                break
            try:
                with self.write() as tx:
                    record = tx.insert_record(manifest, identity, root, actor, detail)
                return record, True
            except IntegrityError:
                continue
        raise RuntimeError(f"could not add record {manifest.record_id} after retries")

    def add_artifact_signature(
        self, record: Record, bundle: dict[str, Any], key_hint: str | None, actor: str
    ) -> bool:
        """Keep a model-signing bundle with the record; False when it was already kept."""
        text = json.dumps(bundle, sort_keys=True)
        digest = hashlib.sha256(text.encode()).hexdigest()
        try:
            with self.write() as tx:
                found = tx.session.exec(
                    select(ArtifactSignatureRow.id).where(
                        ArtifactSignatureRow.record_id == record.id,
                        ArtifactSignatureRow.bundle_sha256 == digest,
                    )
                ).first()
                if found is not None:
                    return False
                tx.session.add(
                    ArtifactSignatureRow(
                        record_id=record.id,
                        bundle_sha256=digest,
                        key_hint=key_hint,
                        bundle_json=text,
                        added_at=utcnow(),
                        actor=actor,
                    )
                )
                tx.session.add(
                    event_row(
                        "sign",
                        actor,
                        model_id=record.model_id,
                        record_id=record.id,
                        detail={"bundle_sha256": digest, "key_hint": key_hint},
                    )
                )
        except IntegrityError:  # kept by a concurrent add a moment ago (PostgreSQL)
            return False
        return True

    def write_once_more_on_conflict(
        self, work: Callable[[Writes], T], *, dry_run: bool = False
    ) -> T:
        """``work`` in a writing transaction (``write``). A row added concurrently under the
        same unique name (PostgreSQL) makes the transaction start over, once, and see it."""
        try:
            with self.write(dry_run=dry_run) as tx:
                return work(tx)
        except IntegrityError:
            with self.write(dry_run=dry_run) as tx:
                return work(tx)

    def define_targets(
        self, specs: dict[str, dict[str, Any]], actor: str, origin: str
    ) -> dict[str, str]:
        """``Writes.define_targets`` in a transaction of its own (started over once on a
        concurrent definition of the same name)."""
        return self.write_once_more_on_conflict(lambda tx: tx.define_targets(specs, actor, origin))

    def create_token(self, name: str, role: str, secret_sha256: str, actor: str) -> StoredToken:
        """Store a new token (its secret's digest only). Names are never reused."""
        taken = InvalidInput(
            f"a token named {name!r} exists (or existed: names are never reused, so "
            "history stays unambiguous)",
            "choose another name",
            step=Step("tokens", "see the names taken"),
        )
        try:
            with self.write() as tx:
                if tx.session.exec(select(ApiTokenRow).where(ApiTokenRow.name == name)).first():
                    raise taken
                row = ApiTokenRow(
                    name=name,
                    role=role,
                    secret_sha256=secret_sha256,
                    created_at=utcnow(),
                    created_by=actor,
                )
                tx.session.add(row)
                tx.session.add(
                    event_row("token-create", actor, detail={"name": name, "role": role})
                )
        except IntegrityError:  # the same name created concurrently (PostgreSQL)
            raise taken from None
        return StoredToken.from_row(row)

    # -- the storage boundary ------------------------------------------------------------

    def check(self, *, quarantine: bool = False, actor: str = "db-check") -> list[BadValue]:
        """Stored values that cannot be read back (rows from before the storage boundary, or
        written around it). ``quarantine``: make each readable (lone surrogates → U+FFFD,
        what nests too deep → a note), with a ``db-quarantine`` event per row."""
        from modelreg.registry import boundary

        with self.write() as tx:
            session = tx.session
            found = boundary.audit(session)
            bad = [
                BadValue(
                    getattr(row, "__tablename__", type(row).__name__),
                    row_key(row),
                    name,
                    why,
                )
                for row, name, why in found
            ]
            if not (quarantine and found):
                session.rollback()
                return bad
            for row, name, _why in found:
                setattr(row, name, boundary.quarantine_value(name, getattr(row, name)))
                session.add(row)
            for value in bad:
                session.add(
                    event_row(
                        "db-quarantine",
                        actor,
                        why=f"{value.table}.{value.column} {value.why}",
                        detail={"table": value.table, "key": value.key, "column": value.column},
                    )
                )
        return bad


def _end(session: Session, writes: Writes, dry_run: bool) -> None:
    """A writing transaction's end: settled and committed, or (a dry run) left uncommitted —
    closing the session rolls it back (and, unlike ``rollback()``, expires nothing read)."""
    if dry_run:
        return
    writes.settle()
    session.commit()
