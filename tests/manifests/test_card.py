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
