"""``card render``: strings from the artifact, a card, a target file or a flag are escaped, so
a hostile license, name or file cannot add a row, raw HTML, a link or a comment."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from modelreg.manifests.card import VerifiedOn, render_card
from modelreg.manifests.hf import read_card_front_matter
from modelreg.schemas.manifest import Manifest
from modelreg.textsafe import for_terminal

markdown_it = pytest.importorskip("markdown_it")
RENDERER = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])

LICENSE = "mit | evil |\n| injected | row |<script>alert(1)</script><!-- hide"
SOURCE = "hf://org|x<!--/n`a|me@" + "a" * 40
PATH = "weights|<img src=x onerror=alert(1)>[l](https:evil.example).gguf"
PROVENANCE = "declared:https://evil.example <!-- | x |"


def _hostile_manifest() -> Manifest:
    return Manifest.model_validate(
        {
            "model_id": "org/model-7b",
            "source": SOURCE,
            "license": {"id": LICENSE, "source": "card:READ|ME.md\n# h"},
            "format": "gguf",
            "files": [{"path": PATH, "bytes": 1, "sha256": "0" * 64}],
            "parameters": {"effective": {"value": 5, "provenance": PROVENANCE}},
            "quantization": {
                "nominal_file_type": "Q4_K | x |",
                "tensor_types": {"Q4_K<b>|": {"tensors": 1, "params": 8, "bytes": 4}},
                "recipe": {"tool": "quant | <i>", "notes": "line\n| a | b |"},
            },
            "runtime": {"runtime": "llama.cpp"},
        }
    )


def _card() -> str:
    verified = [
        VerifiedOn(
            target="cpu|<u>t</u>",
            at=datetime(2026, 1, 1, tzinfo=UTC),
            host="host\n| x | y |",
            runtime={"llama.cpp": "b1 | <!--"},
        )
    ]
    return render_card(_hostile_manifest(), "r_0123456789ab", verified)


def _render() -> str:
    """The card body as a Markdown renderer shows it (the front matter is YAML, read apart)."""
    card = _card()
    assert card.startswith("---\n")
    return RENDERER.render(card.split("\n---\n", 1)[1])


def _tables(rendered: str) -> list[list[list[str]]]:
    """Each table's body rows, each row's cells as text."""
    return [
        [
            [html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", tbody, re.DOTALL)
        ]
        for tbody in re.findall(r"<tbody>(.*?)</tbody>", rendered, re.DOTALL)
    ]


def test_hostile_strings_add_no_row_html_link_or_comment() -> None:
    rendered = _render()
    assert "<a " not in rendered and "<img" not in rendered and "<script" not in rendered
    assert "<!--" not in rendered and "<u>" not in rendered and "<i>" not in rendered
    assert "<b>" not in rendered
    facts, parameters, tensor_types, files, verified = _tables(rendered)
    assert [len(t) for t in (facts, parameters, tensor_types, files, verified)] == [5, 4, 1, 1, 1]
    assert all(len(row) == 2 for row in facts)
    assert all(len(row) == 3 for row in parameters + files)
    assert all(len(row) == 4 for row in tensor_types + verified)


def test_hostile_strings_render_as_themselves() -> None:
    facts, parameters, tensor_types, files, verified = _tables(_render())
    cells = dict(facts)
    assert cells["license"] == f"{for_terminal(LICENSE)} (from card:READ|ME.md\\n# h)"
    assert cells["source pin"] == SOURCE
    assert files[0][0] == PATH
    assert parameters[3][2] == PROVENANCE
    assert tensor_types[0][0] == "Q4_K<b>|"
    assert verified[0][0] == "cpu|<u>t</u>" and verified[0][2] == "host\\n| x | y |"


def test_front_matter_holds_the_hostile_license_as_one_value(tmp_path: Path) -> None:
    path = tmp_path / "README.md"
    path.write_text(_card())
    meta, _ = read_card_front_matter(path)
    assert meta["license"] == LICENSE.strip().lower()
    assert meta["effective_parameters_condition"] == PROVENANCE.removeprefix("declared:")
    assert set(meta) == {
        "license",
        "model_name",
        "effective_parameters",
        "effective_parameters_condition",
    }


def test_headings_are_the_renderers_own() -> None:
    rendered = _render()
    assert re.findall(r"<h(\d)>", rendered) == ["1", "2", "3", "3", "3", "3"]
    assert "<h1>org/model-7b</h1>" in rendered


# ------------------------------------------------------------------ claims read in Korean


@pytest.mark.parametrize(
    ("numeral", "value"),
    [
        ("3만 2천", 32_000),
        ("3만 2768", 32_768),
        ("260억", 26_000_000_000),
        ("3억 6천만", 360_000_000),
        ("1억 3500만", 135_000_000),
        ("1.7억", 170_000_000),
        ("3백만", 3_000_000),
        ("1만 1만", None),  # units out of order: not a numeral
        ("2천 3만", 20_030_000),  # 2,003 × 10^4
        ("1천 2천", None),
    ],
)
def test_korean_numerals_are_read(numeral: str, value: int | None) -> None:
    from modelreg.manifests.card_korean import korean_number

    assert korean_number(numeral) == value


@pytest.mark.parametrize(
    ("line", "kind", "value"),
    [
        ("양자화: Q4_K_M (가중치당 4.5비트)", "quantization", "Q4_K_M"),
        ("컨텍스트 길이: 32K", "context_length", 32_768),
        ("컨텍스트 길이: 3만 2천 토큰", "context_length", 32_000),
        ("파라미터 수: 360M", "parameters", 360_000_000),
        ("파라미터 수: 3억 6천만 개", "parameters", 360_000_000),
        ("- **활성 파라미터:** 3.3B", "active_parameters", 3_300_000_000),
        ("라이선스: MIT", "license", "mit"),
        ("기본 모델: Qwen/Qwen3-8B", "base_model", "Qwen/Qwen3-8B"),
        ("| 항목 | 값 |\n|---|---|\n| 컨텍스트 길이 | 32,768 |", "context_length", 32_768),
        ("텐서 병렬 차수: 2", "tp_degree", 2),
        ("가중치당 평균 4.5비트입니다.", "bits_per_weight", 4.5),
        ("32K 토큰 컨텍스트를 지원합니다.", "context_length", 32_768),
        ("컨텍스트 길이는 최대 3만 2768 토큰입니다.", "context_length", 32_768),
        ("3.3B 활성 파라미터를 씁니다.", "active_parameters", 3_300_000_000),
        ("이 모델은 MIT 라이선스로 배포됩니다.", "license", "mit"),
        ("라이선스는 Apache 2.0입니다.", "license", "apache-2.0"),
        ("Qwen/Qwen3-8B를 양자화한 모델입니다.", "base_model", "Qwen/Qwen3-8B"),
        # seed 004 (004_cffc23c46f3527f1.txt, line 7), as written
        (
            "2013년 하드웨어에서 260억 개의 파라미터를 가진 모델을 실행하는 것은, 구형 "
            "시스템에서의 로컬 LLM 추론에 있어 원시 연산 명령어가 아닌 메모리 대역폭이 주요 "
            "병목 현상임을 보여줍니다.",
            "parameters",
            26_000_000_000,
        ),
        # seed 000 (000_890c0213337b5ccf.txt, line 21)
        ("FP8은 8비트이므로 int8과 크기가 같아 도움이 되지 않습니다.", "bits", 8.0),
        # seed 002 (002_7f0779e26694df69.txt, line 27) writes the English unit: "…4bit라면…"
        ("weight가 4bit라면 약 4GB입니다.", "bits", 4.0),
    ],
)
def test_korean_claims_are_read_as_the_english_ones(line: str, kind: str, value: object) -> None:
    from modelreg.manifests.card_claims import read_claims

    claims = [c for c in read_claims("# 제목\n\n" + line + "\n") if c.kind == kind]
    assert [(c.value, c.line) for c in claims] == [(value, 3 + line.count("\n"))]


@pytest.mark.parametrize(
    "line",
    [
        "컨텍스트 길이를 8192로 줄였습니다.",  # a setting (object particle), not a claim
        "135M, 360M, 17억 파라미터의 세 가지 크기가 있습니다.",  # a family, not this model
        "NxD Inference 양자화는 INT8과 FP8만 지원합니다.",  # 만 is "only" here, not 10,000
        "가중치당 4.5비트",  # per weight: not also a nominal 4.5-bit claim
    ],
)
def test_korean_prose_about_other_things_is_not_a_claim(line: str) -> None:
    from modelreg.manifests.card_claims import read_claims

    kinds = [c.kind for c in read_claims("# 제목\n\n" + line + "\n")]
    assert kinds in ([], ["bits_per_weight"]), kinds
    if "가중치당" not in line:
        assert kinds == []


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (
            "This model is a quantization of the base model, with the tensors kept as they are. "
            * 2,
            "en",
        ),
        ("이 모델은 SmolLM2를 양자화한 GGUF 파일입니다. 컨텍스트 길이는 8192 토큰입니다.", "ko"),
        ("このモデルは llama.cpp で量子化されています。コンテキスト長は 32K トークンです。", "ja"),
        (
            "该模型使用 Q4_K_M 量化。上下文长度为 32K。参数数量为 3.6 亿。许可证为 MIT 许可证。",
            "zh",
        ),
        (
            "Ce modèle est quantifié en Q4_K_M. La longueur du contexte est de 32K et il est "
            "sous licence MIT.",
            "fr",
        ),
        ("# Title\n\n| Q4_K_M | 4.5 |\n", "und"),
    ],
)
def test_the_card_language_is_told(body: str, code: str) -> None:
    from modelreg.manifests.card_language import card_language

    language = card_language(body)
    assert language.code == code, language
    assert language.readable is (code in ("en", "ko", "und"))
