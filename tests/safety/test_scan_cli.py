"""``modelreg scan``: exit 1 on a finding, 0 clean, 2 bad input; --json matches its schema;
--format sarif is a valid SARIF 2.1.0 log (the OASIS schema)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from modelreg.schemas.output import ScanOutput
from tests.safety import hostile

REPO = Path(__file__).resolve().parent.parent.parent
SARIF_SCHEMA = REPO / "tests" / "data" / "sarif" / "sarif-schema-2.1.0.json"
REAL = REPO / "tests" / "corpus" / "templates" / "real"


def _hostile_files(tmp_path: Path) -> list[Path]:
    template = tmp_path / "chat_template.jinja"
    template.write_text(hostile.HOSTILE_TEMPLATES[0][1])
    pickle_file = tmp_path / "model.pkl"
    pickle_file.write_bytes(hostile.system_pickle())
    card = tmp_path / "README.md"
    card.write_text("# Model\n\nSafe\u202e to use\n")
    return [template, pickle_file, card]


def test_real_templates_scan_clean(cli) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("scan", REAL)
    assert code == 0, (out, err)
    assert out.startswith("clean:")


def test_findings_exit_1_with_code_file_and_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = cli("scan", *_hostile_files(tmp_path))
    assert code == 1
    lines = out.splitlines()
    assert any(s.startswith("unsafe_template: ") and "(line 6: " in s for s in lines)
    assert any(s.startswith("unsafe_pickle: ") and "posix.system" in s for s in lines)
    assert any(s.startswith("hidden_text: ") and "U+202E" in s for s in lines)


def test_json_output_validates_against_its_schema(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = cli("scan", *_hostile_files(tmp_path), "--json")
    assert code == 1
    data = json.loads(out)
    jsonschema.validate(data, ScanOutput.model_json_schema())
    assert data["clean"] is False
    codes = {f["code"]: f for f in data["findings"]}
    assert set(codes) == {"unsafe_template", "unsafe_pickle", "hidden_text"}
    assert codes["hidden_text"]["holds"] is False and codes["unsafe_pickle"]["holds"] is True


def test_sarif_output_is_valid_sarif_2_1_0(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _ = cli("scan", *_hostile_files(tmp_path), "--format", "sarif")
    assert code == 1
    log = json.loads(out)
    jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text())).validate(log)
    results = log["runs"][0]["results"]
    template = next(r for r in results if r["ruleId"] == "unsafe_template")
    assert template["locations"][0]["physicalLocation"]["region"]["startLine"] == 6
    assert {r["level"] for r in results} == {"error", "warning"}


def test_sarif_schema_rejects_a_broken_log() -> None:
    validator = jsonschema.Draft4Validator(json.loads(SARIF_SCHEMA.read_text()))
    assert not validator.is_valid({"version": "2.1.0", "runs": [{"results": []}]})


def test_gguf_name_naming_another_model_is_an_identity_finding(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = _renamed_smollm2(tmp_path / "renamed.gguf", "Llama 3.1 8B Instruct")
    code, out, _ = cli("scan", path, "--model-id", "HuggingFaceTB/SmolLM2-135M-Instruct", "--json")
    assert code == 1
    messages = [f["message"] for f in json.loads(out)["findings"]]
    assert any("names the llama family" in m for m in messages), messages
    assert any("8B" in m for m in messages), messages


def test_bad_input_exits_2(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli("scan", tmp_path / "missing.gguf")
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
    code, _, err = cli("scan", REAL, "--format", "xml")
    assert code == 2


def _renamed_smollm2(path: Path, name: str) -> Path:
    import gguf

    from modelreg.bundled import smollm2_gguf

    reader = gguf.GGUFReader(smollm2_gguf())
    writer = gguf.GGUFWriter(path, arch=reader.fields["general.architecture"].contents())
    for f in reader.fields.values():
        if f.name in ("general.architecture", "general.name") or f.name.startswith("GGUF."):
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(f.name, f.contents(), vtype, sub_type=sub)
    writer.add_name(name)
    for t in reader.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in reader.tensors:
        writer.write_tensor_data(t.data)
    writer.close()
    return path


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def test_inspect_says_a_finding_that_holds_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Hidden characters hold nothing, and were stored but never shown: inspect (and show,
    from the same lines) says them."""
    from tests.helpers import write_gguf

    path = write_gguf(
        tmp_path / "m.gguf",
        {"token_embd.weight": (4, 8)},
        metadata={"general.name": "tiny \u202ereversed"},
    )
    code, out, err = cli("inspect", path, "--model-id", "acme/tiny")
    assert code == 0, err
    (line,) = [s for s in out.splitlines() if s.startswith("finding    hidden_text in m.gguf")]
    assert "U+202E" in line
