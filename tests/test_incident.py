"""The incident verbs at the seams between features (issue 21): each test is a reproduction
that failed before the fix — plan and apply agree after a second incident, a one-off suite
leaves production alone, rollback needs bytes someone has, evidence expires for causes only,
decisions are judged inside the lock, and the answer fits on a screen."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import modelreg
from modelreg.errors import InvalidInput, NoRollbackCandidate, NotDeployable
from modelreg.reasons import ReasonCode
from tests.helpers import add_synthetic, key_pair, record_run, stored, synthetic_bytes

MODEL = "rules/alpha"
SUITE = """schema_version: 1
name: {name}
thresholds: {{min_pass_rate: 1.0}}
cases:
  - id: capital
    prompt: What is the capital of France?
    expect: {{mode: contains, value: Paris}}
"""


def _three_promoted(registry: Any) -> tuple[str, str, str]:
    ids = []
    for i in (1, 2, 3):
        record = add_synthetic(registry, i)
        record_run(registry, record)
        registry.promote(record, "cpu", why=f"build {i}")
        ids.append(record)
    return ids[0], ids[1], ids[2]


def _production(registry: Any) -> str:
    (entry,) = registry.status(MODEL, "cpu").entries
    return str(entry.record.record_id)


# -- one decision -------------------------------------------------------------------------


def test_a_second_incident_rolls_back_further_as_the_plan_says(registry: Any) -> None:
    a, b, c = _three_promoted(registry)
    registry.rollback(MODEL, "cpu", why="C is bad")
    assert _production(registry) == b
    registry.hold(b, "B is bad too")
    plan = registry.rollback_plan(MODEL, "cpu")
    assert plan.decision == "rollback" and plan.candidate.record.record_id == a
    applied = registry.rollback(MODEL, "cpu", why="B is bad too")
    assert applied.decision == "rollback" and applied.applied is not None
    assert _production(registry) == a  # before the fix: "already rolled back", B stayed
    assert registry.status(MODEL, "cpu").entries[0].deployability.deployable
    again = registry.rollback(MODEL, "cpu", why="pressed twice")
    assert again.decision == "nothing_to_do" and again.applied is None
    assert _production(registry) == a
    # Neither bad build is a candidate now; C never again, B only once released.
    assert registry.rollback_plan(MODEL, "cpu", to=c).decision == "no_candidate"
    with pytest.raises(NoRollbackCandidate):
        registry.rollback(MODEL, "cpu", why="again", to=c)


def test_rollback_to_goes_further_back_in_one_audited_step(registry: Any) -> None:
    a, _b, c = _three_promoted(registry)
    plan = registry.rollback_plan(MODEL, "cpu", to=a)
    assert plan.candidate.record.record_id == a
    done = registry.rollback(MODEL, "cpu", why="both B and C are suspect", to=a)
    assert done.applied is not None and done.applied.record_id == a
    assert _production(registry) == a
    assert stored(registry).state(c).state.value == "held"
    events = [e for e in stored(registry).events(MODEL) if e.kind == "rollback"]
    assert events[-1].why == "both B and C are suspect"


def test_rollback_to_bad_input_is_one_line_and_changes_nothing(registry: Any) -> None:
    a, _b, c = _three_promoted(registry)
    other = add_synthetic(registry, 9, "rules/other")
    registry.retire(a, "withdrawn")
    before = stored(registry).events(MODEL)
    for to, said in ((other, "a record of rules/other"), (a, "retired"), (c, "already production")):
        with pytest.raises(InvalidInput) as caught:
            registry.rollback(MODEL, "cpu", why="x", to=to)
        assert said in caught.value.message and "\n" not in caught.value.message
        assert caught.value.exit_code == 2
    assert stored(registry).events(MODEL) == before and _production(registry) == c


def test_cli_rollback_to_bad_input_exits_2(cli: Any, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    _a, _b, c = _three_promoted(registry)
    code, _out, err = cli(
        "--db", db, "rollback", MODEL, "--target", "cpu", "--to", c, "--apply", "--why", "x"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "already production" in err


# -- what counts --------------------------------------------------------------------------


def _suite(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SUITE.format(name=name))
    return path


def test_a_one_off_suite_run_changes_no_verdict_and_no_gate(registry: Any, tmp_path: Path) -> None:
    from modelreg.schemas.verification import CheckResult, Outcome

    record = add_synthetic(registry, 1)
    record_run(registry, record)
    registry.promote(record, "cpu", why="good")
    sha = stored(registry).files([record])[record][0].sha256
    assert registry.gate(MODEL, "cpu", sha).passed
    the_record, target = registry.get(record), registry.target("cpu")
    for outcome in ("pass", "fail"):
        plan = registry._verify._verify_plan(
            the_record, target, None, _suite(tmp_path, f"explore-{outcome}"), None, None, None
        )
        assert plan.exploratory
        results = [
            CheckResult(
                check="gguf-cpu-smoke",
                required=True,
                outcome=Outcome(outcome),
                summary="one-off",
                started_at=the_record.created_at,
                finished_at=the_record.created_at,
            )
        ]
        out = registry._verify._record_results(the_record, target, results, plan, "explorer")
        assert out.exploratory and out.deployability.deployable
        entry = registry.status(MODEL, "cpu").entries[0]
        # Before the fix: STALE ("suite changed") after the pass, FAILING after the failure.
        assert entry.deployability.now == "deployable"
        assert registry.gate(MODEL, "cpu", sha).passed
    said = [e.summary for e in registry.history(MODEL).events if e.kind == "verify"]
    assert any("one-off run" in s and "not counted" in s for s in said), said
    runs = registry.show(record).runs
    assert sum(r.exploratory for r in runs) == 2


def test_the_same_suite_given_explicitly_is_not_a_one_off(registry: Any, tmp_path: Path) -> None:
    record = add_synthetic(registry, 1)
    suite = _suite(tmp_path, "attached")
    registry.attach_suite(MODEL, suite)
    attached = stored(registry).model_suites().get(MODEL)
    plan = registry._verify._verify_plan(
        registry.get(record), registry.target("cpu"), None, suite, attached, None, None
    )
    assert not plan.exploratory


def test_imported_runs_read_not_counted_never_failing(registry: Any, tmp_path: Path) -> None:
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    registry.promote(record, "cpu", why="good")
    dump = tmp_path / "dump.jsonl"
    registry.export(dump)
    other = modelreg.open(f"sqlite:///{tmp_path / 'other.db'}")
    other.import_(dump)
    (entry,) = other.status(MODEL, "cpu").entries
    assert entry.deployability.now == "uncounted"  # before the fix: "failing"
    assert "not counted (imported, unsigned)" in entry.deployability.reasons[0].message


# -- bytes that can be fetched ------------------------------------------------------------


def test_no_rollback_to_bytes_nobody_has(registry: Any) -> None:
    a, b, c = _three_promoted(registry)
    shutil.rmtree(synthetic_bytes() / b)
    # Gone from a disk is not yet known to anyone: the registry learns it from a check.
    assert registry.rollback_plan(MODEL, "cpu").candidate.record.record_id == b
    checked = registry.locate(b, check=True)
    assert [c.ok for c in checked.checked] == [False] and "is not there" in checked.checked[
        0
    ].detail
    plan = registry.rollback_plan(MODEL, "cpu")
    assert plan.candidate.record.record_id == a  # B is passed over: no fetchable copy
    (passed_over,) = plan.rejected
    assert passed_over.record_id == b and "no fetchable copy" in passed_over.why
    assert "is not there" in passed_over.why
    assert passed_over.next is not None
    assert (passed_over.next.action, passed_over.next.args) == ("locate", {"ref": b, "check": None})
    shutil.rmtree(synthetic_bytes() / a)
    registry.locate(a, check=True)
    with pytest.raises(NoRollbackCandidate) as caught:
        registry.rollback(MODEL, "cpu", why="C is bad")
    assert "no fetchable copy" in caught.value.message
    assert _production(registry) == c


def test_the_gate_needs_a_fetchable_copy(registry: Any, cli: Any, tmp_path: Path) -> None:
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    registry.promote(record, "cpu", why="good")
    sha = stored(registry).files([record])[record][0].sha256
    assert registry.gate(MODEL, "cpu", sha).passed
    (synthetic_bytes() / record / "m1.gguf").write_bytes(b"truncated")
    assert registry.gate(MODEL, "cpu", sha).passed  # nobody has looked yet
    registry.locate(record, check=True)
    gate = registry.gate(MODEL, "cpu", sha)
    assert not gate.passed and "no recorded location is verified" in gate.reasons[0].message
    entry = registry.status(MODEL, "cpu").entries[0]
    assert entry.fetch_from is None and "recorded 1001" in (entry.unfetchable or "")


# -- expiry follows causes ----------------------------------------------------------------


def test_only_the_inference_runtime_expires_evidence(registry: Any, tmp_path: Path) -> None:
    libs = tmp_path / "lib"
    libs.mkdir()
    speedups = libs / "_speedups.cpython-311-x86_64-linux-gnu.so"
    sqlite = libs / "libsqlite3.so.0"
    ggml = libs / "libggml-cpu.so"
    for path in (speedups, sqlite, ggml):
        path.write_bytes(b"\x7fELF " + path.name.encode())
    record = add_synthetic(registry, 1)
    mapped = {"mapped_libraries": [str(speedups), str(sqlite), str(ggml)]}
    record_run(registry, record, evidence={"gguf-cpu-smoke": mapped})
    assert registry.deployability(record, "cpu").deployable
    speedups.write_bytes(speedups.read_bytes() + b"\0")
    sqlite.write_bytes(sqlite.read_bytes() + b"\0")
    # This host reports what it runs: the changed extension modules cannot change an answer.
    assert registry.host_report("cpu").stale == []
    assert registry.deployability(record, "cpu").deployable  # before the fix: stale
    ggml.write_bytes(ggml.read_bytes() + b"\0")
    assert registry.deployability(record, "cpu").deployable  # nobody has said so yet
    report = registry.host_report("cpu")
    verdict = registry.deployability(record, "cpu")
    assert [r.code for r in verdict.reasons] == [ReasonCode.STALE_RUNTIME]
    assert "libggml-cpu.so changed" in verdict.reasons[0].message
    assert "host report on" in verdict.reasons[0].message  # who said so
    assert "libggml-cpu.so changed" in (report.reports[0].changes or "")


# -- judged inside the lock ---------------------------------------------------------------


def _while_locked(registry: Any, change: Any, then: Any) -> Any:
    """Hold the model's lock, start ``then`` in another thread (it waits for the lock), make
    ``change`` while it waits, release: what ``then`` returns or raises."""
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["value"] = then()
        except Exception as exc:
            result["error"] = exc

    with registry.store.locked(MODEL) as tx:
        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(0.5)  # the promote has read what it reads before the lock, and waits
        change(tx)
    worker.join(30)
    assert not worker.is_alive()
    return result


def test_promote_sees_a_suite_attached_while_it_waited(db_url: str, tmp_path: Path) -> None:
    registry = modelreg.open(db_url)
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    suite = modelreg.api.load_suite_ref(_suite(tmp_path, "attached"))
    result = _while_locked(
        registry,
        lambda tx: tx.attach_suite(suite.model_dump_json(), suite.digest(), "admin"),
        lambda: registry.promote(record, "cpu", why="race"),
    )
    # Before the fix (PostgreSQL): the promote judged without the suite and succeeded.
    assert isinstance(result.get("error"), NotDeployable), result
    assert "suite changed" in result["error"].message
    assert registry.status(MODEL, "cpu").entries == []


def test_promote_sees_keys_tightened_while_it_waited(db_url: str, tmp_path: Path) -> None:
    registry = modelreg.open(db_url)
    _private, public = key_pair(tmp_path, "ci")
    loose, tight = tmp_path / "loose.yaml", tmp_path / "tight.yaml"
    loose.write_text("targets:\n  edge:\n    hosts: ['edge-*']\n    memory_gib: 8\n")
    tight.write_text(loose.read_text() + f"    trust: {{verifier_keys: ['{public}']}}\n")
    registry.define_targets(loose, actor="admin")
    record = add_synthetic(registry, 1)
    record_run(registry, record, "edge")
    assert registry.deployability(record, "edge").deployable
    if registry.url.startswith("sqlite"):
        pytest.skip("SQLite serializes every transaction: the promote cannot read before it")
    result: dict[str, Any] = {}

    def change(_tx: Any) -> None:
        # Another session defines the target while the promote waits on the model's lock.
        worker = threading.Thread(target=lambda: result.update(d=registry.define_targets(tight)))
        worker.start()
        worker.join(30)

    promoted = _while_locked(registry, change, lambda: registry.promote(record, "edge", why="race"))
    assert "d" in result
    assert isinstance(promoted.get("error"), NotDeployable), promoted
    assert "signed by a key" in promoted["error"].message


# -- three lines at 3 a.m. ----------------------------------------------------------------


def test_rollback_prints_a_screen_not_a_dump(cli: Any, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    (tmp_path / "lib").mkdir()
    libraries = [tmp_path / "lib" / f"libggml-fake{i}.so" for i in range(100)]
    for path in libraries:
        path.write_bytes(b"\x7fELF " + path.name.encode())
    mapped = {"gguf-cpu-smoke": {"mapped_libraries": [str(p) for p in libraries]}}
    ids = []
    for i in (1, 2):
        record = add_synthetic(registry, i)
        record_run(registry, record, evidence=mapped)
        registry.promote(record, "cpu", why=f"build {i}")
        ids.append(record)
    code, out, err = cli("--db", db, "rollback", MODEL, "--target", "cpu")
    text = out + err
    assert code == 0 and len(text.splitlines()) <= 10, text
    assert "libggml-fake" not in text and "100 libraries" in text
    assert f"candidate   v1 {ids[0]}" in text and f"will hold   v2 {ids[1]}" in text
    assert "to apply:   modelreg rollback" in text
    code, out, err = cli("--db", db, "rollback", MODEL, "--target", "cpu", "--apply", "--why", "x")
    text = out + err
    assert code == 0 and len(text.splitlines()) <= 10 and "libggml-fake" not in text, text
    code, out, _ = cli("--db", db, "show", ids[0], "--runtime")
    assert code == 0 and "libggml-fake42.so" in out


def test_status_check_fails_with_production_held(cli: Any, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    registry.promote(record, "cpu", why="good")
    assert cli("--db", db, "status", "--check")[0] == 0
    registry.hold(record, "incident")
    code, out, err = cli("--db", db, "status", "--check")
    assert code == 1 and "HELD" in out and "check FAILED" in err
    assert cli("--db", db, "status")[0] == 0  # without --check, status only reports


def test_a_model_card_carries_no_local_paths(registry: Any, tmp_path: Path) -> None:
    record = add_synthetic(registry, 1)
    library = tmp_path / "venv" / "lib" / "libggml-cpu.so"
    library.parent.mkdir(parents=True)
    library.write_bytes(b"\x7fELF ggml")
    record_run(registry, record, evidence={"gguf-cpu-smoke": {"mapped_libraries": [str(library)]}})
    card = registry.card_render(record, tmp_path / "card.md")
    text = (tmp_path / "card.md").read_text()
    assert str(tmp_path) not in text and "1 libraries" in text, card


def test_rollback_to_applied_twice_changes_nothing(registry: Any) -> None:
    a, _b, _c = _three_promoted(registry)
    registry.rollback(MODEL, "cpu", why="both suspect", to=a)
    again = registry.rollback(MODEL, "cpu", why="retried after a timeout", to=a)
    assert again.decision == "nothing_to_do" and again.applied is None
    assert _production(registry) == a


def test_a_gpu_math_library_expires_evidence(registry: Any, tmp_path: Path) -> None:
    cublas = tmp_path / "nvidia" / "cublas" / "lib" / "libcublas.so.12"
    cublas.parent.mkdir(parents=True)
    cublas.write_bytes(b"\x7fELF cublas 12.1")
    record = add_synthetic(registry, 1)
    record_run(registry, record, evidence={"gguf-cpu-smoke": {"mapped_libraries": [str(cublas)]}})
    assert registry.deployability(record, "cpu").deployable
    cublas.write_bytes(b"\x7fELF cublas 12.4")
    registry.host_report("cpu")
    assert registry.deployability(record, "cpu").stale
