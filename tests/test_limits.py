"""One length limit per identifier, never above the column it is stored in, so SQLite and
PostgreSQL accept exactly the same values."""

from __future__ import annotations

import pytest

from modelreg import limits
from modelreg.errors import InvalidInput
from modelreg.limits import check_length
from modelreg.registry import tables

# limit -> every column that stores a value bounded by it
STORED_IN = {
    "MODEL_ID_MAX": [
        tables.ModelRow.model_id,
        tables.RecordRow.model_id,
        tables.PromotionRow.model_id,
        tables.EventRow.model_id,
    ],
    "RECORD_REF_MAX": [
        tables.RecordRow.id,
        tables.EventRow.record_id,
        tables.PromotionRow.record_id,
        tables.RecordStateRow.record_id,
    ],
    "TARGET_NAME_MAX": [
        tables.VerificationRow.target,
        tables.PromotionRow.target,
        tables.EventRow.target,
    ],
    "ACTOR_MAX": [
        tables.EventRow.actor,
        tables.PromotionRow.actor,
        tables.RecordStateRow.actor,
        tables.RecordRow.created_by,
    ],
    "HOST_MAX": [tables.VerificationRow.host],
    "SOURCE_PIN_MAX": [tables.RecordRow.source],
    "LICENSE_ID_MAX": [tables.RecordRow.license],
    "FILE_PATH_MAX": [tables.RecordFileRow.path],
}


@pytest.mark.parametrize("name", sorted(STORED_IN))
def test_limit_fits_every_column_it_guards(name: str) -> None:
    limit = getattr(limits, name)
    for column in STORED_IN[name]:
        length = column.property.columns[0].type.length
        assert length is not None and limit <= length, (name, column, length)


def test_model_id_limit_is_what_the_grammar_allows() -> None:
    from modelreg.schemas.manifest import is_model_id

    part = "a" * limits.MODEL_ID_PART_MAX
    assert is_model_id(f"{part}/{part}") and len(f"{part}/{part}") == limits.MODEL_ID_MAX
    assert not is_model_id(f"{part}a/{part}") and not is_model_id(f"{part}/{part}a")


def test_value_within_the_limit_is_returned() -> None:
    assert check_length("target name", "cpu-avx2", limits.TARGET_NAME_MAX) == "cpu-avx2"
    assert check_length("why", "x" * 5, 5) == "xxxxx"


def test_value_over_the_limit_is_one_escaped_line() -> None:
    with pytest.raises(InvalidInput) as caught:
        check_length("target name", "\x1b[31m" + "t" * 200 + "\n", limits.TARGET_NAME_MAX)
    message = str(caught.value)
    assert message.startswith("target name '\\x1b[31mttt")
    assert "is 206 characters long; at most 100 are allowed — shorten it" in message
    assert message.isprintable()


def test_docs_limits_lists_every_limit_with_its_value() -> None:
    """docs/limits.md's table is the limits module: every constant, with its value."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "limits.md").read_text()
    page = page.split("## modelreg/limits.py", 1)[1].split("\n## ", 1)[0]
    rows = dict(re.findall(r"^\| `([A-Z_]+)` \| ([0-9.]+) \|", page, re.MULTILINE))
    constants = {k: v for k, v in vars(limits).items() if k.isupper()}
    assert set(rows) == set(constants)
    for name, value in constants.items():
        assert float(rows[name]) == value, name


@pytest.mark.parametrize(
    ("path", "value", "needle"),
    [
        (("thresholds", "min_decode_tokens_per_s"), 1e9, "less than or equal to 1000000"),
        (("thresholds", "subsets"), {f"s{i}": 0.5 for i in range(101)}, "at most 100 items"),
        (("cases", 0, "expect", "reject"), ["x" * 2001], "at most 2000 characters"),
    ],
)
def test_a_suite_beyond_a_limit_is_refused_naming_the_field(
    path: tuple[object, ...], value: object, needle: str
) -> None:
    from modelreg.suites import parse_suite

    data: dict = {  # type: ignore[type-arg]
        "name": "s",
        "thresholds": {"min_pass_rate": 0.5},
        "cases": [{"id": "c", "prompt": "p", "expect": {"value": "Paris"}}],
    }
    block: object = data
    for key in path[:-1]:
        block = block[key]  # type: ignore[index]
    block[path[-1]] = value  # type: ignore[index]
    with pytest.raises(InvalidInput) as refused:
        parse_suite(data, "s.yaml")
    assert needle in str(refused.value) and str(path[-1]) in str(refused.value)


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("memory_gib", 2.0**21, "less than or equal to 1048576"),
        ("hosts", [f"h{i}" for i in range(1001)], "at most 1000 items"),
        ("neuron_cores", 1 << 20, "less than or equal to 1024"),
    ],
)
def test_a_target_beyond_a_limit_is_refused_naming_the_field(
    field: str, value: object, needle: str
) -> None:
    from modelreg.targets import check_shared_spec

    with pytest.raises(InvalidInput) as refused:
        check_shared_spec("edge", {"kind": "cpu", field: value}, "targets.yaml")
    assert needle in str(refused.value) and field in str(refused.value)
