"""A license id or SPDX expression is one line of plain characters: a value with a newline,
markup or a control character is a broken card, not an unknown license."""

from __future__ import annotations

import pytest

from modelreg.schemas.licenses import KNOWN_LICENSES, license_id_problem


@pytest.mark.parametrize(
    "value", ["apache-2.0", "llama3.1", "(MIT OR Apache-2.0)", "LicenseRef-acme_1", "GPL-2.0+"]
)
def test_license_ids_and_spdx_expressions_are_accepted(value: str) -> None:
    assert license_id_problem(value) is None


def test_every_known_license_is_accepted() -> None:
    assert [k for k in KNOWN_LICENSES if license_id_problem(k)] == []


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("mit |\n| injected | row |", "'mit |\\n| injected | row |'"),
        ("<script>alert(1)</script>", "'<script>alert(1)</script>'"),
        ("mit <!--", "'mit <!--'"),
        ("[mit](https://evil.example)", "'[mit](https://evil.example)'"),
        ("mit\x1b[8m", "'mit\\x1b[8m'"),
        ("x" * 101, "'" + "x" * 60 + "…'"),
    ],
)
def test_markup_newlines_and_control_characters_are_refused(value: str, shown: str) -> None:
    problem = license_id_problem(value)
    assert problem is not None and problem.startswith(f"license {shown} is not a license id")
    assert problem.isprintable()
