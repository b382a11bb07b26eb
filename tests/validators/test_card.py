"""The card validator on hostile front matter: absurd numbers are not claims, and nothing
overflows."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelreg.schemas.manifest import Manifest
from modelreg.validators.card import validate_card

MANIFEST = Manifest.model_validate(
    {
        "model_id": "org/model",
        "format": "gguf",
        "files": [{"path": "m.gguf", "bytes": 1, "sha256": "0" * 64}],
        "runtime": {"runtime": "llama.cpp"},
        "parameters": {"total": {"value": 100, "provenance": "tensors"}},
        "license": {"id": "mit"},
    }
)


@pytest.mark.parametrize(
    ("front", "heading"),
    [
        ('total_parameters: "1' + "0" * 400 + '"', "Model"),
        ('active_parameters: "-' + "9" * 30 + '"', "Model"),
        ('model_name: "Model-' + "9" * 400 + 'B"', "Model"),
        ("notes: none", "Model-" + "9" * 400 + "B"),
    ],
)
def test_absurd_claims_are_ignored_not_overflowing(
    tmp_path: Path, front: str, heading: str
) -> None:
    card = tmp_path / "README.md"
    card.write_text(f"---\nlicense: mit\n{front}\n---\n# {heading}\n")
    assert validate_card(card, MANIFEST).findings == []


def test_a_real_claim_is_still_checked(tmp_path: Path) -> None:
    card = tmp_path / "README.md"
    card.write_text("---\nlicense: mit\ntotal_parameters: 1,000\n---\n# Model\n")
    (finding,) = validate_card(card, MANIFEST).findings
    assert finding.field == "total_parameters" and finding.found == 1000
