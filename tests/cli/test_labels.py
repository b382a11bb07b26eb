"""Labels on promote (issue 40 item 6): ``promote --label release-14`` names the promotion, and
``MODEL@release-14`` then names its record wherever a record is asked for — until a newer
promotion takes the label. The approval, the forced mark and the label survive export/import."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

import modelreg
from modelreg.errors import InvalidInput, RecordNotFound
from modelreg.registry.transfer import export_text
from modelreg.steps import Step
from tests.helpers import add_synthetic, record_run

MODEL = "rules/alpha"


def _three_releases(db: str) -> tuple[Any, list[str]]:
    registry = modelreg.open(db)
    records = [add_synthetic(registry, i) for i in (1, 2, 3)]
    for record in records:
        record_run(registry, record)
    return registry, records


def test_a_label_names_the_record_its_newest_promotion_made_production(
    cli: Any, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry, (r1, r2, r3) = _three_releases(db)
    code, out, err = cli(
        "--db", db, "promote", r1, "--target", "cpu", "--why", "first", "--label", "release-14"
    )  # fmt: skip
    assert code == 0, err
    assert f"labelled release-14: {MODEL}@release-14 names it" in err + out
    assert registry.get(f"{MODEL}@release-14").id == r1
    registry.promote(r2, "cpu", why="second", label="stable")
    registry.promote(r3, "cpu", why="third", label="release-14")  # the label moves on
    assert registry.get(f"{MODEL}@release-14").id == r3
    assert registry.get(f"{MODEL}@stable").id == r2
    assert registry.get(f"{MODEL}@v1").id == r1  # versions are not labels

    # A rollback gives no label and moves none; the label is a handle for --to.
    code, out, err = cli(
        "--db", db, "rollback", MODEL, "--target", "cpu", "--to", f"{MODEL}@stable",
        "--apply", "--why", "INC-1",
    )  # fmt: skip
    assert code == 0, err
    assert registry.status(MODEL).entries[0].record.record_id == r2
    assert registry.get(f"{MODEL}@release-14").id == r3

    # Where people read it: status, show, history, JSON.
    registry.release(r3, "INC-1 was not v3", actor="admin")
    registry.promote(r3, "cpu", why="again", label="release-15")
    code, out, _ = cli("--db", db, "status", MODEL)
    assert code == 0 and "(release-15)" in out
    code, out, _ = cli("--db", db, "show", f"{MODEL}@release-15")
    assert code == 0 and "labelled release-15" in out
    code, out, _ = cli("--db", db, "history", MODEL, "--json")
    labels = [e["detail"].get("label") for e in json.loads(out)["events"] if e["kind"] == "promote"]
    assert sorted(label for label in labels if label) == [
        "release-14",
        "release-14",
        "release-15",
        "stable",
    ]
    code, out, _ = cli("--db", db, "status", MODEL, "--json")
    assert json.loads(out)["entries"][0]["promotion"]["label"] == "release-15"


def test_labels_that_are_not_labels_are_bad_input_and_nothing_is_written(
    cli: Any, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry, (r1, _r2, _r3) = _three_releases(db)
    for bad, said in (
        ("v3", "reads as a version number"),
        ("v0123456789", "reads as a version number"),
        ("V3", "reads as a version number"),
        ("-rc", "is not a label"),
        ("release 14", "is not a label"),
        ("x" * 65, "is not a label"),
    ):
        with pytest.raises(InvalidInput, match=said):
            registry.promote(r1, "cpu", why="x", label=bad)
    assert registry.status().entries == []
    code, _, err = cli("--db", db, "promote", r1, "--target", "cpu", "--label", "v2")
    assert code == 2 and "reads as a version number" in err and len(err.splitlines()) == 1
    # The production record again under another label: refused, as another approval is.
    registry.promote(r1, "cpu", why="first", label="rc-1")
    with pytest.raises(
        InvalidInput, match="its approval and label are the ones it was promoted with"
    ):
        registry.promote(r1, "cpu", why="again", label="rc-2")
    assert registry.promote(r1, "cpu", label="rc-1").changed is False
    assert registry.promote(r1, "cpu").changed is False
    with pytest.raises(RecordNotFound, match="no label looks like a version"):
        registry.get(f"{MODEL}@V1")  # versions are lower case; no label is V1 either
    with pytest.raises(RecordNotFound, match="at most 9 digits"):
        registry.get(f"{MODEL}@v1234567890")
    with pytest.raises(RecordNotFound) as missing:
        registry.get(f"{MODEL}@rc-2")
    assert "no promotion of rules/alpha is labelled 'rc-2'" in str(missing.value)
    assert missing.value.step == Step(
        "history", "see the model's promotions and their labels", model_id=MODEL
    )


def test_export_import_keeps_the_approval_the_forced_mark_and_the_label(
    cli: Any, tmp_path: Path
) -> None:
    """Export wrote a promotion's actor and why only: owner, limitations, re-test date, the
    break-glass reasons and (now) the label were lost on the way to PostgreSQL."""
    db = f"sqlite:///{tmp_path / 'r.db'}"
    registry, (r1, r2, _r3) = _three_releases(db)
    due = date.today() + timedelta(days=30)
    registry.promote(
        r1, "cpu", why="v1", owner="ana", limitations=["no Korean"], retest_by=due, label="ga"
    )
    registry.promote(r2, "cpu", why="v2")
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "schema_version: 1\nname: s\nthresholds: {min_pass_rate: 1.0}\ncases:\n"
        "  - {id: a, prompt: 'Say memo.', expect: {value: memo}}\n"
    )
    registry.attach_suite(MODEL, suite)
    registry.rollback(MODEL, "cpu", to=r1, force=True, why="INC-2", actor="admin")
    dump = tmp_path / "r.jsonl"
    assert cli("--db", db, "export", dump)[0] == 0

    target = f"sqlite:///{tmp_path / 'other.db'}"
    code, _, err = cli("--db", target, "import", dump)
    assert code == 0, err
    moved = modelreg.open(target)
    assert moved.get(f"{MODEL}@ga").id == r1
    (entry,) = moved.status(MODEL).entries
    assert (
        entry.forced
        and entry.promotion.forced == registry.status(MODEL).entries[0].promotion.forced
    )
    again = tmp_path / "again.jsonl"
    assert cli("--db", target, "export", again)[0] == 0

    def promotions(path: Path) -> list[dict[str, Any]]:
        return [
            r for r in map(json.loads, path.read_text().splitlines()) if r["type"] == "promotion"
        ]

    assert promotions(again) == promotions(dump)
    (first,) = [p for p in promotions(again) if p["label"] == "ga"]
    assert (first["owner"], json.loads(first["limitations_json"])) == ("ana", ["no Korean"])
    assert first["retest_by"].startswith(due.isoformat())

    # A promotion row whose JSON columns are not lists of strings, or whose label is a
    # version, is refused at import (every status read parses them).
    rows = [json.loads(line) for line in dump.read_text().splitlines()]
    # Nor can a file grant what the API never writes: a forced promote (the forced mark is what
    # lets the gate pass a production that is not deployable), a labelled rollback, an owner
    # or limitations past promote's bounds.
    for action, field, value, said in (
        ("promote", "limitations_json", '{"a": 1}', "not a JSON list of strings"),
        ("promote", "limitations_json", '["ok", " "]', "a text is blank"),
        ("promote", "limitations_json", json.dumps(["x"] * 21), "21 limitations: at most 20"),
        ("promote", "owner", "a\u0000b", "owner is blank, has a NUL"),
        ("rollback", "forced_json", "[", "not JSON"),
        ("promote", "forced_json", '["stale: suite changed"]', "only a rollback is forced"),
        ("promote", "label", "v2", "is not a label"),
        ("rollback", "label", "ga-2", "only a promote is labelled"),
    ):
        altered = [dict(r) for r in rows[:-1]]
        promotion = next(r for r in altered if r["type"] == "promotion" and r["action"] == action)
        promotion[field] = value
        bad = tmp_path / f"bad-{field}.jsonl"
        bad.write_text(export_text(altered))  # a valid trailer around the hostile row
        code, _, err = cli("--db", f"sqlite:///{tmp_path / f'{field}.db'}", "import", bad)
        assert code == 2 and said in err, err
