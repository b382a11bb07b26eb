"""Search, the records page and run trends (``modelreg.api.browse``): what the dashboard's
pages and ``/api/v1/search`` answer from."""

from __future__ import annotations

from typing import Any

import pytest

from modelreg.errors import InvalidInput
from tests.helpers import add_synthetic, record_run, synthetic_sha256


def test_search_by_id_prefix_and_by_sha256(registry: Any) -> None:
    a = add_synthetic(registry, 1, model_id="org/a")
    b = add_synthetic(registry, 2, model_id="org/b")
    found = registry.search(a[:8])
    assert [m.record.record_id for m in found.matches] == [a]
    assert found.matches[0].matched == "record_id" and found.matches[0].file is None
    assert [m.record.record_id for m in registry.search(a[2:10]).matches] == [a]  # no r_
    sha = synthetic_sha256(2)  # record b's one file
    by_sha = registry.search(sha)
    assert [(m.record.record_id, m.matched, m.file) for m in by_sha.matches] == [
        (b, "sha256", "m2.gguf")
    ]
    assert [m.record.record_id for m in registry.search(sha.upper()).matches] == [b]
    # Every synthetic digest starts with zeros: a prefix matches both, newest first.
    assert [m.record.record_id for m in registry.search(sha[:8]).matches] == [b, a]
    assert registry.search("ffffffffff").matches == []
    with pytest.raises(InvalidInput, match="too short"):
        registry.search("r_1")
    with pytest.raises(InvalidInput, match="longer than"):
        registry.search("a" * 194)


def test_search_is_bounded_and_says_so(registry: Any) -> None:
    for i in range(1, 6):
        add_synthetic(registry, i, model_id="org/many")
    found = registry.search("00000000", limit=3)  # every synthetic sha256 starts so
    assert len(found.matches) == 3 and found.truncated
    assert not registry.search("00000000", limit=5).truncated


def test_browse_filters_and_verdicts(registry: Any) -> None:
    ok = add_synthetic(registry, 1, model_id="org/a")
    bad = add_synthetic(registry, 2, model_id="org/a")
    never = add_synthetic(registry, 3, model_id="org/a")
    other = add_synthetic(registry, 4, model_id="org/b")
    record_run(registry, ok)
    record_run(registry, bad, outcomes={"digest": "pass", "gguf-cpu-smoke": "fail"})
    registry.promote(ok, "cpu", why="first", actor="alice")
    registry.hold(never, "bad tokenizer", actor="alice")

    page = registry.browse(model="org/a")
    assert [i.record.record_id for i in page.records] == [never, bad, ok]  # newest first
    assert page.total == 3
    by_id = {i.record.record_id: i for i in page.records}
    assert by_id[ok].production_on == ["cpu"]
    assert [(d.target, d.now) for d in by_id[ok].deployability] == [("cpu", "deployable")]
    assert [(d.target, d.now) for d in by_id[bad].deployability] == [("cpu", "failing")]
    assert by_id[never].deployability == []  # no run anywhere

    failing = registry.browse(target="cpu", now="failing")
    assert [i.record.record_id for i in failing.records] == [bad]
    unverified = registry.browse(target="cpu", now="unverified")
    assert [i.record.record_id for i in unverified.records] == [other]
    held = registry.browse(target="cpu", now="held")
    assert [i.record.record_id for i in held.records] == [never]
    assert [i.record.record_id for i in registry.browse(state="held").records] == [never]
    assert registry.browse(format="safetensors").records == []

    paged = registry.browse(limit=2, offset=1)
    assert paged.total == 4 and [i.record.record_id for i in paged.records] == [never, bad]

    for bad_filter, message in (
        ({"state": "gone"}, "state"),
        ({"format": "onnx"}, "format"),
        ({"now": "failing"}, "needs `target`"),
        ({"target": "cpu", "now": "broken"}, "now"),
    ):
        with pytest.raises(InvalidInput, match=message):
            registry.browse(**bad_filter)


def test_trend_reads_what_each_local_run_measured(registry: Any) -> None:
    first = add_synthetic(registry, 1, model_id="org/a")
    second = add_synthetic(registry, 2, model_id="org/a")
    measured = {
        "gguf-cpu-smoke": {
            "resources": {
                "decode_tokens_per_s": 0.46,
                "ttft_ms_median": 812.5,
                "peak_rss_bytes": 600 << 20,
            }
        }
    }
    record_run(registry, first, evidence=measured)
    record_run(registry, second)  # measured nothing
    suite = {
        "gguf-cpu-smoke": {"suite_result": {"resources": {"decode_tokens_per_s": 17.0}}},
    }
    record_run(registry, second, evidence=suite)

    record = registry.trend(record=first)
    assert [(p.decode_tokens_per_s, p.ttft_ms, p.peak_rss_bytes) for p in record.points] == [
        (0.46, 812.5, 600 << 20)
    ]
    model = registry.trend(model="org/a")
    assert [(p.record_id, p.decode_tokens_per_s) for p in model.points] == [
        (first, 0.46),
        (second, None),
        (second, 17.0),
    ]
    assert all(p.passed for p in model.points)
    with pytest.raises(InvalidInput, match="a model or a record"):
        registry.trend()
