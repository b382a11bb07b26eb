"""The team commands as a user types them: tokens, shared targets (with the local file as an
overlay), locate and fetch — on both registry backends."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

import modelreg
from tests.helpers import add_synthetic, record_run, stored, synthetic_bytes

EDGE = "targets:\n  edge-box:\n    cpu_flags: [avx, avx2]\n    memory_gib: 8\n"
EDGE_V2 = "targets:\n  edge-box:\n    cpu_flags: [avx, avx2]\n    memory_gib: 16\n"


def _registry() -> modelreg.Registry:
    return modelreg.open(os.environ["MODELREG_DATABASE_URL"])


def test_a_token_secret_is_shown_once_and_stored_hashed(cli) -> None:
    code, out, err = cli("token", "create", "deploy-pipeline", "--role", "reader")
    secret = out.strip()
    assert code == 0 and secret.startswith("mr_") and len(secret) == 46
    assert "shown only now" in err
    code, out, _ = cli("token", "list")
    assert code == 0 and "deploy-pipeline" in out and "reader" in out and secret not in out
    with _registry().store.engine.connect() as connection:
        rows = connection.execute(text("SELECT name, secret_sha256 FROM api_tokens")).all()
    assert rows == [("deploy-pipeline", hashlib.sha256(secret.encode()).hexdigest())]
    assert _registry().authenticate(secret).name == "deploy-pipeline"

    code, _, err = cli("token", "create", "deploy-pipeline", "--role", "reader")
    assert code == 2 and "names are never reused" in err
    code, _, err = cli("token", "create", "x", "--role", "admin")
    assert code == 2 and err == (
        "error: role 'admin' is not a role — give one of: reader, verifier, releaser\n"
    )
    code, _, err = cli("token", "create", "has space", "--role", "reader")
    assert code == 2 and "token name 'has space' must be" in err

    code, _, err = cli("token", "revoke", "deploy-pipeline")
    assert code == 0 and err == "token 'deploy-pipeline' revoked\n"
    code, _, err = cli("token", "revoke", "deploy-pipeline")
    assert code == 0 and "already revoked; nothing changed" in err
    code, out, _ = cli("token", "list", "--json")
    (token,) = json.loads(out)["tokens"]
    assert token["revoked_at"] is not None and token["revoked_by"] == "tester"
    code, _, err = cli("token", "revoke", "nobody")
    assert code == 2 and "token 'nobody' not found" in err
    with pytest.raises(modelreg.errors.Unauthorized, match="was revoked"):
        _registry().authenticate(secret)


def test_shared_targets_are_seen_by_everyone_and_labelled_by_origin(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared.yaml"
    shared.write_text(EDGE)
    code, _, err = cli("targets", "apply", shared)
    assert code == 0 and err == "applied to the registry: edge-box (added)\n"
    code, _, err = cli("targets", "apply", shared)
    assert code == 0 and "nothing changed" in err
    code, _, err = cli("targets", "add", shared)  # the former name of apply
    assert code == 0 and "nothing changed" in err

    # A teammate with no targets file of their own sees it.
    monkeypatch.setenv("MODELREG_TARGETS", str(tmp_path / "none.yaml"))
    code, out, _ = cli("targets", "--json")
    targets = {t["name"]: t for t in json.loads(out)["targets"]}
    assert targets["edge-box"]["origin"] == "registry"
    assert targets["edge-box"]["memory_bytes"] == 8 << 30
    assert targets["cpu"]["origin"] == "builtin"

    # A local file is never an overlay: its targets exist for nobody until applied, and a
    # different definition of a shared one judges nothing — the listing says both.
    local = tmp_path / "mine.yaml"
    local.write_text(EDGE_V2 + "  my-laptop:\n    memory_gib: 16\n")
    monkeypatch.setenv("MODELREG_TARGETS", str(local))
    code, out, err = cli("targets")
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert code == 0 and "my-laptop" not in lines and " registry " in lines["edge-box"]
    assert f"{local} defines edge-box, my-laptop otherwise than the registry" in err
    code, out, _ = cli("targets", "--json")
    assert {t["name"]: t for t in json.loads(out)["targets"]}["edge-box"]["memory_bytes"] == (
        8 << 30
    )
    shared.write_text(EDGE_V2)
    code, _, err = cli("targets", "apply", shared)
    assert code == 0 and err == "applied to the registry: edge-box (replaced)\n"
    code, out, _ = cli("targets", "--json")
    assert {t["name"]: t for t in json.loads(out)["targets"]}["edge-box"]["memory_bytes"] == (
        16 << 30
    )

    code, _, err = cli("targets", "remove", "my-laptop")
    assert code == 2 and "target 'my-laptop' not found" in err
    assert f"it is defined in {local}, not in the registry" in err
    code, _, err = cli("targets", "remove", "cpu")
    assert code == 2 and "built in and cannot be removed" in err
    monkeypatch.setenv("MODELREG_TARGETS", str(tmp_path / "none.yaml"))
    code, _, err = cli("targets", "remove", "edge-box", "--why", "decommissioned")
    assert code == 0 and err == "removed shared target edge-box\n"
    code, _, err = cli("targets", "remove", "edge-box")
    assert code == 2 and "target 'edge-box' not found" in err
    with _registry().store.engine.connect() as connection:
        events = connection.execute(
            text("SELECT kind, target, actor, why FROM events ORDER BY id")
        ).all()
    assert events == [
        ("target-define", "edge-box", "tester", None),
        ("target-define", "edge-box", "tester", None),
        ("target-remove", "edge-box", "tester", "decommissioned"),
    ]


def test_removing_a_target_with_production_says_what_it_breaks(cli, tmp_path: Path) -> None:
    shared = tmp_path / "shared.yaml"
    shared.write_text(EDGE)
    assert cli("targets", "apply", shared)[0] == 0
    registry = _registry()
    record = add_synthetic(registry, 1)
    record_run(registry, record, "edge-box")
    registry.promote(record, "edge-box")
    code, _, err = cli("targets", "remove", "edge-box")
    assert code == 0 and "WARNING: production records on edge-box (rules/alpha)" in err
    (entry,) = registry.status().entries
    assert [r.code for r in entry.deployability.reasons] == ["target_undefined"]


def test_targets_add_refuses_bad_files(cli, tmp_path: Path) -> None:
    for content, message in [
        ("targets:\n  cpu:\n    memory_gib: 8\n", "target 'cpu' is built in"),
        ("targets: {}\n", "defines no targets"),
        ("targets:\n  edge:\n    memory_gib: -1\n", "targets.edge.memory_gib"),
        ("targets:\n  'a b':\n    memory_gib: 1\n", "target name 'a b' must be"),
    ]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(content)
        code, _, err = cli("targets", "add", bad)
        assert code == 2 and message in err, err
        assert err.count("\n") == 1
    assert cli("targets", "add", tmp_path / "missing.yaml")[0] == 2
    assert stored(_registry()).target_specs() == []


def test_locate_and_fetch(cli, tmp_path: Path) -> None:
    registry = _registry()
    data = b"weights" * 100
    record = add_synthetic(
        registry,
        1,
        files=[{"path": "m.gguf", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}],
    )
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "m.gguf").write_bytes(data)
    here = f"file://{__import__('socket').gethostname()}{tmp_path / 'copy'}"
    oci = "oci://registry.local/models/alpha@sha256:" + "ab" * 32
    code, out, err = cli(
        "locate", record, "--add", here, "--add", "s3://bucket/alpha", "--add", oci
    )
    assert code == 0 and err.startswith(
        f"added {here}\nadded s3://bucket/alpha\nadded {oci}\nverified: {here}: every sha256"
    )
    # Added locations are checked where this host can read them; the others are a note.
    assert "not checked from this host: s3://bucket/alpha: m.gguf: no AWS credentials" in err
    assert "nothing recorded" in err
    lines = out.splitlines()
    assert lines[0].startswith(f"{here}  verified by check on ")
    assert lines[1:] == ["s3://bucket/alpha  never checked", f"{oci}  never checked"]
    code, _, err = cli("locate", record, "--add", here)
    assert code == 0 and "nothing added: already known" in err
    code, out, err = cli("locate", record, "--add", "s3://key:secret@bucket/alpha")
    assert code == 2 and out == "" and err.count("\n") == 1 and "carries credentials" in err
    assert len(registry.locations(record).locations) == 3

    code, out, err = cli("fetch", record, "--to", tmp_path / "out")
    assert (
        code == 0
        and out
        == f"{tmp_path / 'out'}/m.gguf  sha256:{hashlib.sha256(data).hexdigest()}  from {here}\n"
    )
    assert (tmp_path / "out" / "m.gguf").read_bytes() == data
    code, _, err = cli("fetch", record, "--to", tmp_path / "out")
    assert code == 2 and "exists and is not an empty directory" in err

    (tmp_path / "copy" / "m.gguf").write_bytes(b"tampered" * 100)
    code, out, err = cli("fetch", record, "--to", tmp_path / "again", "--json")
    assert code == 1 and json.loads(out)["error"]["code"] == "not_fetchable"
    assert "MISMATCH" in err and not (tmp_path / "again").exists()
    # What the fetch read there is recorded: that copy is no longer the one to fetch from.
    found = registry.locations(record)
    assert found.fetch_from is None and found.locations[0].checked is not None
    assert not found.locations[0].checked.ok and "MISMATCH" in (
        found.locations[0].checked.detail or ""
    )

    code, _, err = cli("add", tmp_path / "copy" / "m.gguf", "--location", "ftp://x/y")
    assert code == 2 and "scheme must be one of" in err


def test_the_rollback_plan_says_where_the_candidates_bytes_are(cli) -> None:
    registry = _registry()
    r1, r2 = add_synthetic(registry, 1), add_synthetic(registry, 2)
    for record in (r1, r2):
        record_run(registry, record)
        registry.promote(record, "cpu")
    registry.locate(r1, ["s3://models/alpha/v1"])
    code, out, _ = cli("rollback", "rules/alpha", "--target", "cpu")
    assert code == 0
    candidate = out.split(f"candidate   v1 {r1}", 1)[1]
    # The copy that can be fetched from here (this host has no AWS credentials).
    assert "  bytes     file://" in candidate and r1 in candidate.splitlines()[1]
    code, out, _ = cli("rollback", "rules/alpha", "--target", "cpu", "--json")
    assert json.loads(out)["candidate"]["locations"][1:] == ["s3://models/alpha/v1"]
    shutil.rmtree(synthetic_bytes() / r1)
    # Bytes gone from a disk change nothing until someone finds them gone: a check records it.
    code, _, _ = cli("rollback", "rules/alpha", "--target", "cpu")
    assert code == 0
    code, _, err = cli("locate", r1, "--check", "all")
    assert code == 0 and "FOUND WANTING: file://" in err and "is not there" in err
    assert "not checked from this host: s3://models/alpha/v1" in err
    code, _, err = cli("rollback", "rules/alpha", "--target", "cpu")
    assert code == 1 and "no fetchable copy" in err and "never checked" in err
    code, out, _ = cli("status", "rules/alpha")
    assert f"{r2}  fetch from file://" in out
