"""YAML from outside is plain data: the loader refuses anchors, aliases, deep nesting, keys that
are not strings and non-finite numbers, wherever they sit — with one line naming the place."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.manifests.hf import read_card_front_matter
from modelreg.manifests.recipe import load_recipe
from modelreg.safeyaml import load_yaml, read_yaml_file


def test_plain_data_loads_as_safe_load_would() -> None:
    text = (
        "license: apache-2.0\nbase_model:\n  - org/base\ntags: [gguf, 'q4']\n"
        "total_parameters: 134515008\nratio: 0.5\nwhen: 2024-01-01\nbad_date: 2024-13-45\n"
        "empty:\n"
    )
    assert load_yaml(text, origin="card") == {
        "license": "apache-2.0",
        "base_model": ["org/base"],
        "tags": ["gguf", "q4"],
        "total_parameters": 134515008,
        "ratio": 0.5,
        "when": "2024-01-01",  # dates stay text: plain data is JSON-like
        "bad_date": "2024-13-45",
        "empty": None,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("license: mit\nnotes: x\ny: &a [1, 2]\n", "YAML anchor &a is not accepted.* line 3"),
        ("a: 1\nb: *a\n", "YAML alias \\*a is not accepted.* line 2"),
        ("a: {x: 1}\nb:\n  <<: {y: 2}\n", "merge key '<<' is not accepted.* line 3"),
        ("1: one\n", "mapping key '1' is not a string"),
        ("yes: a\n", "mapping key 'yes' is not a string"),
        ("? [a, b]\n: c\n", "a mapping key is not a string"),
        ("license: mit\nbase: x\nlicense: other\n", "mapping key 'license' appears twice.* line 3"),
        ("memory_gib: .inf\n", "'.inf' is not a finite number"),
        ("x: .NaN\n", "'.NaN' is not a finite number"),
        ("x: 9223372036854775808\n", "does not fit in 64 bits"),
        ("x: " + "9" * 5000 + "\n", "does not fit in 64 bits"),
        ("x: " + "[" * 20000 + "]" * 20000 + "\n", "nested deeper than 32 levels"),
        ("".join("  " * i + f"k{i}:\n" for i in range(50)), "nested deeper than 32 levels"),
        ("a: !!python/object:os.system x\n", "could not determine a constructor"),
        ("a: !!set {x, y}\n", "YAML type !!set is not plain data"),
        ("a: !!binary aGk=\n", "YAML type !!binary is not plain data"),
        ("a: 1\n---\nb: 2\n", "expected a single document"),
        ("license: [unclosed\n", "not valid YAML: .*line 2"),
        ("a: \x1b[31m\n", "unacceptable character #x001b"),
    ],
)
def test_loader_refuses_what_plain_data_never_needs(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as caught:
        load_yaml(text, origin="in.yaml")
    assert str(caught.value).startswith("in.yaml: ")
    assert "\n" not in str(caught.value)


def test_alias_bomb_is_refused_before_it_expands() -> None:
    bomb = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        bomb.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join([f"*{chr(96 + i)}"] * 9) + "]")
    with pytest.raises(InvalidInput, match="anchor &a .*line 1,"):
        load_yaml("\n".join(bomb), origin="bomb")


def _card(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "README.md"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("leading", ["", "\n\n", "  \n\t\n", "\r\n"])
def test_card_anchor_is_refused_whatever_precedes_the_front_matter(
    tmp_path: Path, leading: str
) -> None:
    card = _card(tmp_path, f"{leading}---\nlicense: mit\nnotes: &n x\n---\n# Card\n")
    line = leading.count("\n") + 3
    with pytest.raises(InvalidInput, match=rf"front matter: YAML anchor &n .*line {line},"):
        read_card_front_matter(card)


def test_card_front_matter_after_blank_lines_is_read(tmp_path: Path) -> None:
    card = _card(tmp_path, "\n\n---\nlicense: mit\nbase_model: org/base\n---\n# Title\n")
    assert read_card_front_matter(card) == (
        {"license": "mit", "base_model": "org/base"},
        "# Title\n",
    )


def test_card_without_front_matter_has_no_metadata(tmp_path: Path) -> None:
    card = _card(tmp_path, "# Title\n\n---\nnot: &front matter\n---\n")
    assert read_card_front_matter(card) == ({}, "# Title\n\n---\nnot: &front matter\n---\n")


def test_card_front_matter_that_is_not_a_mapping_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="front matter is not a YAML mapping"):
        read_card_front_matter(_card(tmp_path, "---\n- a\n- b\n---\n"))


def test_card_with_a_million_newlines_is_read_in_linear_time(tmp_path: Path) -> None:
    # huggingface_hub's own front-matter pattern backtracks quadratically on this.
    card = _card(tmp_path, "---\n" + "\n" * 1_000_000)
    assert read_card_front_matter(card)[0] == {}


def test_recipe_anchor_after_leading_lines_is_refused(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("# quantizer settings\ntool: llama-quantize\nimatrix: &m data.txt\n")
    with pytest.raises(InvalidInput, match=r"recipe.yaml: YAML anchor &m .*line 3"):
        load_recipe(recipe)


def test_yaml_file_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(InvalidArtifact, match="is a directory, expected a recipe"):
        load_recipe(tmp_path)


def test_yaml_file_that_is_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "targets.yaml"
    os.mkfifo(fifo)
    with pytest.raises(InvalidArtifact, match="is not a regular file"):
        read_yaml_file(fifo, max_bytes=100, what="targets file")


def test_yaml_file_size_and_encoding_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("a: " + "x" * 200)
    with pytest.raises(InvalidArtifact, match="targets file larger than 100 bytes"):
        read_yaml_file(path, max_bytes=100, what="targets file")
    path.write_bytes(b"a: \xff\n")
    with pytest.raises(InvalidArtifact, match="not UTF-8 text"):
        read_yaml_file(path, max_bytes=100, what="targets file")
    with pytest.raises(InvalidArtifact, match="targets file not found"):
        read_yaml_file(tmp_path / "missing.yaml", max_bytes=100, what="targets file")


@given(
    st.text(
        alphabet=st.sampled_from("[]{}&*!|>-:?,'\"#%@`\n\t 0123456789.eE+aoyn~<<"), max_size=200
    )
)
def test_any_text_loads_or_is_one_invalid_input_line(text: str) -> None:
    try:
        load_yaml(text, origin="fuzz.yaml", max_depth=4)
    except InvalidInput as exc:
        assert str(exc).startswith("fuzz.yaml: ") and "\n" not in str(exc)
