"""Library messages name parameters (``errors.PARAMETERS``) and each caller words them."""

from __future__ import annotations

from modelreg.cli.main import FLAGS
from modelreg.errors import PARAMETERS, InvalidInput


def test_every_parameter_a_message_names_has_a_flag() -> None:
    assert set(FLAGS) == set(PARAMETERS)


def test_the_cli_says_flags_and_leaves_other_backticks_alone() -> None:
    exc = InvalidInput("`sha256` 'x' is not a sha256 (see `modelreg`)", "give `why`")
    assert exc.worded(FLAGS) == (
        "--expect-sha256 'x' is not a sha256 (see `modelreg`)",
        "give --why",
    )
    names = {p: p for p in PARAMETERS}
    assert exc.worded(names) == ("sha256 'x' is not a sha256 (see `modelreg`)", "give why")
