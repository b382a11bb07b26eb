from __future__ import annotations

import pytest

from modelreg.validators.answers import classify_answer


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (" Paris.\n\nThe United States has", "pass"),
        ("The capital of France is Paris.", "pass"),
        (" the capital of the country of France.", "wrong_answer"),
        ("L'Étoile, la Cité, la Nation, la Gé", "wrong_answer"),
        ("", "degenerate"),
        ("                                                   ", "degenerate"),
        ("\n\nterterterDDDCterter(", "degenerate"),
        ("\n\n11.\n''1.\n'11''", "degenerate"),
        ("the the the the the", "degenerate"),
        ("abababababababab", "degenerate"),
    ],
)
def test_answer_classification(output: str, expected: str) -> None:
    assert classify_answer(output, "Paris") == expected
