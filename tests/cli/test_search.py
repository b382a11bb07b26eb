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
    assert err.strip() == "no record id starts with 'ffffffffff' and no file's sha256 does"
    code, out, err = cli("search", "r_1")
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert "too short" in err
