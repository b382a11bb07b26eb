"""The deployed unit: target fields that declare it (validated, one line naming target and
field), the fingerprint entries ``deployed_unit`` gives, the checks a serving target needs, and
reading a runtime's build from its own output."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from modelreg.deployed_unit import deployed_unit, serves_own_runtime
from modelreg.errors import InvalidInput
from modelreg.targets import all_targets, targets_in_file
from modelreg.validators.launch import (
    check_build_flags,
    cmake_cache_flags,
    fill_placeholders,
    forbidden_in,
    runtime_facts,
)
from modelreg.validators.registry import required_checks

DIGEST = "sha256:" + "ab" * 32
AVX1_TARGETS = f"""targets:
  xeon-avx1:
    hosts: ['{socket.gethostname()}']
    cpu_flags: [sse, sse2, pni, ssse3, sse4_1, sse4_2, popcnt, aes, pclmulqdq, avx, f16c]
    launch: [/opt/ik_llama.cpp/build/bin/llama-server, -m, '{{model}}', --port, '{{port}}',
             -t, 20, --host, 127.0.0.1]
    forbidden_flags: [--run-time-repack, -rtr]
    required_build_flags: [GGML_USE_IQK_MULMAT=OFF]
  container:
    kind: neuron
    neuron_cores: 2
    image: xbill9/gemma4-optb-26b@{DIGEST}
    endpoint: https://llm.example.com:8443/v1/
    token_env: LLM_API_TOKEN
    require_identity: false
  plain: {{}}
"""


def _targets(tmp_path: Path, text: str) -> Path:
    spec = tmp_path / "targets.yaml"
    spec.write_text(text)
    return spec


def test_targets_declare_the_deployed_unit(tmp_path: Path) -> None:
    targets = targets_in_file(_targets(tmp_path, AVX1_TARGETS))
    xeon, container = targets["xeon-avx1"], targets["container"]
    assert xeon.launch[:3] == ("/opt/ik_llama.cpp/build/bin/llama-server", "-m", "{model}")
    assert xeon.launch[6] == "20"  # a YAML number becomes an argument
    assert xeon.forbidden_flags == ("--run-time-repack", "-rtr")
    assert xeon.required_build_flags == ("GGML_USE_IQK_MULMAT=OFF",)
    assert xeon.endpoint is None and xeon.require_identity
    assert container.endpoint == "https://llm.example.com:8443"  # /v1/ is verify's to add
    assert container.token_env == "LLM_API_TOKEN" and not container.require_identity
    assert container.image == f"xbill9/gemma4-optb-26b@{DIGEST}"
    assert serves_own_runtime(xeon) and serves_own_runtime(container)
    assert not serves_own_runtime(targets["plain"])


def test_deployed_unit_names_exactly_what_makes_evidence_stale(tmp_path: Path) -> None:
    targets = targets_in_file(_targets(tmp_path, AVX1_TARGETS))
    assert deployed_unit(targets["xeon-avx1"]) == {
        "launch": "/opt/ik_llama.cpp/build/bin/llama-server -m '{model}' --port '{port}' -t 20 "
        "--host 127.0.0.1",
        "forbidden flags": "--run-time-repack -rtr",
        "required build flags": "GGML_USE_IQK_MULMAT=OFF",
    }
    assert deployed_unit(targets["container"]) == {
        "image": f"xbill9/gemma4-optb-26b@{DIGEST}",
        "endpoint": "https://llm.example.com:8443",
        "require identity": "false",
    }
    # A target that declares none keeps the fingerprint it had: no evidence goes stale.
    assert deployed_unit(targets["plain"]) == {}
    assert deployed_unit(all_targets()["cpu"]) == {}
    # A new image digest is a different unit.
    other = AVX1_TARGETS.replace(DIGEST, "sha256:" + "cd" * 32)
    changed = targets_in_file(_targets(tmp_path, other))["container"]
    assert deployed_unit(changed)["image"] != deployed_unit(targets["container"])["image"]


BAD_FIELDS = [
    ("endpoint: ftp://llm.example.com", "endpoint", "is not an http:// or https:// URL"),
    ("endpoint: 'http://ops:hunter2@llm:8080'", "endpoint", "credentials inside the URL"),
    ("endpoint: 'https://llm/v1?api_key=sk-123'", "endpoint", "credentials inside the URL"),
    ("endpoint: 'http://llm:8080/?stream=1'", "endpoint", "query or fragment"),
    ("endpoint: 'http://:8080'", "endpoint", "has no host"),
    ("endpoint: 'http://llm:99999'", "endpoint", "is not a URL"),
    ("launch: 'llama-server -m {model}'", "launch", "valid list"),
    ("launch: []", "launch", "is empty"),
    ("launch: [llama-server, -m, '{model}']", "launch", "no {port} placeholder"),
    ("launch: [llama-server, '{model}', '{port}', '{host}']", "launch", "unknown placeholder"),
    ("launch: [llama-server, '{model', '{port}']", "launch", "malformed placeholder"),
    ("launch: [llama-server, '{model!r}', '{port}']", "launch", "malformed placeholder"),
    ("launch: ['{model}', '{port}']", "launch", "cannot be a placeholder"),
    ("launch: [srv, '{model}', '{port}', '{image}']", "launch", "unknown placeholder {image}"),
    ("image: ghcr.io/org/server:latest", "image", "is not pinned (tag 'latest'"),
    ("image: ghcr.io/org/server", "image", "is not pinned (no tag or digest"),
    ("image: 'ghcr.io/org/server@sha256:abc'", "image", "not sha256 and 64 lowercase hex"),
    ("image: 'ghcr.io/Org/Server'", "image", "is not an image reference"),
    ("token_env: LLM_TOKEN", "token_env", "applies to an endpoint"),
    ("endpoint: http://llm\n    token_env: 'sk-abc 123'", "token_env", "not an environment"),
    ("forbidden_flags: [--run-time-repack]", "forbidden_flags", "applies to a launch"),
    ("required_build_flags: [X=1]", "required_build_flags", "applies to a launch"),
    ("require_identity: false", "require_identity", "applies to an endpoint or a launch"),
    (
        "launch: [srv, '{model}', '{port}']\n    forbidden_flags: [run-time-repack]",
        "forbidden_flags",
        "is not a command-line flag",
    ),
    (
        "launch: [srv, '{model}', '{port}']\n    required_build_flags: ['IQK MULMAT']",
        "required_build_flags",
        "is not NAME or NAME=VALUE",
    ),
    (
        "launch: [srv, '{model}', '{port}']\n    endpoint: http://llm:8080",
        "endpoint",
        "not both",
    ),
]


@pytest.mark.parametrize(("field", "where", "message"), BAD_FIELDS)
def test_bad_deployed_unit_field_is_one_line_naming_target_and_field(
    tmp_path: Path, field: str, where: str, message: str
) -> None:
    spec = _targets(tmp_path, f"targets:\n  box:\n    {field}\n")
    with pytest.raises(InvalidInput) as raised:
        targets_in_file(spec)
    text = str(raised.value)
    assert f"targets.box.{where}:" in text and message in text, text
    assert "\n" not in text
    assert "hunter2" not in text and "sk-123" not in text


def test_cli_refuses_a_tag_with_exit_2_and_shows_the_pinned_form(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _targets(tmp_path, "targets:\n  box:\n    image: ghcr.io/org/server:v1\n")
    monkeypatch.setenv("MODELREG_TARGETS", str(spec))
    code, out, err = cli("targets", "apply")
    assert code == 2 and out == ""
    assert err.count("\n") == 1
    assert "targets.box.image" in err and "ghcr.io/org/server@sha256:<64 hex>" in err


def test_cli_lists_the_deployed_unit_of_each_target(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    monkeypatch.setenv("MODELREG_TARGETS", str(_targets(tmp_path, AVX1_TARGETS)))
    assert cli("targets", "apply")[0] == 0
    code, out, _ = cli("targets")
    assert code == 0
    assert "xeon-avx1  unit: launch /opt/ik_llama.cpp/build/bin/llama-server" in out
    assert "forbidden flags --run-time-repack -rtr" in out
    code, out, _ = cli("targets", "--json")
    listed = {t["name"]: t for t in json.loads(out)["targets"]}
    assert listed["container"]["unit"]["image"] == f"xbill9/gemma4-optb-26b@{DIGEST}"
    assert listed["plain"]["unit"] == {}


def test_a_serving_target_is_judged_through_its_own_runtime(tmp_path: Path) -> None:
    targets = targets_in_file(_targets(tmp_path, AVX1_TARGETS))
    assert required_checks("gguf", targets["plain"]) == (
        "digest",
        "host-compat",
        "gguf-cpu-smoke",
    )
    assert required_checks("gguf", targets["xeon-avx1"]) == (
        "digest",
        "host-compat",
        "endpoint-smoke",
    )
    assert required_checks("neuron", targets["container"]) == (
        "digest",
        "host-compat",
        "embed-scale",
        "endpoint-smoke",
    )


def test_placeholders_are_filled_and_forbidden_flags_found() -> None:
    argv = fill_placeholders(
        ["srv", "-m", "{model}", "--port={port}", "{{literal}}"], {"model": "/m.gguf", "port": "9"}
    )
    assert argv == ["srv", "-m", "/m.gguf", "--port=9", "{literal}"]
    forbidden = ["--run-time-repack", "-rtr"]
    assert forbidden_in(["srv", "-rtr", "--run-time-repack=1"], forbidden) == [
        "-rtr",
        "--run-time-repack",
    ]
    assert forbidden_in(["srv", "--run-time-repacked", "-rtrx"], forbidden) == []


# Lines in the formats the runtimes print (mainline llama-server's common.cpp and server.cpp,
# ik_llama.cpp's LOG_INFO "build info" / "system info"), and llama-cpp-python's system info.
MAINLINE_LOG = [
    "build: 6000 (a1b2c3d4) with cc (Ubuntu 13.2.0-23ubuntu4) 13.2.0 for x86_64-linux-gnu",
    "system_info: n_threads = 20 (n_threads_batch = 20) / 40 | CPU : SSE3 = 1 | SSSE3 = 1 | "
    "AVX = 1 | AVX2 = 0 | F16C = 1 | FMA = 0 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 |",
]
IK_LOG = [
    'INFO [                    main] build info | tid="1402" timestamp=1735 build=3680 '
    'commit="9d3ab2c1"',
    'INFO [                    main] system info | tid="1402" timestamp=1735 n_threads=20 '
    'n_threads_batch=-1 total_threads=40 system_info="AVX = 1 | AVX_VNNI = 0 | AVX2 = 0 | '
    'AVX512 = 0 | FMA = 0 | F16C = 1 | SSE3 = 1 | SSSE3 = 1 | MATMUL_INT8 = 0 | "',
]


@pytest.mark.parametrize(
    ("log", "build", "commit"), [(MAINLINE_LOG, "6000", "a1b2c3d4"), (IK_LOG, "3680", "9d3ab2c1")]
)
def test_runtime_facts_read_from_the_startup_log(log: list[str], build: str, commit: str) -> None:
    facts = runtime_facts(
        ["llama_model_loader: loaded meta data", *log, "main: server is listening"]
    )
    assert facts["build"] == build and facts["commit"] == commit
    assert facts["build_features"]["AVX"] == "1" and facts["build_features"]["AVX2"] == "0"
    assert "AVX2 = 0" in facts["system_info"]


def test_required_build_flags_against_what_the_build_reports(tmp_path: Path) -> None:
    build = tmp_path / "ik_llama.cpp" / "build"
    (build / "bin").mkdir(parents=True)
    server = build / "bin" / "llama-server"
    server.write_text("#!/bin/sh\n")
    server.chmod(0o755)
    (build / "CMakeCache.txt").write_text(
        "# This is the CMakeCache file.\n"
        "//ggml: use optimized iqk matrix multiplications\n"
        "GGML_IQK_MUL_MAT:BOOL=OFF\n"
        "GGML_NATIVE:BOOL=ON\n"
        "CMAKE_HOME_DIRECTORY:INTERNAL=/src\n"
    )
    cmake, where = cmake_cache_flags(str(server))
    assert where == str(build / "CMakeCache.txt")
    assert cmake["GGML_IQK_MUL_MAT"] == "OFF" and "CMAKE_HOME_DIRECTORY" not in cmake
    observed = cmake | runtime_facts(IK_LOG)["build_features"]
    findings = {
        f.required: f
        for f in check_build_flags(
            ["GGML_USE_IQK_MULMAT=OFF", "GGML_NATIVE", "AVX2=0", "AVX2", "GGML_AVX512=OFF"],
            observed,
        )
    }
    assert findings["GGML_USE_IQK_MULMAT=OFF"].status == "confirmed"
    assert "GGML_IQK_MUL_MAT=OFF" in findings["GGML_USE_IQK_MULMAT=OFF"].message
    assert findings["GGML_NATIVE"].status == "confirmed"
    assert findings["AVX2=0"].status == "confirmed"
    assert findings["AVX2"].status == "mismatch"
    assert findings["AVX2"].message == "AVX2 required, the build has AVX2=0"
    assert findings["GGML_AVX512=OFF"].status == "unconfirmed"
    assert cmake_cache_flags("no-such-runtime-anywhere") == ({}, None)


def test_the_docs_targets_files_are_valid_and_say_what_they_claim(tmp_path: Path) -> None:
    import re

    from tests.conftest import REPO

    text = (REPO / "docs" / "targets.md").read_text()
    files = dict(re.findall(r'```yaml title="([^"]+)"\n(.*?)```', text, re.DOTALL))
    xeon = targets_in_file(_targets(tmp_path, files["xeon-ik.yaml"]))["xeon-e5-2690-v2-ik"]
    assert {"--run-time-repack", "-rtr"} <= set(xeon.forbidden_flags)
    assert "GGML_USE_IQK_MULMAT=OFF" in xeon.required_build_flags
    assert xeon.cpu_flags is not None and "avx" in xeon.cpu_flags
    assert not {"avx2", "fma"} & xeon.cpu_flags
    unit_line = deployed_unit(xeon)
    assert f"unit launch {unit_line['launch']}; forbidden flags" in text
    edge = targets_in_file(_targets(tmp_path, files["edge-llama-server.yaml"]))["edge-llama-server"]
    assert edge.image is not None and edge.token_env == "LLM_GATEWAY_TOKEN"
    assert edge.endpoint == "https://llm.internal.example.com"
