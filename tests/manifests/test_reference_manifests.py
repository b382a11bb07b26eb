"""Reference manifests of the real builds in the documents (manifests/ at the repo root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelreg.manifests.hf_config import architecture_from_config, ledger_from_config
from modelreg.manifests.holds import finalize
from modelreg.schemas.manifest import Manifest, load_manifest
from tests.conftest import REPO

MANIFESTS = sorted((REPO / "manifests").glob("*.json"))
DATA = Path(__file__).resolve().parents[1] / "data"


def _load(path: Path) -> Manifest:
    return load_manifest(json.loads(path.read_text()), origin=str(path))


def test_there_are_reference_manifests() -> None:
    names = {p.name for p in MANIFESTS}
    assert {
        "qwen3-30b-a3b.json",
        "gemma-3n-e2b.json",
        "gemma-4-26b-a4b-q8_0-avx1-xeon.json",
        "gemma-4-26b-a4b-inf2-xlarge.json",
    } <= names


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_reference_manifest_is_valid_and_its_holds_are_derived(path: Path) -> None:
    manifest = _load(path)
    assert finalize(manifest) == manifest, "holds / label check out of date with the rules"
    # Nothing is guessed: what is unknown keeps the record on hold.
    if any(f.sha256 is None for f in manifest.files) or manifest.source is None:
        assert manifest.hold_reasons


def test_qwen3_30b_a3b_matches_its_published_config() -> None:
    manifest = _load(REPO / "manifests" / "qwen3-30b-a3b.json")
    config = json.loads((DATA / "qwen3-30b-a3b.config.json").read_text())
    ledger = ledger_from_config(config)
    assert manifest.parameters == ledger
    assert ledger.total.value == pytest.approx(30.5e9, rel=0.01)
    assert ledger.active.value == pytest.approx(3.3e9, rel=0.02)
    assert ledger.non_embedding.value == pytest.approx(29.9e9, rel=0.01)
    arch = architecture_from_config(config, "x")
    assert (arch.expert_count, arch.expert_used_count) == (128, 8)
    assert (arch.head_count, arch.head_count_kv, arch.block_count) == (32, 4, 48)
    assert manifest.label_check is not None and manifest.label_check.problems == []


def test_gemma_3n_e2b_effective_is_declared_not_active() -> None:
    manifest = _load(REPO / "manifests" / "gemma-3n-e2b.json")
    assert manifest.parameters.effective.provenance.startswith("declared:")
    assert manifest.parameters.active.value is None
    assert manifest.parameters.total.value is None  # "more than 5B" is not a count


def test_gemma4_avx1_build_records_its_runtime_constraints() -> None:
    manifest = _load(REPO / "manifests" / "gemma-4-26b-a4b-q8_0-avx1-xeon.json")
    notes = " ".join(manifest.runtime.notes)
    assert "GGML_USE_IQK_MULMAT=OFF" in notes and "--run-time-repack" in notes
    assert any("26B-A4B" in r for r in manifest.hold_reasons)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("smollm2-135m.config.json", 134_515_008), ("gemma-3-270m.config.json", 268_098_176)],
)
def test_config_ledger_equals_the_tensor_count_of_real_models(name: str, expected: int) -> None:
    config = json.loads((DATA / name).read_text())
    assert ledger_from_config(config).total.value == expected
