"""Latency measured like traffic (issue 42 item 5): a suite's ``latency:`` plan — warm-up,
repeats, concurrency — and p50/p95 TTFT and per-sequence decode computed from those requests,
with how the runtime batched them stated in the evidence; through the llama.cpp child
(continuous batching in one context) and through a launched OpenAI-compatible server."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

import modelreg
from modelreg.bundled import SMOLLM2_BASE, SMOLLM2_MODEL_ID, SMOLLM2_PACKAGE
from modelreg.errors import InvalidInput
from modelreg.schemas.suite import (
    FinishReason,
    GateOutcome,
    Generation,
    LatencyPlan,
    ResourceGates,
    Resources,
    Suite,
)
from modelreg.schemas.verification import Outcome
from modelreg.suites import parse_suite
from modelreg.validators.base import VerifyOptions
from modelreg.validators.judge import evaluate_suite, suite_on_target
from modelreg.validators.resources import traffic_figures, with_traffic
from tests.helpers import open_with_targets

PLAN = LatencyPlan(warmup=1, repeat=2, concurrency=2)


def _suite(latency: dict[str, Any] | None = None) -> Suite:
    data: dict[str, Any] = {
        "name": "traffic",
        "thresholds": {"min_pass_rate": 0.5},
        "cases": [
            {
                "id": "paris",
                "prompt": "What is the capital of France? Answer in one word.",
                "chat": True,
                "max_tokens": 16,
                "expect": {"value": "Paris"},
            },
            {
                "id": "tokyo",
                "prompt": "What is the capital of Japan? Answer in one word.",
                "chat": True,
                "max_tokens": 16,
                "expect": {"value": "Tokyo"},
            },
        ],
    }
    if latency is not None:
        data["latency"] = latency
    return parse_suite(data, "traffic.yaml")


# ---------------------------------------------------------------------------- figures


def test_percentiles_and_per_sequence_decode_come_from_the_measured_requests() -> None:
    raw = {
        "status": "ok",
        "batching": "two slots",
        "wall_ms": 2000.0,
        "max_in_flight": 2,
        "requests": [
            {"ttft_ms": t, "decode_tokens": 9, "decode_ms": d, "completion_tokens": 10}
            for t, d in [(100, 900), (300, 450), (200, 900), (900, 300)]
        ],
    }
    traffic = traffic_figures(raw, PLAN)
    assert (traffic.requests, traffic.concurrency, traffic.warmup, traffic.repeat) == (4, 2, 1, 2)
    # Nearest rank: p50 of [100, 200, 300, 900] is 200, p95 is 900 — measured values.
    assert (traffic.ttft_ms_p50, traffic.ttft_ms_p95, traffic.ttft_ms_max) == (200, 900, 900)
    # Per sequence: 10, 20, 10, 30 tok/s; the median request's and the slowest.
    assert (traffic.decode_tokens_per_s_p50, traffic.decode_tokens_per_s_min) == (10, 10)
    assert traffic.throughput_tokens_per_s == 20.0  # 40 tokens in 2 s
    resources = with_traffic(Resources(ttft_ms_max=5.0, decode_tokens_per_s=99.0), raw, PLAN)
    assert (resources.ttft_ms_median, resources.ttft_ms_p95, resources.ttft_ms_max) == (
        200,
        900,
        900,
    )
    assert resources.decode_tokens_per_s == 10


def test_a_runtime_that_ran_no_traffic_leaves_the_latency_gates_unmeasured() -> None:
    suite = suite_on_target(
        _suite({"repeat": 3}), "box", ResourceGates(max_ttft_ms_p95=2000, min_decode_tokens_per_s=1)
    )
    run = {
        c.id: Generation(prompt="", output=v, chat=True, finish_reason=FinishReason.STOP)
        for c, v in zip(suite.cases, ["Paris", "Tokyo"], strict=True)
    }
    # The single judged run was fast; a suite asking for traffic is not judged on it.
    single = Resources(ttft_ms_max=50.0, ttft_ms_p95=50.0, decode_tokens_per_s=100.0)
    assert suite.latency is not None
    resources = with_traffic(single, None, suite.latency)
    assert resources.traffic is not None and resources.traffic.status == "not_run"
    result = evaluate_suite(suite, run, resources)
    assert not result.passed
    assert {g.gate: g.outcome for g in result.gates} == {
        "min_decode_tokens_per_s": GateOutcome.UNMEASURED,
        "max_ttft_ms_p95": GateOutcome.UNMEASURED,
    }


def test_a_latency_plan_is_part_of_the_suite_only_when_given() -> None:
    plain, planned = _suite(), _suite({"warmup": 2, "repeat": 5, "concurrency": 4})
    assert plain.latency is None and '"latency"' not in plain.canonical_json()
    assert planned.latency == LatencyPlan(warmup=2, repeat=5, concurrency=4)
    assert planned.digest() != plain.digest()
    with pytest.raises(InvalidInput, match="latency.cases names 'rome'"):
        _suite({"cases": ["rome"]})
    with pytest.raises(InvalidInput, match="concurrency"):
        _suite({"concurrency": 0})


# ---------------------------------------------------------------------------- real runs


def _verify_with(suite: Suite, smollm2: Path, tmp_path: Path, target: str = "cpu") -> Any:
    registry = modelreg.open(f"sqlite:///{tmp_path / 'r.db'}")
    record = registry.add(
        [smollm2],
        model_id=SMOLLM2_MODEL_ID,
        source=f"pypi://{SMOLLM2_PACKAGE}",
        base_model=SMOLLM2_BASE,
    ).record.record_id
    return registry.verify(record, target, options=VerifyOptions(suite=suite), actor="tester")


@pytest.mark.slow
def test_the_llama_child_serves_the_plan_as_two_clients_would(
    smollm2: Path, tmp_path: Path
) -> None:
    suite = _suite({"warmup": 1, "repeat": 2, "concurrency": 2})
    report = _verify_with(suite, smollm2, tmp_path)
    (smoke,) = [c for c in report.checks if c.check == "gguf-cpu-smoke"]
    assert smoke.outcome is Outcome.PASS, smoke.summary
    traffic = smoke.evidence["resources"]["traffic"]
    assert traffic["status"] == "ok", traffic
    assert (traffic["requests"], traffic["concurrency"], traffic["max_in_flight"]) == (4, 2, 2)
    assert "continuous batching in one llama.cpp context of 2 slot(s)" in traffic["batching"]
    assert 0 < traffic["ttft_ms_p50"] <= traffic["ttft_ms_p95"] <= traffic["ttft_ms_max"]
    assert traffic["decode_tokens_per_s_p50"] > 0 and traffic["throughput_tokens_per_s"] > 0
    resources = smoke.evidence["resources"]
    assert resources["ttft_ms_p95"] == traffic["ttft_ms_p95"]
    assert resources["decode_tokens_per_s"] == traffic["decode_tokens_per_s_p50"]
    assert "traffic 4 requests × 2 in flight: TTFT p50 " in smoke.summary
    # Greedy decoding in shared batches gives each request the judged run's answer (SmolLM2's
    # kernels are batch-invariant: tests/validators/test_batched.py).
    judged = {g["id"]: g["output"] for g in smoke.evidence["generations"]}
    raw = smoke.evidence["traffic_requests"]
    assert sorted(r["id"] for r in raw) == ["paris", "paris", "tokyo", "tokyo"]
    assert all(r["output"] == judged[r["id"]] for r in raw)


@pytest.mark.slow
def test_a_launched_server_is_asked_the_plan_with_requests_in_flight_together(
    smollm2: Path, tmp_path: Path
) -> None:
    argv = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        "{model}",
        "--host",
        "127.0.0.1",
        "--port",
        "{port}",
        "--n_ctx",
        "512",
        "--n_threads",
        "1",
    ]
    spec = tmp_path / "targets.yaml"
    spec.write_text(
        f"targets:\n  served:\n    hosts: ['{socket.gethostname()}']\n"
        f"    launch: {json.dumps(argv)}\n    cost_per_hour_usd: 0.76\n"
    )
    registry = open_with_targets(f"sqlite:///{tmp_path / 'r.db'}", spec)
    record = registry.add(
        [smollm2],
        model_id=SMOLLM2_MODEL_ID,
        source=f"pypi://{SMOLLM2_PACKAGE}",
        base_model=SMOLLM2_BASE,
    ).record.record_id
    suite = _suite({"warmup": 1, "repeat": 2, "concurrency": 2})
    report = registry.verify(record, "served", options=VerifyOptions(suite=suite))
    (smoke,) = [c for c in report.checks if c.check == "endpoint-smoke"]
    assert smoke.outcome is Outcome.PASS, smoke.summary
    traffic = smoke.evidence["resources"]["traffic"]
    assert traffic["status"] == "ok" and traffic["requests"] == 4
    assert traffic["batching"].startswith("2 concurrent streamed HTTP requests")
    assert 0 < traffic["ttft_ms_p50"] <= traffic["ttft_ms_p95"]
    # Cost per 1k tokens comes from the traffic's throughput: requests share the host hour.
    cost = smoke.evidence["cost"]
    assert cost["tokens_per_s"] == traffic["throughput_tokens_per_s"]
    assert cost["rate_basis"] == "throughput of 4 requests, 2 in flight"
