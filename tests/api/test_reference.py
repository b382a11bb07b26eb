"""docs/api.md is the public Python API as the code has it: generated from the signatures and
docstrings (``make api-docs``), stale means failing, and no public method goes undocumented."""

from __future__ import annotations

from pathlib import Path

from modelreg.api import reference

PAGE = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_the_checked_in_page_is_what_the_code_renders() -> None:
    assert PAGE.read_text() == reference.render(), "docs/api.md is stale: run `make api-docs`"


def test_every_public_method_has_a_docstring() -> None:
    assert reference.undocumented() == []


def test_the_page_names_every_part_and_hides_private_parameters() -> None:
    text = reference.render()
    for method in ("add", "verify", "promote", "rollback_plan", "search", "browse", "close"):
        assert f"#### `{method}(" in text, method
    assert "prestarted: RuntimeChild | None" in text  # documented, not private
    assert "### `ManifestOptions`" in text and "- `model_id: str | None`" in text
    assert "| `NoRollbackCandidate` | `no_rollback_candidate` | 1 |" in text
