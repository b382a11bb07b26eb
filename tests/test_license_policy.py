"""Licenses as a policy: classes from the SPDX data license-expression ships and the reviewed
model-license table; decisions per class or id with the reason; license changes noted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from modelreg.errors import NotDeployable
from modelreg.license_policy import (
    MODEL_LICENSES,
    LicenseClass,
    classify,
    license_change,
    policy,
)
from modelreg.schemas.licenses import KNOWN_LICENSES


@pytest.mark.parametrize(
    ("license_id", "expected"),
    [
        ("apache-2.0", LicenseClass.PERMISSIVE),
        ("MIT", LicenseClass.PERMISSIVE),
        ("cc0-1.0", LicenseClass.PERMISSIVE),
        ("gpl-3.0", LicenseClass.COPYLEFT),
        ("agpl-3.0", LicenseClass.COPYLEFT),
        ("cc-by-sa-4.0", LicenseClass.COPYLEFT),
        ("cc-by-nc-4.0", LicenseClass.NON_COMMERCIAL),
        ("cc-by-nc-sa-4.0", LicenseClass.NON_COMMERCIAL),
        ("cc-by-nc-nd-3.0", LicenseClass.NON_COMMERCIAL),
        ("gemma", LicenseClass.RESTRICTED),
        ("llama3.1", LicenseClass.RESTRICTED),
        ("llama4", LicenseClass.RESTRICTED),
        ("qwen", LicenseClass.RESTRICTED),
        ("bigscience-openrail-m", LicenseClass.RESTRICTED),
        ("fair-noncommercial-research-license", LicenseClass.NON_COMMERCIAL),
        ("other", LicenseClass.UNKNOWN),
        ("not-a-license", LicenseClass.UNKNOWN),
        (None, LicenseClass.UNKNOWN),
        ("MIT OR GPL-3.0", LicenseClass.PERMISSIVE),
        ("MIT AND CC-BY-NC-4.0", LicenseClass.NON_COMMERCIAL),
    ],
)
def test_license_is_classified(license_id: str | None, expected: LicenseClass) -> None:
    assert classify(license_id).license_class is expected


def test_every_hub_license_id_is_classified_or_honestly_unknown() -> None:
    unknown = {k for k in KNOWN_LICENSES if classify(k).license_class is LicenseClass.UNKNOWN}
    assert unknown <= {"unknown", "other", "cc"}, unknown
    assert set(MODEL_LICENSES) - KNOWN_LICENSES <= {"qwen", "tongyi-qianwen", "qwen-research"}


def test_policy_denies_non_commercial_with_the_reason() -> None:
    decision = policy("cc-by-nc-4.0", {"non-commercial": "deny", "restricted": "warn"})
    assert decision.decision == "deny"
    assert decision.license_class is LicenseClass.NON_COMMERCIAL
    assert "cc-by-nc-4.0 is non-commercial" in decision.reason
    assert "rule for non-commercial licenses" in decision.reason


def test_a_rule_for_the_id_wins_over_its_class() -> None:
    rules = {"restricted": "deny", "gemma": "allow"}
    assert policy("gemma", rules).decision == "allow"
    assert policy("llama3.1", rules).decision == "deny"
    assert policy("apache-2.0", rules).decision == "allow"
    assert policy("apache-2.0", rules, default="warn").decision == "warn"


def test_license_change_is_a_note_and_no_change_is_none() -> None:
    assert license_change("apache-2.0", "Apache-2.0") is None
    note = license_change("apache-2.0", "cc-by-nc-4.0")
    assert note is not None
    assert "apache-2.0 (permissive) to cc-by-nc-4.0 (non-commercial)" in note
    assert "from none (unknown)" in (license_change(None, "mit") or "")


def test_diff_notes_the_license_change(smollm2) -> None:  # type: ignore[no-untyped-def]
    from modelreg.manifests.build import build_manifest
    from modelreg.manifests.diff import diff_manifests

    a = build_manifest([smollm2], digest=False).manifest
    b = a.model_copy(update={"license": a.license.model_copy(update={"id": "cc-by-nc-4.0"})})
    notes = diff_manifests(a, b).notes
    assert any("apache-2.0 (permissive) to cc-by-nc-4.0 (non-commercial)" in n for n in notes)


def test_target_spec_takes_a_license_policy() -> None:
    from modelreg.targets import spec_from_json

    spec = spec_from_json("cpu-x", {"license_policy": {"non-commercial": "deny"}})
    assert spec.license_policy == {"non-commercial": "deny"}
    with pytest.raises(Exception, match="allow"):
        spec_from_json("cpu-x", {"license_policy": {"non-commercial": "maybe"}})


def _lab(tmp_path: Path, policy: str) -> Path:
    spec = tmp_path / "targets.yaml"
    spec.write_text(f"targets:\n  lab:\n    kind: cpu\n    license_policy: {policy}\n")
    return spec


def test_a_denied_license_is_not_deployable_on_that_target_only(tmp_path: Path) -> None:
    """Issue 41: the target's policy holds a record whose license it denies, with the reason;
    the same evidence stays good, on that target when the policy changes and on any other."""
    from tests.helpers import add_synthetic, open_with_targets, record_run

    registry = open_with_targets(
        f"sqlite:///{tmp_path / 'r.db'}", _lab(tmp_path, "{non-commercial: deny, unknown: warn}")
    )
    from modelreg.schemas.manifest import License

    free = add_synthetic(registry, 1)
    closed = add_synthetic(
        registry, 2, license=License(id="cc-by-nc-4.0", source="cli").model_dump()
    )
    for record in (free, closed):
        record_run(registry, record, "lab")
        record_run(registry, record, "cpu")

    def on(record: str, target: str) -> Any:
        return next(d for d in registry.show(record).deployability if d.target == target)

    denied = on(closed, "lab")
    assert not denied.deployable
    assert [r.code for r in denied.reasons] == ["license_denied"]
    assert "cc-by-nc-4.0 is non-commercial" in denied.reasons[0].message
    assert "deny by the policy's rule for non-commercial licenses" in denied.reasons[0].message
    assert on(closed, "cpu").deployable  # no policy there
    assert on(free, "lab").deployable
    with pytest.raises(NotDeployable, match="license denied here"):
        registry.promote(closed, "lab")
    # The policy is a verdict input, not evidence: allowing the class makes the same run count.
    registry.define_targets(_lab(tmp_path, "{non-commercial: allow}"), actor="tester")
    assert on(closed, "lab").deployable
    registry.promote(closed, "lab")


def test_a_warned_license_promotes_with_the_warning(tmp_path: Path) -> None:
    from modelreg.schemas.manifest import License
    from tests.helpers import add_synthetic, open_with_targets, record_run

    registry = open_with_targets(
        f"sqlite:///{tmp_path / 'r.db'}", _lab(tmp_path, "{restricted: warn}")
    )
    record = add_synthetic(registry, 1, license=License(id="llama3.1", source="cli").model_dump())
    record_run(registry, record, "lab")
    promoted = registry.promote(record, "lab")
    assert promoted.warning is not None and "llama3.1 is restricted" in promoted.warning


def test_add_notes_a_license_change_since_the_models_previous_record(
    smollm2: Path, tmp_path: Path
) -> None:
    import modelreg
    from modelreg.manifests.build import build_manifest

    registry = modelreg.open(f"sqlite:///{tmp_path / 'r.db'}")
    first = registry.add([smollm2], model_id="acme/chat")
    assert first.notes == []
    manifest = build_manifest([smollm2], model_id="acme/chat").manifest.model_dump(mode="json")
    manifest["license"] = {"id": "cc-by-nc-4.0", "source": "cli"}
    second = registry.add_manifest(manifest)
    assert second.created
    assert second.notes[0] == (
        "license changed from apache-2.0 (permissive) to cc-by-nc-4.0 (non-commercial) since "
        f"the model's previous record ({first.record.record_id})"
    )
    # Issue 41: a non-commercial license is remarked on at add, whatever the targets decide.
    assert len(second.notes) == 2
    assert second.notes[1].startswith("license cc-by-nc-4.0 is non-commercial (")
    assert "a target's license_policy (allow, warn or deny) decides" in second.notes[1]
