"""``modelreg deploy --check-runtime`` on a host that runs what production's evidence was made
under: the bytes are fetched, the gate passes, and the runtime check says it matches (exit 0).
tests/test_fleet.py runs the other side from a host without llama.cpp (exit 1, not started)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import modelreg
from modelreg.locations import file_url
from tests.helpers import record_of_files, record_run

MODEL = "rules/alpha"


def test_deploy_check_runtime_on_the_host_production_was_verified_on(
    cli: Any, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    files = {"model.gguf": b"weights" * 64, "tokenizer.json": b"{}"}
    record = record_of_files(registry, files)
    source = tmp_path / "build"
    source.mkdir()
    for name, data in files.items():
        (source / name).write_bytes(data)
    registry.locate(record, [file_url(source)])  # every sha256 read
    record_run(registry, record)  # this host's runtime, as verify records it
    registry.promote(record, "cpu", why="v1")

    code, out, err = cli(
        "--db", db, "deploy", MODEL, "--target", "cpu", "--to", str(tmp_path / "pod"),
        "--check-runtime", "--progress", "none",
    )  # fmt: skip
    assert code == 0, err
    assert "runtime here: the one production was verified under" in err
    assert (tmp_path / "pod" / "model.gguf").read_bytes() == files["model.gguf"]
    code, out, err = cli(
        "--db", db, "deploy", MODEL, "--target", "cpu", "--to", str(tmp_path / "pod"),
        "--check-runtime", "--progress", "none", "--json",
    )  # fmt: skip
    answer = json.loads(out)
    assert code == 0 and answer["deployed"] and answer["already_there"]
    assert answer["runtime_check"] == {"matches": True, "changes": None}
