"""The post-run rules that bind check results to what really ran: a runtime that used more
memory than the budget, files that changed during verify, files beside the record."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from modelreg.manifests.hf import unrecorded_runtime_files
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.targets import Target
from modelreg.validators.staging import stage
from modelreg.validators.verify import bind_to_staging, measured_memory

NOW = datetime(2026, 11, 29, tzinfo=UTC)
GiB = 1 << 30


def _result(check: str, evidence: dict | None = None) -> CheckResult:  # type: ignore[type-arg]
    return CheckResult(
        check=check,
        required=True,
        outcome=Outcome.PASS,
        summary="ok",
        evidence=evidence or {},
        started_at=NOW,
        finished_at=NOW,
    )


def _target(memory_gib: float) -> Target:
    return Target(
        name="edge",
        kind="cpu",
        description="",
        memory_bytes=int(memory_gib * GiB),
        cpu_flags=None,
        is_local=True,
    )


def test_a_runtime_over_the_budget_fails_host_compat_with_both_numbers() -> None:
    results = [
        _result("host-compat", {"memory": {"total_bytes": int(0.4 * GiB)}}),
        _result("gguf-cpu-smoke", {"resources": {"peak_rss_bytes": int(0.95 * GiB)}}),
    ]
    bound = measured_memory(results, _target(1.0))
    compat = bound[0]
    assert compat.outcome is Outcome.FAIL and compat.classification == "does_not_fit"
    assert "used 0.95 GiB (estimated 0.40 GiB" in compat.summary
    assert "of a 0.90 GiB budget on edge" in compat.summary
    assert compat.evidence["measured_peak_rss_bytes"] == int(0.95 * GiB)
    within = measured_memory(results, _target(4.0))
    assert within[0].outcome is Outcome.PASS
    assert within[0].evidence["measured_peak_rss_bytes"] == int(0.95 * GiB)


def test_changes_and_unrecorded_files_fail_the_digest_check() -> None:
    results = [_result("digest"), _result("gguf-cpu-smoke")]
    assert bind_to_staging(results, [], []) == results
    changed = bind_to_staging(results, ["m.gguf: changed during verify (ctime_ns)"], [])
    assert changed[0].outcome is Outcome.FAIL
    assert changed[0].classification == "changed_during_verify"
    assert changed[1].outcome is Outcome.PASS
    extra = bind_to_staging(results, [], ["pytorch_model.bin"])
    assert extra[0].classification == "unrecorded_files"
    assert "pytorch_model.bin" in extra[0].summary


def test_staging_holds_exactly_the_recorded_files_and_sees_changes(tmp_path: Path) -> None:
    small = tmp_path / "config.json"
    small.write_text("{}")
    big = tmp_path / "model.safetensors"
    with big.open("wb") as fh:
        fh.truncate(80 << 20)  # sparse: linked, not copied
    (tmp_path / "modeling_evil.py").write_text("import os")
    with stage({"config.json": small, "model.safetensors": big}) as view:
        assert sorted(p.name for p in view.directory.iterdir()) == [
            "config.json",
            "model.safetensors",
        ]
        assert view.how == {"config.json": "copy", "model.safetensors": "symbolic link"}
        assert view.changes() == []
        small.write_text('{"changed": true}')  # the copy is frozen: not a change of it
        assert view.changes() == []
        with big.open("r+b") as fh:
            fh.write(b"x")  # written in place through the link
        (change,) = view.changes()
        assert change.startswith("model.safetensors: changed during verify")
    assert not view.directory.exists()
    assert unrecorded_runtime_files(tmp_path, {"config.json", "model.safetensors"}) == [
        "modeling_evil.py"
    ]
