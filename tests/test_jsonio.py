"""JSON from outside: nesting is measured without recursion, so no input ends in a
RecursionError; every problem is one line naming the file."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.jsonio import loads_bounded, nesting_exceeds, parse_json, read_json_file
from modelreg.manifests.hf_config import read_json_object
from modelreg.manifests.safetensors import read_header
from modelreg.schemas.manifest import read_manifest_file

DEEP = "[" * 100_000 + "]" * 100_000


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


@pytest.mark.parametrize(
    ("text", "deep"),
    [
        (_nested(64), False),
        (_nested(65), True),
        ("[" * 64 + "]" * 64, False),
        ("[" * 65 + "]" * 65, True),
        ('["' + "[" * 1000 + '"]', False),  # brackets inside a string are text
        ('["\\"' + "[" * 1000 + '"]', False),  # after an escaped quote too
        ("[" * 100_000, True),  # truncated: the parser would still go deep
        ("[[]," * 10_000 + "[]" + "]" * 10_000, True),
        ("[" + "[[[]]]," * 10_000 + "[]]", False),  # wide, shallow
    ],
)
def test_nesting_is_measured_without_parsing(text: str, deep: bool) -> None:
    assert nesting_exceeds(text, 64) is deep
    assert nesting_exceeds(text.encode(), 64) is deep


@given(
    st.recursive(st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c))
)
def test_nesting_agrees_with_the_real_depth(value: object) -> None:
    def depth(v: object) -> int:
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        return 0

    text = json.dumps(value)
    for limit in (1, 2, 3, 5):
        assert nesting_exceeds(text, limit) is (depth(value) > limit)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (DEEP, "nested deeper than 64 levels"),
        ("{oops", "not valid JSON: Expecting property name"),
        ('{"x": NaN}', "not valid JSON: NaN is not a JSON number"),
        ("[Infinity]", "not valid JSON: Infinity is not a JSON number"),
        ("1" * 5000, "not valid JSON: Exceeds the limit"),
        (b"[\xff]", "not UTF-8"),
    ],
)
def test_bad_json_is_one_line_naming_the_origin(text: str | bytes, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        loads_bounded(text, origin="import line 2")
    assert str(caught.value).startswith("import line 2: ")
    assert "\n" not in str(caught.value)


def test_plain_json_parses() -> None:
    assert parse_json('{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}


def test_deep_manifest_for_diff_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "reference.json"
    path.write_text('{"model_id": ' + DEEP + "}")
    with pytest.raises(InvalidArtifact, match=r"reference.json: nested deeper than 64 levels"):
        read_manifest_file(path)


def test_manifest_file_problems_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidArtifact, match="manifest not found"):
        read_manifest_file(tmp_path / "missing.json")
    with pytest.raises(InvalidArtifact, match="is a directory, expected a manifest"):
        read_manifest_file(tmp_path)


def test_deep_config_json_is_an_invalid_artifact(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"text_config": ' + DEEP + "}")
    with pytest.raises(InvalidArtifact, match=r"config.json: nested deeper than 64 levels"):
        read_json_object(path)


def test_deep_safetensors_header_is_an_invalid_artifact_at_offset_8(tmp_path: Path) -> None:
    header = ('{"w": {"dtype": "F32", "shape": ' + DEEP + "}}").encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header)
    with pytest.raises(
        InvalidArtifact, match=r"header is nested deeper than 8 levels \(header, at offset 8\)"
    ):
        read_header(path)


def test_json_file_size_is_bounded_while_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_text("[" + "0," * 100 + "0]")
    with pytest.raises(InvalidArtifact, match="config larger than 50 bytes"):
        read_json_file(path, max_bytes=50, what="config")


@given(st.text(alphabet=st.sampled_from('[]{}",:0123456789.eE-+\\ntrufalsNIy \x00'), max_size=300))
def test_any_text_parses_or_is_one_value_error(text: str) -> None:
    try:
        parse_json(text, max_depth=3)
    except ValueError as exc:
        assert "\n" not in str(exc)
