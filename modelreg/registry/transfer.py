"""``modelreg export`` / ``import``: a registry as JSON lines, with its evidence and history.

Moves a team from SQLite to PostgreSQL without losing anything: records (with their manifests),
verifications (with evidence and runtime fingerprints), promotions, record states and events.
Import is all-or-nothing in one transaction, refuses records the target already holds, and
trusts nothing: every manifest is validated (paths cannot leave their root) and every record id
must match its manifest's digest.

An export ends with a trailer holding its row counts and the sha256 of everything before it,
and is written to a private temporary file renamed into place: a file cut short by a killed
export, or altered afterwards, is refused whole.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, col, select

from modelreg.errors import InvalidInput
from modelreg.jsonio import parse_json
from modelreg.limits import ACTOR_MAX, MAX_LIMITATIONS, WHY_MAX, check_manifest
from modelreg.locations import parse_location
from modelreg.registry.db_head import SCHEMA_HEAD
from modelreg.registry.rows import event_row, record_rows, stored_spec, target_define_event
from modelreg.registry.store import Store
from modelreg.registry.tables import (
    ArtifactSignatureRow,
    EventRow,
    ModelRow,
    ModelSuiteRow,
    PromotionRow,
    RecordLocationRow,
    RecordRow,
    RecordStateRow,
    RunRow,
    TargetRow,
    VerificationRow,
)
from modelreg.registry.writes import number_records
from modelreg.schemas.manifest import (
    LABEL_RE,
    VERSION_LIKE_RE,
    first_error,
    load_manifest,
    record_id_for,
)
from modelreg.schemas.output import ExportOutput, ImportOutput
from modelreg.steps import Step
from modelreg.targets import check_shared_spec

FORMAT = "modelreg-export"
VERSION = 4
# 3 added shared targets and record locations; 4 a promotion's approval, forced mark and label
# (a file of 2 or 3 has none: they import as none).
READABLE_VERSIONS = (2, 3, 4)
MAX_LINE_BYTES = 64 << 20
# line type -> (table, fields exported as they are; ids are reassigned on import)
_TABLES: dict[str, tuple[type[SQLModel], tuple[str, ...]]] = {
    "model": (ModelRow, ("model_id", "created_at")),
    "run": (
        RunRow,
        (
            "run_id",
            "record_id",
            "target",
            "origin",
            "origin_detail",
            "envelope_json",
            "signer_key_id",
            "created_at",
            "exploratory",
        ),
    ),
    "signature": (
        ArtifactSignatureRow,
        ("record_id", "bundle_sha256", "key_hint", "bundle_json", "added_at", "actor"),
    ),
    "suite": (ModelSuiteRow, ("model_id", "suite_sha256", "suite_json", "attached_at", "actor")),
    "target": (TargetRow, ("name", "spec_json", "spec_sha256", "defined_at", "defined_by")),
    "location": (RecordLocationRow, ("record_id", "url", "added_at", "added_by")),
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
            # The approval (owner, known limitations, re-test date), a break-glass rollback's
            # reasons and the label: absent from files exported before they were.
            "owner",
            "limitations_json",
            "retest_by",
            "forced_json",
            "label",
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
_ORDER = (
    "target",
    "model",
    "record",
    "location",
    "run",
    "verification",
    "signature",
    "suite",
    "promotion",
    "state",
    "event",
)
_TIME_FIELDS = (
    "created_at",
    "started_at",
    "finished_at",
    "at",
    "added_at",
    "attached_at",
    "defined_at",
    "retest_by",
)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        # SQLite hands back naive datetimes; everything is written in UTC.
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
    return value


def export_rows(store: Store) -> Iterator[dict[str, Any]]:
    """Every row of the registry, in an order import can replay (no trailer)."""
    yield {"type": "header", "format": FORMAT, "version": VERSION, "schema": SCHEMA_HEAD}
    with store.read() as reads:
        session = reads.session
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
            order = (
                getattr(table, "id", None)
                or getattr(table, "name", None)
                or getattr(table, "created_at", None)
                or getattr(table, "record_id", None)
                or getattr(table, "model_id", None)
            )
            for table_row in session.exec(select(table).order_by(order)):
                yield {"type": kind} | {f: _plain(getattr(table_row, f)) for f in fields}


def _trailer(counts: dict[str, int], body_sha256: str) -> dict[str, Any]:
    return {
        "type": "trailer",
        "rows": sum(counts.values()),
        "counts": dict(sorted(counts.items())),
        "sha256": body_sha256,
    }


def export_text(rows: Iterable[dict[str, Any]]) -> str:
    """Rows (a header first) as an export file's text, trailer included — for tools and tests
    that build an export by hand."""
    body = hashlib.sha256()
    counts: dict[str, int] = {}
    lines = []
    for row in rows:
        line = json.dumps(row, sort_keys=True) + "\n"
        body.update(line.encode())
        lines.append(line)
        if row.get("type") != "header":
            kind = str(row.get("type"))
            counts[kind] = counts.get(kind, 0) + 1
    return "".join(lines) + json.dumps(_trailer(counts, body.hexdigest()), sort_keys=True) + "\n"


def _write_rows(store: Store, out: TextIO) -> tuple[int, str]:
    """Write every row and the trailer to ``out``; returns (rows, sha256 of the body)."""
    digest = hashlib.sha256()
    counts: dict[str, int] = {}
    for row in export_rows(store):
        line = json.dumps(row, sort_keys=True) + "\n"
        digest.update(line.encode())
        out.write(line)
        if row["type"] != "header":
            counts[row["type"]] = counts.get(row["type"], 0) + 1
    body = digest.hexdigest()
    out.write(json.dumps(_trailer(counts, body), sort_keys=True) + "\n")
    return sum(counts.values()), body


def export_registry(
    store: Store, output: Path | None, stream: TextIO | None = None
) -> ExportOutput:
    """Write the registry to ``output`` (a private temporary file renamed into place, mode
    0600), or to ``stream`` (default stdout) when no file is given."""
    if output is None:
        rows, body = _write_rows(store, stream or sys.stdout)
        return ExportOutput(path=None, rows=rows, sha256=body)
    if output.is_dir():
        raise InvalidInput(f"export: {output} is a directory", "give a file name to write")
    directory = output.parent if str(output.parent) else Path(".")
    if not directory.is_dir():
        raise InvalidInput(f"export: {directory} does not exist", "create the directory first")
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{output.name}.", suffix=".partial")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            rows, body = _write_rows(store, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return ExportOutput(path=str(output), rows=rows, sha256=body)


def read_export(path: Path) -> tuple[list[tuple[int, dict[str, Any]]], str]:
    """The rows of an export file and the file's sha256, after checking its trailer: a file
    that is truncated, altered, or has no trailer is refused whole. Lines longer than
    ``MAX_LINE_BYTES`` are refused while reading."""
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory", "give a file written by export")
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        raise InvalidInput(f"{path}: file not found") from None
    except OSError as exc:
        raise InvalidInput(f"{path}: cannot read: {exc.strerror}") from None
    whole = hashlib.sha256()
    body = hashlib.sha256()
    rows: list[tuple[int, dict[str, Any]]] = []
    trailer: dict[str, Any] | None = None
    with fh:
        number = 0
        while True:
            raw = fh.readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            number += 1
            if len(raw) > MAX_LINE_BYTES:
                raise InvalidInput(f"{path}: line {number} is longer than {MAX_LINE_BYTES} bytes")
            whole.update(raw)
            if trailer is not None:
                if raw.strip():
                    raise InvalidInput(f"{path}: line {number}: data after the trailer")
                continue
            try:
                item = parse_json(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise InvalidInput(f"{path}: line {number} is not UTF-8 text") from None
            except ValueError as exc:
                raise InvalidInput(f"{path}: line {number} is not JSON: {exc}") from None
            if not isinstance(item, dict):
                raise InvalidInput(f"{path}: line {number} is not a JSON object")
            if item.get("type") == "trailer":
                trailer = item
                continue
            body.update(raw)
            rows.append((number, item))
    if trailer is None:
        raise InvalidInput(
            f"{path}: no trailer: the export is incomplete (cut short?) and is refused whole",
            step=Step("export", "export again", output=None),
        )
    counts: dict[str, int] = {}
    for _, item in rows:
        kind = str(item.get("type"))
        if kind != "header":
            counts[kind] = counts.get(kind, 0) + 1
    if trailer != _trailer(counts, body.hexdigest()):
        raise InvalidInput(
            f"{path}: the trailer does not match the rows before it: the file was altered or "
            "cut, and is refused whole",
            step=Step("export", "export again", output=None),
        )
    return rows, whole.hexdigest()


def import_registry(
    store: Store, path: Path, actor: str, *, with_targets: bool = False
) -> ImportOutput:
    """Check and load an export into ``store`` in one transaction; each model it touches gets
    an ``import`` event naming the file's sha256 and what it added."""
    rows, file_sha256 = read_export(path)
    counts, skipped = import_rows(
        store,
        rows,
        file_sha256=file_sha256,
        source=str(path),
        actor=actor,
        with_targets=with_targets,
    )
    return ImportOutput(path=str(path), sha256=file_sha256, counts=counts, skipped=skipped)


def _parse_time(value: Any, where: str) -> datetime:
    """An ISO timestamp with its UTC offset (a time without one is not a point in time;
    exports write UTC)."""
    try:
        when = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{where}: {value!r} is not an ISO timestamp") from None
    if when.tzinfo is None:
        raise InvalidInput(f"{where}: {value!r} has no UTC offset", "give e.g. …+00:00")
    return when


def import_rows(
    store: Store,
    lines: Iterable[tuple[int, dict[str, Any]]],
    *,
    file_sha256: str = "",
    source: str = "",
    actor: str = "import",
    with_targets: bool = False,
) -> tuple[dict[str, int], dict[str, int]]:
    """Check every exported row, then replay them into ``store`` in one transaction; returns
    (counts per kind imported, counts per kind skipped). Nothing already in the registry is
    overwritten, and imported evidence never decides deployability unless it is signed by a
    key the target trusts. Shared target definitions decide what counts (their trusted keys),
    so they are imported only with ``with_targets``."""
    counts: dict[str, int] = {}
    rows: dict[str, list[tuple[str, Any]]] = {kind: [] for kind in _ORDER}
    saw_header = False
    for number, item in lines:
        where = f"line {number}"
        kind = str(item.get("type"))
        if kind == "header":
            if item.get("format") != FORMAT or item.get("version") not in READABLE_VERSIONS:
                raise InvalidInput(
                    f"{where}: not a {FORMAT} file of version "
                    + " or ".join(str(v) for v in READABLE_VERSIONS)
                )
            saw_header = True
            continue
        if not saw_header:
            raise InvalidInput(f"{where}: the file does not start with a {FORMAT} header")
        counts[kind] = counts.get(kind, 0) + 1
        if kind == "record":
            rows["record"].append((where, _record_rows(item, where)))
        elif kind in _TABLES:
            rows[kind].append((where, _table_row(kind, item, where)))
        else:
            raise InvalidInput(f"{where}: unknown kind {kind!r}")
    imported = ImportCheck(rows, file_sha256)
    skipped: dict[str, int] = {}
    targets = _shared_targets(rows["target"]) if with_targets else {}
    if rows["target"] and not with_targets:
        skipped["target"] = counts.pop("target")
    with store.write() as tx:
        session = tx.session
        imported.against_registry(session)
        try:
            for row in imported.rows_to_write(session):
                session.add(row)
                session.flush()
            number_records(session)
            _import_targets(session, targets, actor, f"import of {source} ({file_sha256})")
            for model_id, added in sorted(imported.per_model().items()):
                session.add(
                    event_row(
                        "import",
                        actor,
                        model_id=model_id,
                        detail={"file": source, "sha256": file_sha256, "added": added},
                    )
                )
            session.flush()
        except IntegrityError as exc:
            raise InvalidInput(
                "the file is not self-consistent (a row refers to a record or model it does "
                f"not contain, or repeats one): {str(exc.orig).splitlines()[0]}"
            ) from None
    return counts, skipped


def _check_approval(p: PromotionRow, where: str) -> None:
    """A promotion's approval, forced mark and label as promote and rollback write them, and
    nothing else: an owner and limitations under promote's bounds, a label only on a promote
    (a label that is one), a forced mark only on a rollback — a forced mark is what lets the
    gate pass a production that is not deployable, so an export file cannot grant it."""
    if p.owner is not None and (
        not p.owner.strip() or len(p.owner) > ACTOR_MAX or "\x00" in p.owner
    ):
        raise InvalidInput(f"{where}: owner is blank, has a NUL or is over {ACTOR_MAX} characters")
    limitations = _text_list(p.limitations_json, f"{where}: limitations_json")
    if len(limitations) > MAX_LIMITATIONS:
        raise InvalidInput(f"{where}: {len(limitations)} limitations: at most {MAX_LIMITATIONS}")
    forced = _text_list(p.forced_json, f"{where}: forced_json")
    if forced and p.action != "rollback":
        raise InvalidInput(f"{where}: only a rollback is forced (this is a {p.action})")
    if p.label is not None:
        if p.action != "promote":
            raise InvalidInput(f"{where}: only a promote is labelled (this is a {p.action})")
        if not LABEL_RE.fullmatch(p.label) or VERSION_LIKE_RE.fullmatch(p.label):
            raise InvalidInput(f"{where}: label {p.label[:80]!r} is not a label")


def _text_list(value: str | None, where: str) -> list[str]:
    """A JSON list of texts kept in a text column (a promotion's limitations or forced
    reasons): every status read parses it, so a malformed one is refused at import — each
    text not blank, without NUL, at most WHY_MAX characters."""
    if value is None:
        return []
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{where}: not JSON") from None
    if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
        raise InvalidInput(f"{where}: not a JSON list of strings")
    if any(not v.strip() or "\x00" in v or len(v) > WHY_MAX for v in parsed):
        raise InvalidInput(f"{where}: a text is blank, has a NUL or is over {WHY_MAX} characters")
    return parsed


def _table_row(kind: str, item: dict[str, Any], where: str) -> Any:
    table, fields = _TABLES[kind]
    unknown = set(item) - set(fields) - {"type"}
    if unknown:
        raise InvalidInput(f"{where}: unknown fields {sorted(unknown)} for {kind}")
    # A field an older export does not have takes the table's default.
    values = {f: item.get(f) for f in fields if f in item or f not in _DEFAULTED}
    for key in _TIME_FIELDS:
        if key in values and not (key in _NULLABLE_TIMES and values[key] is None):
            values[key] = _parse_time(values[key], where)
    try:
        return table.model_validate(values)
    except ValidationError as exc:
        raise InvalidInput(f"{where}: {kind}: {first_error(exc)}") from None


_NULLABLE_TIMES = {"retest_by"}
# Added after format 3 was written: absent in older files.
_DEFAULTED = {"exploratory", "owner", "limitations_json", "retest_by", "forced_json", "label"}
_OUTCOMES = {"pass", "fail", "unavailable", "skipped"}
_STATES = {"held", "retired"}
_ACTIONS = {"promote", "rollback"}


class ImportCheck:
    """The consistency rules an import must meet before anything is written."""

    def __init__(self, rows: dict[str, list[tuple[str, Any]]], file_sha256: str) -> None:
        from modelreg.schemas.manifest import MODEL_ID_RE

        self.rows = rows
        self.file_sha256 = file_sha256
        self.records: dict[str, RecordRow] = {}
        for where, its_rows in rows["record"]:
            record = its_rows[0]
            if record.id in self.records:
                raise InvalidInput(f"{where}: record {record.id} appears twice")
            self.records[record.id] = record
        self.models = {row.model_id for _, row in rows["model"]}
        for where, row in rows["model"]:
            if not MODEL_ID_RE.match(row.model_id):
                raise InvalidInput(f"{where}: model id {row.model_id!r} is not org/name")
        for record in self.records.values():
            if record.model_id not in self.models:
                raise InvalidInput(f"record {record.id}: its model {record.model_id} has no row")
        self.runs: dict[str, RunRow] = {}
        for where, run in rows["run"]:
            self._known_record(run.record_id, where)
            if run.run_id in self.runs:
                raise InvalidInput(f"{where}: run {run.run_id} appears twice")
            # Whatever the file says, these runs were not produced here: they are kept as
            # history and count only with a signature by a key the target trusts.
            detail = f"imported from {file_sha256}" + (
                f" (origin there: {run.origin})" if run.origin != "imported" else ""
            )
            run.origin, run.origin_detail = "imported", detail
            run.signer_key_id = None  # who signed is decided by checking, never by the file
            self.runs[run.run_id] = run
        for where, v in rows["verification"]:
            self._known_record(v.record_id, where)
            if v.outcome not in _OUTCOMES:
                raise InvalidInput(f"{where}: outcome {v.outcome!r} is not one of {_OUTCOMES}")
            run = self.runs.get(v.run_id)
            if run is None or run.record_id != v.record_id or run.target != v.target:
                raise InvalidInput(f"{where}: verification of a run the file does not declare")
        self._check_signed_runs()
        self._gate_terms()
        for where, state in rows["state"]:
            self._known_record(state.record_id, where)
            if state.state not in _STATES:
                raise InvalidInput(f"{where}: state {state.state!r} is not held or retired")
        for where, signature in rows["signature"]:
            self._known_record(signature.record_id, where)
        for where, suite in rows["suite"]:
            if suite.model_id not in self.models:
                raise InvalidInput(f"{where}: suite of a model the file does not contain")
        for where, location in rows["location"]:
            self._known_record(location.record_id, where)
            try:
                location.url = parse_location(location.url).url
            except InvalidInput as exc:
                raise InvalidInput(f"{where}: {exc.message}") from None
        self._check_promotions()

    def _check_signed_runs(self) -> None:
        """A signed run's envelope must be its statement: the record, target and run id, the
        host, and each check's summary and evidence as signed (outcomes, fingerprint and
        files are compared whenever the run is judged). A run whose shown evidence is not
        the signed evidence is refused, not imported with a borrowed signature."""
        from datetime import UTC, datetime

        from modelreg.signing import (
            SignatureInvalid,
            run_details_problem,
            run_envelope_statement,
            signed_time,
            signed_time_problem,
        )

        checks: dict[str, list[tuple[str, Any]]] = {}
        hosts: dict[str, set[str]] = {}
        finished: dict[str, list[datetime]] = {}
        for where, v in self.rows["verification"]:
            finished.setdefault(v.run_id, []).append(v.finished_at)
            try:
                evidence = json.loads(v.evidence_json)
            except json.JSONDecodeError:
                raise InvalidInput(f"{where}: evidence_json is not JSON") from None
            checks.setdefault(v.run_id, []).append((v.summary, evidence))
            hosts.setdefault(v.run_id, set()).add(v.host)
        for run_id, run in self.runs.items():
            if run.envelope_json is None:
                continue
            try:
                statement = run_envelope_statement(json.loads(run.envelope_json))
            except (json.JSONDecodeError, SignatureInvalid) as exc:
                why = exc.message if isinstance(exc, SignatureInvalid) else "not JSON"
                raise InvalidInput(f"run {run_id}: its envelope: {why}") from None
            predicate = statement["predicate"]
            named = (predicate.get("record_id"), predicate.get("target"), predicate.get("run_id"))
            if named != (run.record_id, run.target, run_id):
                raise InvalidInput(f"run {run_id}: its envelope was signed for another run")
            run_hosts = hosts.get(run_id) or {""}
            if len(run_hosts) != 1:
                raise InvalidInput(f"run {run_id}: its checks name more than one host")
            problem = run_details_problem(
                statement, run_hosts.pop(), checks.get(run_id, [])
            ) or signed_time_problem(statement, finished.get(run_id, []), datetime.now(UTC))
            if problem is not None:
                raise InvalidInput(f"run {run_id}: its envelope does not match it: {problem}")
            run.signed_at = signed_time(statement)

    def _gate_terms(self) -> None:
        """Each run's gate terms worked out here from its checks' evidence: never the file's."""
        from modelreg.suites import run_gate_terms

        evidence: dict[str, list[tuple[bool, dict[str, Any]]]] = {}
        for _, v in self.rows["verification"]:
            found = json.loads(v.evidence_json)
            if isinstance(found, dict):
                evidence.setdefault(v.run_id, []).append((bool(v.required), found))
        for run_id, run in self.runs.items():
            terms = run_gate_terms(evidence.get(run_id, []), run.target)
            run.gate_terms_json = terms.to_json() if terms is not None else None

    def _known_record(self, record_id: str, where: str) -> None:
        if record_id not in self.records:
            raise InvalidInput(f"{where}: refers to record {record_id!r}, not in the file")

    def _check_promotions(self) -> None:
        """Each (model, target)'s promotions form one chain over records of that model."""
        last: dict[tuple[str, str], str] = {}
        for where, p in self.rows["promotion"]:
            self._known_record(p.record_id, where)
            if self.records[p.record_id].model_id != p.model_id:
                raise InvalidInput(f"{where}: promotes a record of another model")
            if p.action not in _ACTIONS:
                raise InvalidInput(f"{where}: action {p.action!r} is not promote or rollback")
            _check_approval(p, where)
            key = (p.model_id, p.target)
            if p.previous_record_id != last.get(key):
                raise InvalidInput(
                    f"{where}: the promotion chain of {p.model_id} on {p.target} is broken "
                    f"(previous {p.previous_record_id!r}, expected {last.get(key)!r})"
                )
            last[key] = p.record_id
        self.pointers = set(last)

    def against_registry(self, session: Session) -> None:
        """Nothing the registry holds may be overwritten: its records, its production
        pointers, its attached suites."""
        clash = session.exec(select(RecordRow.id).where(col(RecordRow.id).in_(self.records))).all()
        if clash:
            raise InvalidInput(
                f"the registry already holds {len(clash)} of these records (e.g. {clash[0]})",
                "import into an empty registry",
            )
        for model_id, target in sorted(self.pointers):
            held = session.exec(
                select(PromotionRow.id).where(
                    PromotionRow.model_id == model_id, PromotionRow.target == target
                )
            ).first()
            if held is not None:
                raise InvalidInput(
                    f"the registry already has production for {model_id} on {target}: the "
                    "import would overwrite it"
                )
        suites = [suite.model_id for _, suite in self.rows["suite"]]
        if (
            suites
            and session.exec(
                select(ModelSuiteRow.model_id).where(col(ModelSuiteRow.model_id).in_(suites))
            ).first()
        ):
            raise InvalidInput("the registry already has a suite attached to a model of the file")

    def rows_to_write(self, session: Session) -> Iterator[Any]:
        existing = set(
            session.exec(select(ModelRow.model_id).where(col(ModelRow.model_id).in_(self.models)))
        )
        for _, model in self.rows["model"]:
            if model.model_id not in existing:
                yield model
        for _, its_rows in self.rows["record"]:
            yield from its_rows
        # Everything after the records, in export order; shared targets are imported apart.
        for kind in _ORDER[_ORDER.index("record") + 1 :]:
            for _, row in self.rows[kind]:
                yield row

    def per_model(self) -> dict[str, dict[str, int]]:
        added: dict[str, dict[str, int]] = {}

        def bump(model_id: str, kind: str) -> None:
            tally = added.setdefault(model_id, {})
            tally[kind] = tally.get(kind, 0) + 1

        for record in self.records.values():
            bump(record.model_id, "record")
        for _, run in self.rows["run"]:
            bump(self.records[run.record_id].model_id, "run (untrusted unless signed)")
        for kind in ("promotion", "event"):
            for _, row in self.rows[kind]:
                if row.model_id:
                    bump(row.model_id, kind)
        for _, state in self.rows["state"]:
            bump(self.records[state.record_id].model_id, "state")
        return added


def _shared_targets(rows: list[tuple[str, TargetRow]]) -> dict[str, tuple[TargetRow, Any]]:
    """name -> (the row, with its canonical spec JSON and sha256; the spec) of the file's
    shared targets, each checked as ``targets add`` checks a YAML file; a name twice is
    refused."""
    found: dict[str, tuple[TargetRow, Any]] = {}
    for where, row in rows:
        if row.name in found:
            raise InvalidInput(f"{where}: target {row.name!r} appears twice")
        try:
            data = json.loads(row.spec_json)
        except json.JSONDecodeError:
            raise InvalidInput(f"{where}: target {row.name!r}: its spec is not JSON") from None
        if hashlib.sha256(row.spec_json.encode()).hexdigest() != row.spec_sha256:
            raise InvalidInput(f"{where}: target {row.name!r}: spec_sha256 does not match its spec")
        spec = check_shared_spec(row.name, data, where)
        row.spec_json, row.spec_sha256 = stored_spec(spec)
        found[row.name] = (row, spec)
    return found


def _import_targets(
    session: Session,
    specs: dict[str, tuple[TargetRow, Any]],
    actor: str,
    origin: str,
) -> None:
    """Store the file's shared targets (who defined them when, as the file says): a new name
    is defined, with a ``target-define`` event by the importer; an identical definition is
    kept; a different one is refused."""
    for name, (row, spec) in sorted(specs.items()):
        digest = row.spec_sha256
        held = session.get(TargetRow, name)
        if held is not None:
            if held.spec_sha256 != digest:
                raise InvalidInput(
                    f"the registry already shares another definition of target {name!r}: "
                    "the import would change it",
                    "remove it first, or import without `with_targets`",
                    step=Step("remove_target", name=name, why=None),
                )
            continue
        session.add(row)
        session.add(target_define_event(name, spec, digest, None, actor, origin))


def _record_rows(item: dict[str, Any], where: str) -> list[SQLModel]:
    unknown = set(item) - {"type", "id", "root", "created_at", "created_by", "manifest"}
    if unknown:
        raise InvalidInput(f"{where}: unknown fields {sorted(unknown)} for record")
    if not isinstance(item.get("manifest"), dict):
        raise InvalidInput(f"{where}: record without a manifest")
    manifest = load_manifest(item["manifest"], origin=where)
    check_manifest(manifest, where)
    digest = manifest.digest()
    identity = manifest.identity_digest()
    # Records added before identity digests keep the id their whole-manifest digest gave them.
    if item.get("id") not in (record_id_for(identity), record_id_for(digest)):
        raise InvalidInput(
            f"{where}: record id {item.get('id')!r} does not match its manifest "
            f"(expected {record_id_for(identity)})"
        )
    if manifest.model_id is None or any(
        f.sha256 is None or f.bytes is None for f in manifest.files
    ):
        raise InvalidInput(f"{where}: a record needs a model id and hashed files")
    if not isinstance(item.get("root"), str) or not isinstance(item.get("created_by"), str):
        raise InvalidInput(f"{where}: record needs root and created_by strings")
    return record_rows(
        manifest,
        item["id"],
        identity if item["id"] == record_id_for(identity) else digest,
        item["root"],
        _parse_time(item.get("created_at"), where),
        item["created_by"],
    )
