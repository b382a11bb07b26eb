"""Signed time, not claimed time (issue 22): which signed run is newest is decided by the time
its signature covers. An older signed pass uploaded after a newer signed failure does not
make the record deployable again; a run whose claimed times disagree with its statement, or
that is dated in the future, is refused — on SQLite and on PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

import modelreg
from modelreg.errors import InvalidInput
from modelreg.fingerprint import runtime_fingerprint
from modelreg.registry.rows import new_run_id
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.signing import load_private_key, run_statement, sign_statement
from tests.helpers import PASSING, add_synthetic, key_pair, stored


def _signed(
    registry: Any, record_id: str, private: Path, outcome: str, at: datetime
) -> tuple[list[CheckResult], dict[str, str], dict[str, Any]]:
    """A run as `verify --sign-key` on the target host would send it, signed at ``at``."""
    record = registry.get(record_id)
    outcomes = dict(PASSING) | {"gguf-cpu-smoke": outcome}
    results = [
        CheckResult(
            check=check,
            required=True,
            outcome=Outcome(o),
            summary=o,
            started_at=at - timedelta(seconds=5),
            finished_at=at - timedelta(seconds=1),
        )
        for check, o in outcomes.items()
    ]
    fingerprint = runtime_fingerprint(registry.target("edge"), "llama.cpp")
    files = stored(registry).files([record_id])[record_id]
    statement = run_statement(
        record_id=record_id,
        model_id=record.model_id,
        target="edge",
        run_id=new_run_id(),
        host="edge-1",
        file_digests={f.path: f.sha256 for f in files},
        checks=[r.model_dump(mode="json") for r in results],
        fingerprint=fingerprint,
        signed_at=at.isoformat(),
    )
    return results, fingerprint, sign_statement(statement, load_private_key(private))


def _trusting_edge(db_url: str, tmp_path: Path) -> tuple[Any, Path]:
    """A registry whose shared target ``edge`` counts runs signed by a fresh key: (registry,
    the private key's path)."""
    private, public = key_pair(tmp_path, "ci")
    spec = tmp_path / "edge.yaml"
    spec.write_text(
        "targets:\n  edge:\n    hosts: ['edge-*']\n    memory_gib: 8\n"
        f"    trust: {{verifier_keys: ['{public}']}}\n"
    )
    registry = modelreg.open(db_url)
    registry.define_targets(spec, actor="admin")
    return registry, private


def _upload(registry: Any, record_id: str, run: Any, **changes: Any) -> Any:
    results, fingerprint, envelope = run
    if changes:
        results = [r.model_copy(update=changes) for r in results]
    return registry.upload_run(
        record_id, "edge", results, host="edge-1", fingerprint=fingerprint, envelope=envelope
    )


def test_an_older_signed_pass_never_replays_over_a_newer_failure(
    db_url: str, tmp_path: Path
) -> None:
    registry, private = _trusting_edge(db_url, tmp_path)
    record = add_synthetic(registry, 1)
    now = datetime.now(UTC)
    old_pass = _signed(registry, record, private, "pass", now - timedelta(hours=2))
    new_fail = _signed(registry, record, private, "fail", now - timedelta(hours=1))

    assert not _upload(registry, record, new_fail).deployability.deployable
    # The older pass arrives later: kept as history, it decides nothing (before the fix: the
    # newest stored signed run, so the record was deployable again).
    late = _upload(registry, record, old_pass)
    assert not late.run.counted and not late.deployability.deployable
    verdict = registry.deployability(record, "edge")
    assert not verdict.deployable and "gguf-cpu-smoke: fail" in verdict.summary

    # Replayed with the times moved: refused, nothing stored.
    before = len(registry.imported_runs(record).runs)
    replay = _signed(registry, record, private, "pass", now - timedelta(hours=3))
    with pytest.raises(InvalidInput) as caught:
        _upload(registry, record, replay, finished_at=datetime(2030, 1, 1, tzinfo=UTC))
    assert "in the future" in caught.value.message
    with pytest.raises(InvalidInput) as caught:
        _upload(registry, record, replay, finished_at=now)
    assert "after it was signed" in caught.value.message
    future = _signed(registry, record, private, "pass", now + timedelta(days=1))
    with pytest.raises(InvalidInput) as caught:
        _upload(registry, record, future, finished_at=now)
    assert "signed in the future" in caught.value.message
    assert len(registry.imported_runs(record).runs) == before

    # A newer signed pass does count.
    fresh = _signed(registry, record, private, "pass", now - timedelta(minutes=1))
    assert _upload(registry, record, fresh).deployability.deployable


def test_a_database_writer_cannot_reorder_signed_runs(db_url: str, tmp_path: Path) -> None:
    """The stored signed time is checked against the statement: moving it forward in the
    database makes that run not count, never the older pass deployable."""
    from sqlalchemy import update

    from modelreg.registry.tables import RunRow

    registry, private = _trusting_edge(db_url, tmp_path)
    record = add_synthetic(registry, 1)
    now = datetime.now(UTC)
    old_pass = _upload(
        registry, record, _signed(registry, record, private, "pass", now - timedelta(hours=2))
    )
    _upload(registry, record, _signed(registry, record, private, "fail", now - timedelta(hours=1)))
    with registry.store.engine.begin() as c:
        c.execute(
            update(RunRow)
            .where(RunRow.run_id == old_pass.run.run_id)
            .values(signed_at=now + timedelta(days=3))
        )
    # The stored verdict never turns deployable (a "deployable" row on a target that counts
    # only signed runs is derived again as it is read); derived again, it says why.
    assert not registry.deployability(record, "edge").deployable
    registry.db_check(quarantine=True)
    verdict = registry.deployability(record, "edge")
    assert not verdict.deployable
    assert "the stored signed time is not the signed one" in verdict.summary


@pytest.mark.parametrize(
    "when",
    [
        datetime(2026, 6, 1, 23, 30, tzinfo=timezone(timedelta(hours=14))),
        datetime(2026, 6, 1, 0, 1, tzinfo=timezone(-timedelta(hours=23, minutes=59))),
        datetime(1, 1, 2, tzinfo=UTC),
        datetime(9999, 12, 30, 23, 59, 59, tzinfo=UTC),
    ],
    ids=["+14:00", "-23:59", "year 1", "year 9999"],
)
def test_times_are_stored_in_utc_on_every_backend(db_url: str, when: datetime) -> None:
    """One time representation: the same instant comes back (in UTC) from SQLite and from
    PostgreSQL — SQLite used to drop the offset (14 h off)."""
    from sqlalchemy import select

    from modelreg.clock import utcnow
    from modelreg.registry.tables import EventRow

    registry = modelreg.open(db_url)
    with registry.store.engine.begin() as c:
        c.execute(
            EventRow.__table__.insert().values(
                at=when, actor="t", kind="probe", detail_json="{}", model_id=None
            )
        )
    with registry.store.engine.begin() as c:
        (stored,) = c.execute(select(EventRow.at).where(EventRow.kind == "probe")).scalars()
    assert stored == when and stored.utcoffset() == timedelta(0)
    assert utcnow().tzinfo is UTC
    naive = EventRow.__table__.insert().values(
        at=datetime(2026, 1, 1), actor="t", kind="naive", detail_json="{}"
    )
    with pytest.raises(Exception, match="without a UTC offset"), registry.store.engine.begin() as c:
        c.execute(naive)
