"""modelreg search: a record by id prefix or by any file's sha256 (what the dashboard's search
box and GET /api/v1/search answer)."""

from __future__ import annotations

import json
from typing import Any

import modelreg
from tests.helpers import add_synthetic, synthetic_sha256


def test_search_by_sha256_names_the_file_and_by_id_prefix(cli: Any) -> None:
    registry = modelreg.open()
    first, second = add_synthetic(registry, 1), add_synthetic(registry, 2)
    code, out, _ = cli("search", synthetic_sha256(2))
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2  # the header, one record
    assert second in lines[1] and "file m2.gguf" in lines[1] and "rules/alpha" in lines[1]

    code, out, _ = cli("search", first[:8], "--json")
    found = json.loads(out)
    assert code == 0 and [m["record"]["record_id"] for m in found["matches"]] == [first]
    assert found["matches"][0]["matched"] == "record_id"

    code, out, err = cli("search", "00000000", "--limit", "1")
    assert code == 0 and second in out and first not in out  # newest first
    assert err.strip() == "more records match: showing the newest 1 (--limit)"


def test_search_without_a_match_or_too_short(cli: Any) -> None:
    modelreg.open()
    code, out, err = cli("search", "ffffffffff")
    assert (code, out) == (1, "")
    assert err.strip() == (
        "no record id or file's sha256 starts with 'ffffffffff', and no model id holds it"
    )
    code, out, err = cli("search", "r_1")
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert "too short" in err


def test_search_by_a_part_of_a_model_name(cli: Any) -> None:
    """Issue 40 item 6: the on-call remembers "the chat model", not its record id."""
    registry = modelreg.open()
    chat = add_synthetic(registry, 1, model_id="Acme/Chat-7B")
    add_synthetic(registry, 2, model_id="acme/embedder")
    code, out, err = cli("search", "chat-7", "--json")
    found = json.loads(out)
    assert code == 0, err
    assert [(m["record"]["record_id"], m["matched"]) for m in found["matches"]] == [
        (chat, "model_id")
    ]
    code, out, _ = cli("search", "acme/")
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3 and all("model id" in line for line in lines[1:])
