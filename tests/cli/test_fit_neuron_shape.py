"""``modelreg fit`` on an inf2 target judges what the bundle was compiled for: a context or
concurrency beyond the compiled shape is "not compiled for this" (exit 1, with what to
recompile), and the KV cache per NeuronCore is a line of its own, sized from that shape."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO

BUNDLE = REPO / "manifests" / "gemma-4-26b-a4b-inf2-xlarge.json"
# seq_len 512, batch 1, TP 2, bf16: 25 sliding layers × 4 KV heads × 512 + 5 global × 1 × 1024.
KV_PER_RANK = 57_671_680


def _fit(cli: Any, *args: object, manifest: Path = BUNDLE) -> tuple[int, dict[str, Any]]:
    code, out, err = cli("fit", manifest, "--target", "inf2.xlarge", *args, "--json")
    assert "Traceback" not in err
    return code, json.loads(out)


def _line(report: dict[str, Any], key: str) -> dict[str, Any]:
    (line,) = [line for line in report["lines"] if line["key"] == key]
    return line


def test_the_issues_command_is_not_compiled_for_this(cli: Any) -> None:
    code, out, _ = cli(
        "fit", BUNDLE, "--target", "inf2.xlarge", "--context", "100000", "--concurrency", "4"
    )
    assert code == 1
    assert "verdict: not compiled for this — compiled for seq_len 512 (buckets 128), asked " in out
    assert "100000 tokens: recompile with seq_len ≥ 100000" in out
    assert "compiled for batch_size 1, asked 4 sequences: recompile with batch_size ≥ 4" in out
    assert "KV cache per rank" in out and f"{KV_PER_RANK:,}" in out


def test_without_options_the_compiled_shape_is_served_and_fits(cli: Any) -> None:
    code, out, _ = cli("fit", BUNDLE, "--target", "inf2.xlarge")
    assert code == 0 and "verdict: fits" in out
    assert "compiled for seq_len 512 (buckets 128), batch_size 1, TP 2, KV bf16" in out


@pytest.mark.parametrize(
    ("args", "code", "verdict", "reason"),
    [
        (("--context", "512"), 0, "fits", None),
        (("--context", "513"), 1, "not compiled for this", "recompile with seq_len ≥ 513"),
        (("--concurrency", "2"), 1, "not compiled for this", "recompile with batch_size ≥ 2"),
    ],
)
def test_the_compiled_shape_is_the_bound(
    cli: Any, args: tuple[str, ...], code: int, verdict: str, reason: str | None
) -> None:
    got, report = _fit(cli, *args)
    assert (got, report["verdict"], report["fits"]) == (code, verdict, code == 0)
    if reason is not None:
        assert any(reason in r for r in report["reasons"]), report["reasons"]


def test_an_unknown_seq_len_asked_for_is_unknown(cli: Any, tmp_path: Path) -> None:
    data = json.loads(BUNDLE.read_text())
    data["neuron"]["seq_len"] = None
    data["neuron"]["context_buckets"] = []
    manifest = tmp_path / "no-seq-len.json"
    manifest.write_text(json.dumps(data))
    code, report = _fit(cli, "--context", "256", manifest=manifest)
    assert code == 1 and report["verdict"] == "unknown" and report["fits"] is None
    assert report["reasons"][0] == (
        "seq_len and context buckets unknown: cannot tell whether the bundle serves 256 tokens "
        "(record seq_len)"
    )
    assert report["detail"]["request"]["compiled_for"] is None
    assert _line(report, "kv_cache")["sizes"]["bytes"] is None


def test_json_carries_the_compiled_shape_and_the_kv_line(cli: Any) -> None:
    code, report = _fit(cli, "--context", "100000", "--concurrency", "4")
    assert code == 1 and report["verdict"] == "not compiled for this"
    detail = report["detail"]
    assert detail["compiled_shape"] == {
        "tp_degree": 2,
        "batch_size": 1,
        "seq_len": 512,
        "context_buckets": [128],
        "kv_dtype": "bf16",
        "max_context": 512,
    }
    assert detail["request"] == {"context": 100000, "sequences": 4, "compiled_for": False}
    kv = _line(report, "kv_cache")
    assert kv["name"] == "KV cache per rank" and kv["sizes"]["bytes"] == KV_PER_RANK
    assert detail["kv_cache"]["tokens"] == 512 and detail["kv_cache"]["sequences"] == 1
    assert detail["kv_cache"]["per_rank"]["bytes"] == KV_PER_RANK
    total = _line(report, "per_rank_total")["sizes"]["bytes"]
    weights = _line(report, "per_rank")["sizes"]["bytes"]
    assert total == weights + KV_PER_RANK + _line(report, "reserve")["sizes"]["bytes"]
    assert total <= _line(report, "core_budget")["sizes"]["bytes"]
    assert all(layout["kv_cache_per_rank"]["bytes"] == KV_PER_RANK for layout in detail["layouts"])


def test_a_target_serving_more_than_was_compiled_does_not_take_it(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    targets = tmp_path / "targets.yaml"
    targets.write_text(
        "targets:\n"
        "  inf2-long:\n"
        "    kind: neuron\n"
        "    neuron_cores: 2\n"
        "    memory_gib: 16\n"
        "    serving: {context: 4096, parallel: 1}\n"
    )
    assert cli("targets", "apply", targets)[0] == 0
    code, out, _ = cli("fit", BUNDLE, "--target", "inf2-long", "--json")
    report = json.loads(out)
    assert code == 1 and report["verdict"] == "not compiled for this"
    assert "recompile with seq_len ≥ 4096" in report["reasons"][0]
    # The seed's own target serves what was compiled: 512 tokens, one sequence.
    assert cli("targets", "apply", REPO / "manifests" / "targets.yaml")[0] == 0
    code, out, _ = cli("fit", BUNDLE, "--target", "inf2-xlarge-gemma4", "--json")
    assert code == 0 and json.loads(out)["detail"]["request"]["context"] == 512
