"""The cost of checking the deployed runtime.

- Overhead: ``endpoint-smoke`` against a running llama-cpp-python server serving SmolLM2 vs the
  raw HTTP requests it sends for the same prompts (the same streamed chat completions, same
  settings, read to the end with httpx), alternated on the same server in one run, median of 7.
  The difference is what the check adds: its probes (``/v1/models``, ``/props``), identity
  binding, judging and evidence. Measured for the golden prompt (the default) and for the
  default chat suite (15 prompts). Because two multi-second runs differ by more than the
  overhead, the check also times itself: its probe requests, and its wall time outside every
  HTTP request (from the request log in its evidence); the target is judged on those.
- Launch to ready: ``LaunchedRuntime`` (the guard, then llama-cpp-python's server loading
  SmolLM2) until it answers HTTP, vs the same server started bare and polled the same way,
  median of 3.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.common import WORK
from modelreg.bundled import SMOLLM2_BASE, SMOLLM2_MODEL_ID, SMOLLM2_PACKAGE, smollm2_gguf

REPEAT = 7


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


def _server_argv(model: Path, port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "1024",
    ]


def _wait_http(url: str, proc: subprocess.Popen[bytes], started: float) -> float:
    import httpx

    while True:
        if proc.poll() is not None:
            raise RuntimeError("the server exited")
        try:
            if httpx.get(f"{url}/v1/models").status_code == 200:
                return time.perf_counter() - started
        except httpx.TransportError:
            pass
        time.sleep(0.05)


def _context(url: str) -> Any:
    import modelreg
    from modelreg.validators.base import CheckContext, VerifyOptions, locate_files

    WORK.mkdir(parents=True, exist_ok=True)
    targets = WORK / "endpoint-targets.yaml"
    targets.write_text(
        f"targets:\n  served:\n    hosts: ['{socket.gethostname()}']\n    endpoint: {url}\n"
    )
    database = WORK / "endpoint-bench.db"
    database.unlink(missing_ok=True)
    registry = modelreg.open(f"sqlite:///{database}")
    registry.define_targets(targets)
    added = registry.add(
        [smollm2_gguf()],
        model_id=SMOLLM2_MODEL_ID,
        source=f"pypi://{SMOLLM2_PACKAGE}",
        base_model=SMOLLM2_BASE,
    )
    record = registry.get(added.record.record_id)
    target = registry.target("served")
    return CheckContext(record, target, locate_files(record, None), VerifyOptions())


def _raw(url: str, suite: Any, model_id: str, client: Any) -> None:
    """The requests endpoint-smoke sends for ``suite``, and nothing else."""
    for case in suite.cases:
        body = {
            "model": model_id,
            "messages": [{"role": "user", "content": case.prompt}],
            "max_tokens": case.max_tokens,
            "temperature": 0,
            "seed": 0,
            "stream": True,
            "repeat_penalty": 1.0,
        }
        with client.stream("POST", f"{url}/v1/chat/completions", json=body) as response:
            for _line in response.iter_lines():
                pass


def _overhead(url: str) -> list[dict[str, Any]]:
    import dataclasses

    import httpx

    from modelreg.schemas.verification import Outcome
    from modelreg.suites import default_suite
    from modelreg.validators.endpoint import EndpointSmoke
    from modelreg.validators.smoke import smoke_suite

    ctx = _context(url)
    model_id = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
    check = EndpointSmoke()
    rows = []
    for label, options in (
        ("the golden prompt", ctx.options),
        ("the default chat suite", dataclasses.replace(ctx.options, suite=default_suite())),
    ):
        ctx = dataclasses.replace(ctx, options=options, llama=None, warm_llama_child=None)
        suite = smoke_suite(ctx)
        ours: list[float] = []
        raw: list[float] = []
        probes: list[float] = []  # the check's GETs (/v1/models, /props)
        own: list[float] = []  # the check's wall time outside every HTTP request
        outcome = ""
        with httpx.Client(timeout=60) as client:
            _raw(url, suite, model_id, client)  # warm the server's first-request path
            for _ in range(REPEAT):
                started = time.perf_counter()
                _raw(url, suite, model_id, client)
                raw.append(time.perf_counter() - started)
                started = time.perf_counter()
                result = check.run(ctx)
                ours.append(time.perf_counter() - started)
                requests = result.evidence["requests"]
                probes.append(sum(r["ms"] for r in requests if r["request"].startswith("GET")))
                own.append(ours[-1] * 1000 - sum(r["ms"] for r in requests))
                outcome = f"{result.outcome.value}: {result.summary[:120]}"
                assert result.outcome in (Outcome.PASS, Outcome.FAIL), result.summary
        a, b = _median(ours), _median(raw)
        rows.append(
            {
                "name": f"endpoint-smoke overhead over the raw HTTP requests, {label} "
                f"({len(suite.cases)} prompt(s), SmolLM2 on llama-cpp-python's server)",
                "ours_s": a,
                "theirs_s": b,
                "ratio": a / b,
                "detail": f"{a * 1000:.1f} ms vs {b * 1000:.1f} ms raw: {(a - b) * 1000:+.1f} ms "
                f"(median of {REPEAT}, alternated on one server); of the check's time, "
                f"{_median(probes):.1f} ms are its probe requests and {_median(own):.1f} ms its "
                f"own work outside HTTP (medians); check said {outcome}",
                "target": "≤ 50 ms added (probes + own work; the wall difference of a "
                "multi-second suite is mostly noise)",
                "met": _median(probes) + _median(own) <= 50,
            }
        )
    return rows


def _launch_to_ready(repeat: int = 3) -> dict[str, Any]:
    import httpx

    from modelreg.validators.launch import LaunchedRuntime, free_port

    model = smollm2_gguf()
    ours: list[float] = []
    bare: list[float] = []
    for _ in range(repeat):
        port = free_port()
        runtime = LaunchedRuntime(_server_argv(model, port), port)
        with httpx.Client(base_url=runtime.base_url, trust_env=False) as client:
            runtime.start()
            try:
                ready = runtime.wait_ready(client, time.monotonic() + 120)
                assert ready.status == "ready", runtime.log_tail()
                ours.append(ready.ms / 1000)
            finally:
                runtime.stop()
                runtime.cleanup()
        port = free_port()
        started = time.perf_counter()
        proc = subprocess.Popen(
            _server_argv(model, port),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            bare.append(_wait_http(f"http://127.0.0.1:{port}", proc, started))
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    a, b = _median(ours), _median(bare)
    return {
        "name": "launch to ready: SmolLM2 on llama-cpp-python's server, under the guard vs bare",
        "ours_s": a,
        "theirs_s": b,
        "ratio": a / b,
        "detail": f"{a:.2f} s under verify's guard vs {b:.2f} s started bare and polled alike "
        f"(median of {repeat}; start to first HTTP answer)",
        "target": "recorded",
        "met": None,
    }


def run() -> list[dict[str, Any]]:
    from modelreg.validators.launch import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        _server_argv(smollm2_gguf(), port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_http(url, proc, time.perf_counter())
        rows = _overhead(url)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return [*rows, _launch_to_ready()]


if __name__ == "__main__":
    for result in run():
        print(result)
