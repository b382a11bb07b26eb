"""Hostile input, round three, at the command line: a file name that is not UTF-8, fetch
honouring the umask, the origin of every run in `show`."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path
from typing import Any

import modelreg
from tests.helpers import add_synthetic, record_run


def test_a_file_name_that_is_not_utf8_is_exit_2(cli: Any, smollm2: Path, tmp_path: Path) -> None:
    odd = Path(os.fsdecode(bytes(tmp_path) + b"/m\xff.gguf"))
    shutil.copyfile(smollm2, odd)
    code, _, err = cli("add", odd, "--model-id", "a/b", "--source", "pypi://x==1")
    assert code == 2 and "not valid UTF-8" in err and len(err.strip().splitlines()) == 1
    assert cli("list")[0] == 0


def test_fetch_honours_the_umask(cli: Any, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    import hashlib

    from modelreg.locations import file_url

    registry = modelreg.open(db)
    data = b"weights" * 100
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.gguf").write_bytes(data)
    entry = {"path": "m.gguf", "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    record = add_synthetic(registry, 1, files=[entry])
    registry.locate(record, [file_url(tmp_path / "src")])
    old = os.umask(0o027)
    try:
        code, _, err = cli("--db", db, "fetch", record, "--to", tmp_path / "out")
    finally:
        os.umask(old)
    assert code == 0, err
    assert stat.S_IMODE((tmp_path / "out").stat().st_mode) == 0o750  # before: 0700


def test_show_names_the_origin_of_every_run(cli: Any, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    from datetime import UTC, datetime

    from modelreg.schemas.verification import CheckResult, Outcome

    now = datetime.now(UTC)
    check = CheckResult(
        check="digest",
        required=True,
        outcome=Outcome.PASS,
        summary="elsewhere",
        started_at=now,
        finished_at=now,
    )
    the_record = registry.get(record)
    with registry.store.locked("rules/alpha") as tx:
        tx.save_run(
            the_record, "cpu", [check], "elsewhere", {}, origin="uploaded", origin_detail="x"
        )
    code, out, _ = cli("--db", db, "show", record)
    assert code == 0
    header = next(line for line in out.splitlines() if line.startswith("when"))
    assert header.split()[:4] == ["when", "(UTC)", "target", "origin"]
    assert "local" in out and "uploaded run" in out


def test_json_output_escapes_bidi_and_c1(cli: Any, tmp_path: Path) -> None:
    import json

    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    record = add_synthetic(registry, 1)
    registry.hold(record, "why\u202eoverride\x85")
    code, out, _ = cli("--db", db, "show", record, "--json")
    assert code == 0 and "\u202e" not in out and "\x85" not in out and "\\u202e" in out
    assert json.loads(out)["record"]["state"]["reason"] == "why\u202eoverride\x85"
