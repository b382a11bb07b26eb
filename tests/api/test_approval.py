"""The approval record (issue 24, item 6): promote keeps who answers for a release, what it is
known not to do and when it must be tested again; status says when that day has passed; the
card and a rollback carry it. And the plumbing of ``promote --accept-relaxed-gate`` (item 1):
refused without a reason, bad input when nothing was relaxed."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import modelreg
from modelreg import clock
from modelreg.errors import InvalidInput
from tests.helpers import add_synthetic, record_run, stored

MODEL = "rules/alpha"


def _promoted(registry: Any, i: int = 1, **approval: Any) -> str:
    record = add_synthetic(registry, i)
    record_run(registry, record)
    registry.promote(record, "cpu", why=f"build {i}", **approval)
    return record


def _days_from_now(days: int) -> date:
    return (datetime.now(UTC) + timedelta(days=days)).date()


def test_promote_keeps_owner_limitations_and_retest_date(registry: Any) -> None:
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    due = _days_from_now(30)
    out = registry.promote(
        record,
        "cpu",
        why="release 1",
        owner="ml-platform (kim)",
        limitations=["English only", " long answers ", "English only"],
        retest_by=due,
    )
    assert out.approval is not None
    assert out.approval.owner == "ml-platform (kim)"
    assert out.approval.limitations == ["English only", "long answers"]
    assert out.approval.retest_by == due and out.approval.retest_overdue is False
    (entry,) = registry.status(MODEL, "cpu").entries
    assert entry.approval == out.approval
    (promoted,) = [e for e in stored(registry).events(MODEL) if e.kind == "promote"]
    assert promoted.detail["owner"] == "ml-platform (kim)"
    assert promoted.detail["limitations"] == ["English only", "long answers"]


def test_a_promote_without_an_approval_shows_none(registry: Any) -> None:
    _promoted(registry)
    (entry,) = registry.status(MODEL, "cpu").entries
    assert entry.approval is None


@pytest.mark.parametrize(
    ("approval", "said"),
    [
        ({"retest_by": date(2020, 1, 1)}, "re-test date 2020-01-01 is in the past"),
        ({"owner": "  "}, "the owner must not be empty"),
        ({"limitations": ["fine", ""]}, "a limitation must not be empty"),
        ({"limitations": [f"limit {i}" for i in range(21)]}, "at most 20"),
        ({"owner": "x" * 201}, "at most 200 are allowed"),
    ],
)
def test_a_bad_approval_is_one_line_and_changes_nothing(
    registry: Any, approval: dict[str, Any], said: str
) -> None:
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    before = stored(registry).events(MODEL)
    with pytest.raises(InvalidInput) as caught:
        registry.promote(record, "cpu", why="x", **approval)
    assert said in caught.value.message and "\n" not in caught.value.message
    assert stored(registry).events(MODEL) == before
    assert registry.status(MODEL, "cpu").entries == []


def test_promoting_production_again_keeps_its_approval(registry: Any) -> None:
    due = _days_from_now(10)
    record = _promoted(registry, owner="kim", retest_by=due)
    again = registry.promote(record, "cpu", owner="kim", retest_by=due)
    assert again.changed is False and again.approval is not None and again.approval.owner == "kim"
    with pytest.raises(InvalidInput) as caught:
        registry.promote(record, "cpu", owner="lee")
    assert "already production" in caught.value.message
    assert registry.status(MODEL, "cpu").entries[0].approval.owner == "kim"


def test_status_says_when_the_retest_is_overdue(
    registry: Any, cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    due = _days_from_now(1)
    _promoted(registry, owner="kim", limitations=["English only"], retest_by=due)
    (entry,) = registry.status(MODEL, "cpu").entries
    assert entry.approval is not None and not entry.approval.retest_overdue
    # Two days on: the same registry (its kept derivations) and a fresh CLI both say so.
    later = datetime.now(UTC) + timedelta(days=2)
    monkeypatch.setattr(clock, "utcnow", lambda: later)
    (entry,) = registry.status(MODEL, "cpu").entries
    assert entry.approval is not None and entry.approval.retest_overdue
    assert json.loads(registry.status_json(MODEL, "cpu"))["entries"][0]["approval"] == {
        "owner": "kim",
        "limitations": ["English only"],
        "retest_by": due.isoformat(),
        "retest_overdue": True,
    }
    db = str(registry.url)
    code, out, _ = cli("--db", db, "status")
    assert code == 0 and f"re-test overdue since {due.isoformat()} (owner kim)" in out
    code, out, _ = cli("--db", db, "status", "--json")
    assert json.loads(out)["entries"][0]["approval"]["retest_overdue"] is True
    # Overdue is a reminder, not a verdict: the record stays deployable and the gate passes.
    assert entry.deployability.deployable


def test_a_rollback_brings_back_the_approval_its_record_had(registry: Any) -> None:
    first = _promoted(
        registry, 1, owner="kim", limitations=["v1 limits"], retest_by=_days_from_now(5)
    )
    _promoted(registry, 2, owner="lee")
    done = registry.rollback(MODEL, "cpu", why="v2 is bad")
    assert done.applied is not None and done.applied.record_id == first
    (entry,) = registry.status(MODEL, "cpu").entries
    assert entry.approval is not None
    assert (entry.approval.owner, entry.approval.limitations) == ("kim", ["v1 limits"])


def test_the_card_carries_the_production_approval(registry: Any) -> None:
    due = _days_from_now(3)
    record = _promoted(
        registry, owner="kim <b>", limitations=["English only", "| not a row"], retest_by=due
    )
    text = registry.card_render(record).text
    assert "### In production" in text
    assert "| cpu | " in text and "kim &lt;b&gt;" in text and due.isoformat() in text
    assert "- English only" in text and "- \\| not a row" in text
    other = add_synthetic(registry, 2)
    assert "In production" not in registry.card_render(other).text


def test_cli_promote_with_an_approval(cli: Any, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    due = _days_from_now(7).isoformat()
    flags = f"promote {record} --target cpu --why v1 --owner kim --retest-by {due} --json"
    limits = ("--limitation", "English only", "--limitation", "no tools")
    code, out, err = cli("--db", db, *flags.split(), *limits)
    assert code == 0, err
    approval = json.loads(out)["approval"]
    assert approval == {
        "owner": "kim",
        "limitations": ["English only", "no tools"],
        "retest_by": due,
        "retest_overdue": False,
    }
    code, _, err = cli("--db", db, "promote", record, "--target", "cpu", "--retest-by", "soon")
    assert code == 2 and "--retest-by 'soon' is not a day: give YYYY-MM-DD" in err
    assert len(err.strip().splitlines()) == 1
    code, out, _ = cli("--db", db, "status")
    assert f"owner kim; re-test by {due}; known limitation: English only" in out


def test_cli_accept_relaxed_gate_needs_why(cli: Any, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    before = stored(registry).events(MODEL)
    code, _, err = cli("--db", db, "promote", record, "--target", "cpu", "--accept-relaxed-gate")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "accepting a relaxed gate needs a reason" in err and "--why" in err
    # Nothing was relaxed after a failure: nothing to accept, nothing written.
    code, _, err = cli(
        "--db", db, "promote", record, "--target", "cpu", "--accept-relaxed-gate", "--why", "ok"
    )
    assert code == 2 and "nothing to accept" in err and len(err.strip().splitlines()) == 1
    assert stored(registry).events(MODEL) == before


def _suite_run(registry: Any, record_id: str, *, passed: bool, min_pass_rate: float) -> str:
    """A stored run whose smoke check judged a two-case suite at ``min_pass_rate`` (one case
    passes): the gate terms the rules compare are those of its suite result."""
    from modelreg.fingerprint import runtime_fingerprint
    from modelreg.schemas.suite import CaseResult, Expectation, SuiteResult
    from modelreg.schemas.verification import CheckResult, Outcome

    record = registry.get(record_id)
    now = datetime.now(UTC)
    cases = [
        CaseResult(
            case_id=case_id,
            subset="general",
            prompt=f"{case_id}?",
            chat=None,
            max_tokens=16,
            expect=Expectation(value="Paris"),
            output=output,
            classification=classification,
            reason="judged",
        )
        for case_id, output, classification in (
            ("good", "Paris", "pass"),
            ("bad", "Lyon", "wrong_answer"),
        )
    ]
    result = SuiteResult(
        suite_name="gate",
        suite_digest="ab" * 32,
        passed=passed,
        pass_rate=0.5,
        min_pass_rate=min_pass_rate,
        cases=cases,
        subsets=[],
        gates=[],
        reasons=[] if passed else ["pass rate 1/2 = 50% < min_pass_rate 80%"],
    )
    checks = [
        CheckResult(
            check=check,
            required=True,
            outcome=Outcome.PASS if passed or check != "gguf-cpu-smoke" else Outcome.FAIL,
            summary="suite gate",
            evidence={"suite_result": result.model_dump(mode="json")}
            if check == "gguf-cpu-smoke"
            else {},
            started_at=now,
            finished_at=now,
        )
        for check in ("digest", "host-compat", "gguf-cpu-smoke")
    ]
    fingerprint = runtime_fingerprint(registry.target("cpu"), "llama.cpp")
    with registry.store.locked(record.model_id) as tx:
        return str(tx.save_run(record, "cpu", checks, "synthetic-host", fingerprint))


def test_accepting_a_relaxed_gate_records_it_and_promotes(registry: Any) -> None:
    from modelreg.errors import NotDeployable
    from modelreg.reasons import ReasonCode

    record = add_synthetic(registry, 1)
    failed = _suite_run(registry, record, passed=False, min_pass_rate=0.8)
    _suite_run(registry, record, passed=True, min_pass_rate=0.5)
    with pytest.raises(NotDeployable) as refused:
        registry.promote(record, "cpu", why="x")
    assert [r.code for r in refused.value.reasons] == [ReasonCode.GATE_RELAXED_AFTER_FAILURE]
    out = registry.promote(
        record, "cpu", why="0.5 is what the product needs", accept_relaxed_gate=True
    )
    assert out.changed and out.promotion is not None and out.promotion.record_id == record
    (accepted,) = out.accepted
    change = accepted.changes[0]
    assert (change.what, change.before, change.after) == ("min_pass_rate", 0.8, 0.5)
    assert accepted.failed_runs == [failed]
    assert "min_pass_rate 0.8 → 0.5" in out.message
    kinds = [e.kind for e in stored(registry).events(MODEL)]
    assert kinds[-2:] == ["gate-relaxation-accepted", "promote"]
    (event,) = [e for e in stored(registry).events(MODEL) if e.kind == "gate-relaxation-accepted"]
    assert event.why == "0.5 is what the product needs" and event.detail["terms"] == accepted.terms


def test_a_relaxed_gate_with_another_reason_is_refused_and_nothing_is_written(
    registry: Any,
) -> None:
    from modelreg.errors import NotDeployable

    record = add_synthetic(registry, 1)
    _suite_run(registry, record, passed=False, min_pass_rate=0.8)
    _suite_run(registry, record, passed=True, min_pass_rate=0.5)
    registry.hold(record, "audit")
    before = stored(registry).events(MODEL)
    with pytest.raises(NotDeployable) as refused:
        registry.promote(record, "cpu", why="accept", accept_relaxed_gate=True)
    assert "on hold: audit" in refused.value.message
    assert stored(registry).events(MODEL) == before


def _model_card(registry: Any, record: str) -> Any:
    """The model card of the record's one machine-learning-model component in its ML-BOM."""
    document = registry.cyclonedx(record)
    (component,) = [c for c in document["components"] if c.get("modelCard")]
    return component["modelCard"]


def test_show_and_the_bom_carry_the_production_approval(cli: Any, tmp_path: Path) -> None:
    """Issue 42 item 7: owner, re-test date and limitations in `show` and the ML-BOM too."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    due = _days_from_now(9)
    record = _promoted(registry, owner="kim", limitations=["English only"], retest_by=due)
    code, out, err = cli("--db", db, "show", record)
    assert code == 0, err
    assert "  owner kim" in out and f"  re-test by {due.isoformat()}" in out
    assert "  known limitation: English only" in out
    card = _model_card(registry, record)
    assert card["considerations"] == {"technicalLimitations": ["English only"]}
    props = {p["name"]: p["value"] for p in card["properties"]}
    assert props["modelreg:production:cpu:owner"] == "kim"
    assert props["modelreg:production:cpu:retest_by"] == due.isoformat()
    other = add_synthetic(registry, 2)
    code, out, _ = cli("--db", db, "show", other)
    assert "owner" not in out and "re-test" not in out


def test_a_replaced_record_keeps_its_limitations_in_show_the_card_and_the_bom(
    cli: Any, tmp_path: Path
) -> None:
    """Issue 42 item 7: once another record is production, the approval the first was
    promoted with is still shown — limitations do not vanish with production."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    due = _days_from_now(9)
    first = _promoted(registry, owner="kim", limitations=["English only"], retest_by=due)
    second = _promoted(registry, 2, owner="lee")
    shown = registry.show(first)
    assert shown.production == []
    (approval,) = shown.approvals
    assert (approval.target, approval.owner, approval.limitations) == (
        "cpu",
        "kim",
        ["English only"],
    )
    assert registry.show(second).approvals == []  # production there now: not repeated
    code, out, err = cli("--db", db, "show", first)
    assert code == 0, err
    assert "promoted to cpu " in out and "not production there now" in out
    assert "  known limitation: English only" in out and "  owner kim" in out
    card = registry.card_render(first).text
    assert "### Approved before (not production now)" in card
    assert "### In production" not in card and "- English only" in card
    model_card = _model_card(registry, first)
    assert model_card["considerations"] == {"technicalLimitations": ["English only"]}
    props = {p["name"]: p["value"] for p in model_card["properties"]}
    assert props["modelreg:approved:cpu:owner"] == "kim"
    assert "modelreg:production:cpu:owner" not in props
