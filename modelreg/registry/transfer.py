"""``modelreg export`` / ``import``: a registry as JSON lines, with its evidence and history.

Moves a team from SQLite to PostgreSQL without losing anything: records (with their manifests),
verifications (with evidence and runtime fingerprints), promotions, record states and events.
Import is all-or-nothing in one transaction, refuses records the target already holds, and
trusts nothing: every manifest is validated (paths cannot leave their root) and every record id
must match its manifest's digest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, col, select

from modelreg.errors import InvalidInput
from modelreg.registry.db import SCHEMA_HEAD
from modelreg.registry.store import Registry
from modelreg.registry.tables import (
    EventRow,
    ModelRow,
    PromotionRow,
    RecordFileRow,
    RecordRow,
    RecordStateRow,
    VerificationRow,
)
from modelreg.schemas.manifest import first_error, load_manifest, record_id_for

FORMAT = "modelreg-export"
VERSION = 1
# line type -> (table, fields exported as they are; ids are reassigned on import)
_TABLES: dict[str, tuple[type[SQLModel], tuple[str, ...]]] = {
    "model": (ModelRow, ("model_id", "created_at")),
    "verification": (
        VerificationRow,
        (
            "run_id",
            "record_id",
            "target",
            "check",
            "required",
            "outcome",
            "classification",
            "summary",
            "evidence_json",
            "host",
            "started_at",
            "finished_at",
            "fingerprint_json",
        ),
    ),
    "promotion": (
        PromotionRow,
        (
            "model_id",
            "target",
            "record_id",
            "previous_record_id",
            "action",
            "at",
            "actor",
            "why",
        ),
    ),
    "state": (RecordStateRow, ("record_id", "state", "reason", "at", "actor")),
    "event": (
        EventRow,
        (
            "at",
            "actor",
            "kind",
            "model_id",
            "record_id",
            "target",
            "why",
            "detail_json",
        ),
    ),
}
_ORDER = ("model", "record", "verification", "promotion", "state", "event")


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        # SQLite hands back naive datetimes; everything is written in UTC.
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return value


def export_rows(registry: Registry) -> Iterator[dict[str, Any]]:
    """Every row of the registry, in an order import can replay."""
    yield {"type": "header", "format": FORMAT, "version": VERSION, "schema": SCHEMA_HEAD}
    with Session(registry.engine) as session:
        for kind in _ORDER:
            if kind == "record":
                for row in session.exec(select(RecordRow).order_by(col(RecordRow.created_at))):
                    yield {
                        "type": "record",
                        "id": row.id,
                        "root": row.root,
                        "created_at": _plain(row.created_at),
                        "created_by": row.created_by,
                        "manifest": json.loads(row.manifest_json),
                    }
                continue
            table, fields = _TABLES[kind]
            order = getattr(table, "id", None) or getattr(table, "record_id", None)
            for table_row in session.exec(select(table).order_by(order)):
                yield {"type": kind} | {f: _plain(getattr(table_row, f)) for f in fields}


def _parse_time(value: Any, where: str) -> datetime:
    try:
        return datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{where}: {value!r} is not an ISO timestamp") from None


def import_rows(registry: Registry, lines: Iterable[tuple[int, dict[str, Any]]]) -> dict[str, int]:
    """Replay exported rows into ``registry`` in one transaction; returns counts per kind."""
    counts: dict[str, int] = {}
    pending: list[SQLModel] = []
    record_ids: set[str] = set()
    models: set[str] = set()
    saw_header = False
    for number, item in lines:
        where = f"line {number}"
        kind = str(item.get("type"))
        if kind == "header":
            if item.get("format") != FORMAT or item.get("version") != VERSION:
                raise InvalidInput(f"{where}: not a {FORMAT} v{VERSION} file")
            saw_header = True
            continue
        if not saw_header:
            raise InvalidInput(f"{where}: the file does not start with a {FORMAT} header")
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "record":
            pending += _record_rows(item, where)
            record_ids.add(item["id"])
        elif kind in _TABLES:
            table, fields = _TABLES[kind]
            unknown = set(item) - set(fields) - {"type"}
            if unknown:
                raise InvalidInput(f"{where}: unknown fields {sorted(unknown)} for {kind}")
            values = {f: item.get(f) for f in fields}
            for key in ("created_at", "started_at", "finished_at", "at"):
                if key in values:
                    values[key] = _parse_time(values[key], where)
            if kind == "model":
                models.add(str(values["model_id"]))
            try:
                pending.append(table.model_validate(values))
            except ValidationError as exc:
                raise InvalidInput(f"{where}: {kind}: {first_error(exc)}") from None
        else:
            raise InvalidInput(f"{where}: unknown kind {kind!r}")
    with Session(registry.engine) as session:
        clash = session.exec(select(RecordRow.id).where(col(RecordRow.id).in_(record_ids))).all()
        if clash:
            raise InvalidInput(
                f"the registry already holds {len(clash)} of these records (e.g. {clash[0]}); "
                "import into an empty registry"
            )
        existing_models = set(
            session.exec(select(ModelRow.model_id).where(col(ModelRow.model_id).in_(models)))
        )
        try:
            for row in pending:
                if isinstance(row, ModelRow) and row.model_id in existing_models:
                    continue
                session.add(row)
                session.flush()
        except IntegrityError as exc:
            raise InvalidInput(
                "the file is not self-consistent (a row refers to a record or model it does "
                f"not contain, or repeats one): {str(exc.orig).splitlines()[0]}"
            ) from None
        session.commit()
    return counts


def _record_rows(item: dict[str, Any], where: str) -> list[SQLModel]:
    unknown = set(item) - {"type", "id", "root", "created_at", "created_by", "manifest"}
    if unknown:
        raise InvalidInput(f"{where}: unknown fields {sorted(unknown)} for record")
    if not isinstance(item.get("manifest"), dict):
        raise InvalidInput(f"{where}: record without a manifest")
    manifest = load_manifest(item["manifest"], origin=where)
    digest = manifest.digest()
    if item.get("id") != record_id_for(digest):
        raise InvalidInput(
            f"{where}: record id {item.get('id')!r} does not match its manifest "
            f"(expected {record_id_for(digest)})"
        )
    if manifest.model_id is None or any(
        f.sha256 is None or f.bytes is None for f in manifest.files
    ):
        raise InvalidInput(f"{where}: a record needs a model id and hashed files")
    if not isinstance(item.get("root"), str) or not isinstance(item.get("created_by"), str):
        raise InvalidInput(f"{where}: record needs root and created_by strings")
    rows: list[SQLModel] = [
        RecordRow(
            id=item["id"],
            manifest_sha256=digest,
            model_id=manifest.model_id,
            format=manifest.format,
            source=manifest.source,
            license=manifest.license.id,
            manifest_json=manifest.canonical_json(),
            root=item["root"],
            created_at=_parse_time(item.get("created_at"), where),
            created_by=item["created_by"],
        )
    ]
    rows += [
        RecordFileRow(record_id=item["id"], path=f.path, bytes=f.bytes or 0, sha256=f.sha256 or "")
        for f in manifest.files
    ]
    return rows
