"""What the on-call reads at 3 a.m. (issue 40): the plan for ``rollback --to R`` says R was
named, not that it is "the newest earlier production record"; ``show`` puts the newest runs
first and folds the rest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import modelreg
from tests.helpers import add_synthetic, record_run

MODEL = "rules/alpha"


def test_the_plan_for_a_named_record_says_it_was_named(cli: Any, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    records = [add_synthetic(registry, i) for i in (1, 2, 3)]
    for i, record in enumerate(records, 1):
        record_run(registry, record)
        registry.promote(record, "cpu", why=f"build {i}")
    code, out, err = cli("--db", db, "rollback", MODEL, "--target", "cpu", "--to", f"{MODEL}@v1")
    assert code == 0, err
    assert f"candidate   {MODEL}@v1" in out or records[0] in out
    assert f"candidate   v1 {records[0]}  deployable — the record named (--to)" in out
    assert "the record named (--to)" in out and "newest earlier" not in out
    assert registry.rollback_plan(MODEL, "cpu", to=records[0]).named is True
    code, out, err = cli("--db", db, "rollback", MODEL, "--target", "cpu")
    assert code == 0, err
    assert "the newest earlier production record" in out and "named (--to)" not in out
    assert registry.rollback_plan(MODEL, "cpu").named is False


def test_show_puts_the_newest_runs_first_and_folds_the_rest(cli: Any, tmp_path: Path) -> None:
    """Issue 40 item 6: at 3 a.m. the newest run is what matters; old ones fold."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    record = add_synthetic(registry, 1)
    runs = [record_run(registry, record) for _ in range(4)]
    code, out, err = cli("--db", db, "show", record, "--runs", "2")
    assert code == 0, err
    shown = [line.split()[2] for line in out.splitlines() if line.startswith("local run ")]
    assert shown == [runs[3], runs[2]]
    assert "2 older run(s), " in out and "not shown (--runs 0 shows all)" in out
    code, out, _ = cli("--db", db, "show", record, "--runs", "0")
    shown = [line.split()[2] for line in out.splitlines() if line.startswith("local run ")]
    assert shown == runs[::-1] and "older run" not in out
    code, out, _ = cli("--db", db, "show", record, "--json")
    assert [r["run_id"] for r in json.loads(out)["runs"]] == runs


def test_a_table_read_at_a_terminal_fits_its_width(
    cli: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """Issue 40 item 6: at a terminal (COLUMNS here) the widest columns — a summary, a
    reason — are cut with "…" so that each line fits; a pipe and --json get every character."""
    from modelreg.cli.render import table

    rows = [("r_1", "cpu", "why " * 40)]
    fitted = table(rows, ["record", "target", "why"], width=60)
    assert all(len(line) <= 60 for line in fitted.splitlines())
    assert fitted.splitlines()[1].endswith("…")
    narrow = table(rows, ["record", "target", "why"], width=10)  # a cut column keeps 24
    assert len(narrow.splitlines()[1]) == len("r_1     cpu     ") + 24
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry = modelreg.open(db)
    record = add_synthetic(registry, 1)
    registry.hold(record, "a reason long enough to need cutting " * 4, actor="alice")
    code, out, _ = cli("--db", db, "history", MODEL)
    assert code == 0 and max(len(line) for line in out.splitlines()) > 100  # a pipe: whole
    monkeypatch.setenv("COLUMNS", "120")
    code, out, _ = cli("--db", db, "history", MODEL)
    assert code == 0 and all(len(line) <= 120 for line in out.splitlines()), out
    assert "…" not in out.splitlines()[1][:20]  # times stay whole: only long text gives way
