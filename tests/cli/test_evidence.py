"""Evidence that expires with the runtime; hold, release, retire."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.helpers import SMOL_BASE

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


@pytest.fixture
def fleet(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:  # type: ignore[no-untyped-def]
    """A user-defined target that is this host and declares the llama.cpp build it runs."""
    spec = tmp_path / "targets.yaml"
    monkeypatch.setenv("MODELREG_TARGETS", str(spec))
    _declare(cli, spec, "0.3.36")  # the bundled runtime: what verify exercises here
    return spec


def _declare(cli, spec: Path, build: str) -> None:  # type: ignore[no-untyped-def]
    """The target's file, declaring ``build``, applied to the registry."""
    spec.write_text(
        "targets:\n  cpu-fleet:\n    hosts: ['" + socket.gethostname() + "']\n"
        f"    runtime: {{llama.cpp: {build}}}\n"
    )
    code, _, err = cli("targets", "apply")
    assert code == 0, err


def _deployable(cli, record: str, target: str) -> dict:  # type: ignore[no-untyped-def]
    shown = json.loads(cli("show", record, "--json")[1])
    (verdict,) = [d for d in shown["deployability"] if d["target"] == target]
    verdict["messages"] = [r["message"] for r in verdict["reasons"]]
    return verdict  # type: ignore[no-any-return]


def test_runtime_change_makes_evidence_stale_until_reverified(
    cli, smollm2: Path, fleet: Path
) -> None:
    record = cli("add", smollm2, "--model-id", SMOL_ID, "--source", "pypi://x==1", *SMOL_BASE)[
        1
    ].strip()
    code, out, _ = cli("verify", record, "--target", "cpu-fleet", "--json")
    report = json.loads(out)
    assert code == 0 and report["passed"]
    assert _deployable(cli, record, "cpu-fleet")["deployable"] is True

    _declare(cli, fleet, "llama-cpp-python 0.3.36")  # the same runtime, declared another way
    verdict = _deployable(cli, record, "cpu-fleet")
    assert verdict["deployable"] is False
    assert verdict["messages"] == [
        "stale: runtime changed (declared llama.cpp 0.3.36 → llama-cpp-python 0.3.36)"
    ]
    assert verdict["stale"] and verdict["reasons"][0]["code"] == "stale_runtime"
    assert verdict["reasons"][0]["next"] == {
        "action": "verify",
        "args": {"ref": record, "target": "cpu-fleet"},
        "purpose": None,
    }
    code, out, _ = cli("list", "--deployable-on", "cpu-fleet", "--json")
    (listed,) = json.loads(out)["records"]
    assert listed["record"]["record_id"] == record
    assert listed["deployability"]["deployable"] is False
    code, _, err = cli("promote", record, "--target", "cpu-fleet")
    assert code == 1 and "stale" in err

    code, _, err = cli("verify", "--stale", "--target", "cpu-fleet", "--path", smollm2)
    assert code == 2 and "--path and --fetch apply to one record" in err
    code, out, _ = cli("verify", "--stale", "--target", "cpu-fleet", "--json")
    runs = json.loads(out)["runs"]
    assert code == 0 and [r["record"]["record_id"] for r in runs] == [record]
    assert _deployable(cli, record, "cpu-fleet")["deployable"] is True
    code, out, _ = cli("verify", "--stale", "--target", "cpu-fleet", "--json")
    assert code == 0 and json.loads(out)["runs"] == []


def test_hold_release_retire(cli, smollm2: Path, tmp_path: Path) -> None:
    first = cli("add", smollm2, "--model-id", SMOL_ID, "--source", "pypi://x==1", *SMOL_BASE)[
        1
    ].strip()
    second = cli(
        "add",
        smollm2,
        "--model-id",
        SMOL_ID,
        *SMOL_BASE,
        "--source",
        "pypi://x==1",
        "--prompt",
        "Name the capital city of France.",
    )[1].strip()
    for record in (first, second):
        assert cli("verify", record)[0] == 0
    assert cli("promote", first, "--target", "cpu")[0] == 0
    assert cli("promote", second, "--target", "cpu")[0] == 0

    assert cli("hold", first, "--why", "license review")[0] == 0
    assert "on hold: license review" in _deployable(cli, first, "cpu")["messages"]
    code, _, err = cli("rollback", SMOL_ID, "--target", "cpu")
    assert code == 1 and "license review" in err and f"modelreg release {first}" in err
    assert cli("release", first, "--why", "reviewed")[0] == 0
    assert _deployable(cli, first, "cpu")["deployable"] is True
    assert cli("rollback", SMOL_ID, "--target", "cpu")[0] == 0

    assert cli("retire", first, "--why", "superseded")[0] == 0
    code, _, err = cli("rollback", SMOL_ID, "--target", "cpu")
    assert code == 1 and "retired: superseded" in err
    code, _, err = cli("release", first, "--why", "back")
    assert code == 2 and "retired" in err
    shown = json.loads(cli("show", first, "--json")[1])
    state = shown["record"]["state"]
    assert (state["state"], state["reason"], state["actor"]) == ("retired", "superseded", "tester")
    assert shown["runs"], "evidence is kept"

    kinds = [e["kind"] for e in json.loads(cli("history", SMOL_ID, "--json")[1])["events"]]
    assert {"hold", "release", "retire"} <= set(kinds)


def test_a_declared_runtime_nobody_ran_is_unavailable(cli, smollm2: Path, fleet: Path) -> None:
    """Seed 004: a target that declares the ik_llama.cpp fork and gives no launch or endpoint
    is verified with the bundled mainline runtime — which proves nothing about the fork."""
    _declare(cli, fleet, "ik_llama.cpp b3900")
    record = cli("add", smollm2, "--model-id", SMOL_ID, "--source", "pypi://x==1", *SMOL_BASE)[
        1
    ].strip()
    code, out, _ = cli("verify", record, "--target", "cpu-fleet", "--json")
    report = json.loads(out)
    assert code == 1 and not report["passed"]  # before: "deployable"
    (smoke,) = [c for c in report["checks"] if c["check"] == "gguf-cpu-smoke"]
    assert smoke["outcome"] == "unavailable"
    assert smoke["classification"] == "runtime_not_exercised"
    assert smoke["summary"].startswith(
        "declared llama.cpp ik_llama.cpp b3900, exercised llama-cpp-python 0.3.36: give "
        "`launch` or `endpoint`"
    )
    assert smoke["evidence"]["exercised_runtime"] == "llama-cpp-python 0.3.36"
    assert _deployable(cli, record, "cpu-fleet")["deployable"] is False
