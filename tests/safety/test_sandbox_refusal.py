"""A runtime's sandbox refusal of a chat template at verify is ``unsafe_template``, not a
crash: llama-cpp-python renders the hostile template for real and jinja2's sandbox raises."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from modelreg import host
from modelreg.schemas.suite import Classification
from modelreg.schemas.verification import Outcome
from modelreg.suites import default_suite
from modelreg.validators.child import ChildRun
from modelreg.validators.llama_child import CHILD_ARGV
from modelreg.validators.smoke import judge_run
from tests.safety import hostile


@pytest.mark.slow  # a real llama.cpp child renders the template
def test_llama_cpp_sandbox_refusal_is_classified_unsafe_template(tmp_path: Path) -> None:
    model = hostile.hostile_template_gguf(
        tmp_path / "ungated.gguf", hostile.hostile_template("joiner-globals-os-system")
    )
    request = {
        "model_path": str(model),
        "prompts": [{"id": "paris", "prompt": "What is the capital of France?", "chat": True}],
        "n_ctx": 256,
        "n_threads": 2,
        "max_tokens": 4,
        "seed": 0,
        "host_flags": sorted(host.cpu_flags()),
        "load": True,
    }
    done = subprocess.run(
        CHILD_ARGV, input=json.dumps(request), capture_output=True, text=True, timeout=600
    )
    response = json.loads(done.stdout.strip().splitlines()[-1])
    assert response["status"] == "unsafe_template", response
    assert "unsafe" in response["message"].lower() or "access" in response["message"].lower()
    result = judge_run(
        "smoke",
        datetime.now(UTC),
        ChildRun("ok", response, 0, None, 0.0, ""),
        {},
        "llama.cpp",
        default_suite(),
    )
    assert result.outcome is Outcome.FAIL
    assert result.classification == Classification.UNSAFE_TEMPLATE
    assert result.summary.startswith("llama.cpp refused to render the chat template")
