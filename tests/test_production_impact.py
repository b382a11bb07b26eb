"""Changes that take production out say so first (issue 40, item 3): a suite attached,
detached or grown, a target redefined or removed, a trusted key added or rotated — each names
the production entries it makes stale or failing and the command that re-verifies each, and
``--dry-run`` gives the same answer and writes nothing."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

import modelreg
from modelreg.cli.suites import DRY_RUN_NOTE
from tests.helpers import add_synthetic, key_pair, record_run, suite_evidence
from tests.test_trust import _signed_run

MODEL = "rules/alpha"
TABLES = (
    "models",
    "records",
    "record_states",
    "promotions",
    "events",
    "runs",
    "verifications",
    "model_suites",
    "targets",
    "verdicts",
    "webhook_deliveries",
)
SUITE = """\
schema_version: 1
name: release
thresholds: {min_pass_rate: 1.0}
cases:
  - id: capital
    prompt: What is the capital of France?
    expect: {mode: contains, value: Paris}
"""
INCIDENT = """\
schema_version: 1
name: inc-9
thresholds: {min_pass_rate: 1.0}
cases:
  - id: korean
    prompt: Say hello in Korean.
    expect: {mode: contains, value: 안녕}
"""


def _rows(registry: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table a change of the gate can write, for before/after."""
    with registry.store.engine.connect() as connection:
        return {
            table: sorted(
                (tuple(row) for row in connection.execute(text(f"SELECT * FROM {table}"))),
                key=repr,
            )
            for table in TABLES
        }


def _production(registry: Any, i: int = 1, target: str = "cpu") -> str:
    record = add_synthetic(registry, i)
    record_run(registry, record, target)
    registry.promote(record, target, why="release 1")
    return record


def _now(registry: Any, target: str = "cpu") -> str:
    (entry,) = registry.status(MODEL, target).entries
    return str(entry.deployability.now)


def _suite(tmp_path: Path, body: str = SUITE, name: str = "release.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def _here(extra: str = "", memory_gib: int = 64) -> str:
    host = socket.gethostname()
    return f"targets:\n  edge:\n    hosts: ['{host}']\n    memory_gib: {memory_gib}\n" + extra


def _targets(tmp_path: Path, body: str, name: str = "targets.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def _verify_step(record: str, target: str) -> dict[str, Any]:
    return {"action": "verify", "args": {"ref": record, "target": target}, "purpose": None}


def _same_answer(dry: Any, real: Any) -> None:
    """A dry run's answer is the change's, but for saying it wrote nothing."""
    assert dry.dry_run and not real.dry_run
    assert dry.production_affected == real.production_affected


# -- suite attach / detach -----------------------------------------------------------------


def test_attaching_a_suite_names_the_production_it_makes_stale(
    registry: Any, tmp_path: Path
) -> None:
    record = _production(registry)
    attached = registry.attach_suite(MODEL, _suite(tmp_path))
    (change,) = attached.production_affected  # before: one line, no word of production
    assert (change.model_id, change.target, change.record_id) == (MODEL, "cpu", record)
    assert (change.before, change.after) == ("deployable", "stale")
    assert [r.code for r in change.reasons] == ["stale_suite"]
    assert "suite changed" in change.reasons[0].message
    assert change.next is not None and change.next.model_dump() == _verify_step(record, "cpu")
    assert _now(registry) == "stale"  # what it said is what a reader sees


def test_attach_dry_run_gives_the_same_answer_and_writes_nothing(
    registry: Any, tmp_path: Path
) -> None:
    _production(registry)
    suite = _suite(tmp_path)
    before = _rows(registry)
    dry = registry.attach_suite(MODEL, suite, dry_run=True)
    assert _rows(registry) == before  # no event, no suite row, no verdict, no webhook
    assert _now(registry) == "deployable"
    assert dry.message.startswith(f"{MODEL} would run suite release")
    real = registry.attach_suite(MODEL, suite)
    _same_answer(dry, real)
    assert _rows(registry) != before


def test_a_new_suite_version_dry_run_needs_no_why_and_a_real_one_does(
    registry: Any, tmp_path: Path
) -> None:
    record = add_synthetic(registry, 1)
    registry.attach_suite(MODEL, _suite(tmp_path))
    record_run(registry, record)
    registry.promote(record, "cpu", why="release 1")
    grown = _suite(tmp_path, SUITE.replace("name: release", "name: release-v2"), "v2.yaml")
    before = _rows(registry)
    dry = registry.attach_suite(MODEL, grown, dry_run=True)
    assert _rows(registry) == before
    assert [c.after for c in dry.production_affected] == ["stale"]
    with pytest.raises(modelreg.errors.InvalidInput, match="why"):
        registry.attach_suite(MODEL, grown)
    _same_answer(dry, registry.attach_suite(MODEL, grown, why="INC-9: stricter"))


def test_the_same_suite_again_affects_nothing(registry: Any, tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    record = add_synthetic(registry, 1)
    registry.attach_suite(MODEL, suite)
    record_run(registry, record)
    registry.promote(record, "cpu", why="release 1")
    again = registry.attach_suite(MODEL, suite)
    assert again.production_affected == [] and "nothing changed" in again.message


def test_detaching_the_suite_names_the_production_it_makes_stale(
    registry: Any, tmp_path: Path
) -> None:
    record = add_synthetic(registry, 1)
    registry.attach_suite(MODEL, _suite(tmp_path))
    record_run(registry, record)
    registry.promote(record, "cpu", why="release 1")
    before = _rows(registry)
    dry = registry.detach_suite(MODEL, dry_run=True)
    assert _rows(registry) == before
    (change,) = dry.production_affected
    assert (change.record_id, change.before, change.after) == (record, "deployable", "stale")
    _same_answer(dry, registry.detach_suite(MODEL, why="back to the golden prompts"))
    assert _now(registry) == "stale"


def test_a_change_that_brings_production_back_says_so(registry: Any, tmp_path: Path) -> None:
    """Production verified under the golden prompts, a suite attached (stale), detached again:
    the run counts again, and the answer says production is deployable with nothing to do."""
    record = _production(registry)
    registry.attach_suite(MODEL, _suite(tmp_path))
    (change,) = registry.detach_suite(MODEL, why="attached by mistake").production_affected
    assert (change.record_id, change.before, change.after) == (record, "stale", "deployable")
    assert change.reasons == [] and change.next is None
    assert _now(registry) == "deployable"


def test_only_production_entries_are_named(registry: Any, tmp_path: Path) -> None:
    production = _production(registry, 1)
    other = add_synthetic(registry, 2)
    record_run(registry, other)  # verified, deployable, never production
    attached = registry.attach_suite(MODEL, _suite(tmp_path))
    assert [c.record_id for c in attached.production_affected] == [production]


# -- suite add-case ------------------------------------------------------------------------


def _incident_run(registry: Any, suite_path: Path) -> tuple[str, str]:
    """Production under the attached suite (release 1), and the incident's Korean case failed
    by release 2 in a one-off run of a suite of the incident's own: (production, the run)."""
    good, bad = add_synthetic(registry, 1), add_synthetic(registry, 2)
    registry.attach_suite(MODEL, suite_path)
    record_run(registry, good)
    registry.promote(good, "cpu", why="release 1")
    incident_path = _suite(suite_path.parent, INCIDENT, "incident.yaml")
    incident = modelreg.api.load_suite_ref(incident_path)
    run_id = record_run(
        registry,
        bad,
        "cpu",
        {"digest": "pass", "gguf-cpu-smoke": "fail"},
        {"gguf-cpu-smoke": suite_evidence(incident, {})},
        suite=incident_path,
    )
    return good, run_id


def test_adding_the_incident_case_says_what_attaching_it_takes_out(
    registry: Any, tmp_path: Path
) -> None:
    suite_path = _suite(tmp_path)
    record, run_id = _incident_run(registry, suite_path)
    before = _rows(registry)
    grown = registry.suite_add_case(suite_path, run_id)
    assert _rows(registry) == before  # the file changed, the registry did not
    assert _now(registry) == "deployable"
    assert grown.attached_to == [MODEL]
    (change,) = grown.production_affected
    assert (change.record_id, change.before, change.after) == (record, "deployable", "stale")
    assert change.next is not None and change.next.model_dump() == _verify_step(record, "cpu")
    (attach,) = grown.next_steps
    assert (attach.action, attach.args["model_id"]) == ("attach_suite", MODEL)
    # What it said attaching would do is what attaching does.
    attached = registry.attach_suite(MODEL, suite_path, why="INC-9: the Korean greeting")
    assert attached.production_affected == grown.production_affected


def test_add_case_dry_run_leaves_the_file_and_the_registry_alone(
    registry: Any, tmp_path: Path
) -> None:
    suite_path = _suite(tmp_path)
    _record, run_id = _incident_run(registry, suite_path)
    file_before, rows_before = suite_path.read_bytes(), _rows(registry)
    dry = registry.suite_add_case(suite_path, run_id, dry_run=True)
    assert suite_path.read_bytes() == file_before and _rows(registry) == rows_before
    assert dry.message.startswith("would add 1 regression case(s)")
    real = registry.suite_add_case(suite_path, run_id)
    assert suite_path.read_bytes() != file_before
    _same_answer(dry, real)
    assert (dry.added, dry.sha256) == (real.added, real.sha256)


# -- targets apply / remove, trusted keys ----------------------------------------------------


def test_a_target_edit_names_the_production_it_makes_stale(registry: Any, tmp_path: Path) -> None:
    registry.define_targets(_targets(tmp_path, _here()))
    record = _production(registry, target="edge")
    edited = _targets(tmp_path, _here(memory_gib=32), "edited.yaml")
    before = _rows(registry)
    dry = registry.define_targets(edited, dry_run=True)
    assert _rows(registry) == before and _now(registry, "edge") == "deployable"
    assert dry.message.startswith("would apply to the registry: edge (replaced)")
    (change,) = dry.production_affected
    assert (change.target, change.record_id) == ("edge", record)
    assert (change.before, change.after) == ("deployable", "stale")
    assert [r.code for r in change.reasons] == ["stale_target"]
    assert change.next is not None and change.next.model_dump() == _verify_step(record, "edge")
    _same_answer(dry, registry.define_targets(edited))
    assert _now(registry, "edge") == "stale"


def test_a_trusted_key_added_names_the_production_it_stops_counting(
    registry: Any, tmp_path: Path
) -> None:
    registry.define_targets(_targets(tmp_path, _here()))
    record = _production(registry, target="edge")
    _private, public = key_pair(tmp_path, "ci")
    strict = _targets(tmp_path, _here(f"    trust: {{verifier_keys: ['{public}']}}\n"), "k.yaml")
    before = _rows(registry)
    dry = registry.define_targets(strict, dry_run=True)
    assert _rows(registry) == before
    (change,) = dry.production_affected
    assert change.record_id == record and change.before == "deployable"
    assert change.after != "deployable" and change.reasons
    # The step the verdict names: a signed verify on the target.
    assert change.next is not None and change.next.action == "verify"
    assert change.next.args["ref"] == record and change.next.args["target"] == "edge"
    _same_answer(dry, registry.define_targets(strict))


def test_a_rotated_trusted_key_names_the_production_signed_by_the_old_one(
    registry: Any, tmp_path: Path
) -> None:
    old_private, old_public = key_pair(tmp_path, "old")
    _new_private, new_public = key_pair(tmp_path, "new")
    trusting = "    trust: {{verifier_keys: ['{}']}}\n"
    registry.define_targets(_targets(tmp_path, _here(trusting.format(old_public))))
    record = add_synthetic(registry, 1)
    _signed_run(registry, record, "edge", old_private)
    registry.promote(record, "edge", why="release 1")
    rotated = _targets(tmp_path, _here(trusting.format(new_public)), "rotated.yaml")
    dry = registry.define_targets(rotated, dry_run=True)
    (change,) = dry.production_affected
    assert (change.record_id, change.before) == (record, "deployable")
    assert change.after != "deployable"
    _same_answer(dry, registry.define_targets(rotated))
    assert _now(registry, "edge") == change.after


def test_an_unchanged_target_file_affects_nothing(registry: Any, tmp_path: Path) -> None:
    spec = _targets(tmp_path, _here())
    registry.define_targets(spec)
    _production(registry, target="edge")
    assert registry.define_targets(spec).production_affected == []


def test_removing_a_target_names_the_production_on_it(registry: Any, tmp_path: Path) -> None:
    registry.define_targets(_targets(tmp_path, _here()))
    record = _production(registry, target="edge")
    before = _rows(registry)
    dry = registry.remove_target("edge", why="decommissioned", dry_run=True)
    assert _rows(registry) == before
    assert "edge" in {t.name for t in registry.targets().targets}
    (change,) = dry.production_affected
    assert (change.record_id, change.before, change.after) == (record, "deployable", "failing")
    assert dry.message.startswith("would remove shared target edge")
    _same_answer(dry, registry.remove_target("edge", why="decommissioned"))
    assert "edge" not in {t.name for t in registry.targets().targets}


# -- the CLI: text and --json ----------------------------------------------------------------


def test_cli_suite_attach_says_what_it_takes_out(cli, registry: Any, tmp_path: Path) -> None:
    record = _production(registry)
    suite = _suite(tmp_path)
    before = _rows(registry)
    code, out, err = cli("--db", registry.url, "suite", "attach", MODEL, suite, "--dry-run")
    assert code == 0 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith(f"{MODEL} would run suite release (sha256 ")
    at = lines.index("production would change: 1 entry")
    assert lines[at + 1].startswith(f"  {MODEL} on cpu: {record} deployable -> STALE (stale: ")
    assert "suite changed" in lines[at + 1]
    assert lines[at + 2] == f"    re-verify: modelreg verify {record} --target cpu"
    assert lines[at + 3 :] == [DRY_RUN_NOTE]
    assert _rows(registry) == before

    code, out, err = cli("--db", registry.url, "suite", "attach", MODEL, suite, "--json")
    assert code == 0
    answer = json.loads(out)
    assert answer["dry_run"] is False
    (change,) = answer["production_affected"]
    assert change["record_id"] == record and (change["before"], change["after"]) == (
        "deployable",
        "stale",
    )
    assert change["next"] == _verify_step(record, "cpu")
    assert "production changed: 1 entry" not in err and DRY_RUN_NOTE not in err


def test_cli_suite_detach_and_add_case_dry_runs(cli, registry: Any, tmp_path: Path) -> None:
    suite_path = _suite(tmp_path)
    record, run_id = _incident_run(registry, suite_path)
    before, file_before = _rows(registry), suite_path.read_bytes()
    code, _, err = cli(
        "--db", registry.url, "suite", "add-case", suite_path, "--from-run", run_id, "--dry-run"
    )
    assert code == 0
    assert f"next: modelreg suite attach {MODEL} {suite_path} --why '...'" in err
    assert "production once attached, would change: 1 entry" in err
    assert f"    re-verify: modelreg verify {record} --target cpu" in err
    assert err.splitlines()[-1] == DRY_RUN_NOTE
    code, out, _ = cli(
        "--db",
        registry.url,
        "suite",
        "add-case",
        suite_path,
        "--from-run",
        run_id,
        "--dry-run",
        "--json",
    )
    answer = json.loads(out)
    assert code == 0 and answer["dry_run"] is True and answer["attached_to"] == [MODEL]
    assert answer["production_affected"][0]["next"] == _verify_step(record, "cpu")

    code, out, err = cli("--db", registry.url, "suite", "detach", MODEL, "--dry-run", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["dry_run"] is True
    assert [c["after"] for c in answer["production_affected"]] == ["stale"]
    assert _rows(registry) == before and suite_path.read_bytes() == file_before


def test_cli_targets_apply_and_remove(cli, registry: Any, tmp_path: Path) -> None:
    registry.define_targets(_targets(tmp_path, _here()))
    record = _production(registry, target="edge")
    edited = _targets(tmp_path, _here(memory_gib=32), "edited.yaml")
    before = _rows(registry)
    code, _, err = cli("--db", registry.url, "targets", "apply", edited, "--dry-run")
    assert code == 0
    lines = err.splitlines()
    assert lines[:2] == [
        "would apply to the registry: edge (replaced)",
        "production would change: 1 entry",
    ]
    assert lines[2].startswith(f"  {MODEL} on edge: {record} deployable -> STALE (stale: target ")
    assert lines[3:] == [f"    re-verify: modelreg verify {record} --target edge", DRY_RUN_NOTE]
    code, out, _ = cli("--db", registry.url, "targets", "remove", "edge", "--dry-run", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["dry_run"] is True
    assert [(c["record_id"], c["after"]) for c in answer["production_affected"]] == [
        (record, "failing")
    ]
    assert _rows(registry) == before
    code, _, err = cli("--db", registry.url, "targets", "apply", edited)
    assert code == 0 and "production changed: 1 entry" in err and DRY_RUN_NOTE not in err
    assert _now(registry, "edge") == "stale"


def test_cli_dry_run_of_a_missing_model_is_exit_2_and_writes_nothing(
    cli, registry: Any, tmp_path: Path
) -> None:
    _production(registry)
    before = _rows(registry)
    code, _, err = cli(
        "--db", registry.url, "suite", "attach", "no/such", _suite(tmp_path), "--dry-run"
    )
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) <= 2
    assert _rows(registry) == before


def test_dry_runs_write_nothing_on_either_backend(db_url: str, tmp_path: Path) -> None:
    """The same transaction, rolled back: on PostgreSQL too (where the writes hold row locks
    and the settling lock until the transaction ends)."""
    registry = modelreg.open(db_url)
    registry.define_targets(_targets(tmp_path, _here()))
    record = _production(registry, target="edge")
    before = _rows(registry)
    attach = registry.attach_suite(MODEL, _suite(tmp_path), dry_run=True)
    edit = registry.define_targets(_targets(tmp_path, _here(memory_gib=32), "e.yaml"), dry_run=True)
    remove = registry.remove_target("edge", dry_run=True)
    assert _rows(registry) == before
    assert [(c.record_id, c.after) for c in attach.production_affected] == [(record, "stale")]
    assert [(c.record_id, c.after) for c in edit.production_affected] == [(record, "stale")]
    assert [(c.record_id, c.after) for c in remove.production_affected] == [(record, "failing")]
    # And the writes after them go through: no lock was left behind.
    assert registry.attach_suite(MODEL, _suite(tmp_path)).production_affected
    assert _rows(registry) != before
