"""A Neuron bundle's own server, run and asked: what ``neuron-smoke`` exercises when the bundle
declares its serving entry point (``serve:`` in modelreg-deploy.json).

Seed 001's bug lived in the bundle's serving script (deploy_sqz.py / optb_server_sqz.py: a
plain ``nn.Embedding`` where the model's class scales by √hidden), not in anything modelreg's
own host path reads: a bundle whose manifest declares the right scale while its server drops
it passes ``embed-scale`` and a host-path run. So the server itself is started (its argv, on
127.0.0.1 at a free port, under ``runtime_guard`` like a target's launch), asked every case
of the suite over its OpenAI-compatible API (greedy, not streamed), and its answers judged by
the same judge. The response has the shape of a runtime child's, so ``smoke.judge_run``
decides. On a Neuron host the run counts only when a process of the server holds a Neuron
device or maps libnrt (``neuron_host.uses_neuron``); tests run a CPU server with
``require_neuron=False``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path, PurePosixPath
from typing import Any

from modelreg.schemas.neuron import ServeEntry
from modelreg.schemas.suite import Suite
from modelreg.validators.child import ChildRun
from modelreg.validators.launch import LaunchedRuntime, fill_placeholders, free_port

GREEDY = {"temperature": 0.0, "top_p": 1.0, "stream": False}


def bundle_root(script: Path, entry: ServeEntry) -> Path:
    """The bundle directory of a staged ``script`` (``entry.script`` may sit in a folder)."""
    root = script
    for _ in PurePosixPath(entry.script).parts:
        root = root.parent
    return root


def serve_argv(entry: ServeEntry, bundle: Path, port: int) -> list[str]:
    return fill_placeholders(
        entry.argv, {"python": sys.executable, "bundle": str(bundle), "port": str(port)}
    )


def ask_bundle_server(
    entry: ServeEntry,
    bundle: Path,
    suite: Suite,
    *,
    timeout: float,
    seed: int = 0,
    has_template: bool = False,
    context_length: int | None = None,
    require_neuron: bool = True,
) -> tuple[ChildRun, dict[str, Any]]:
    """Start the bundle's server, ask it the suite, stop it: (a ``ChildRun`` whose response is
    shaped like a runtime child's, evidence about the server that ran)."""
    import httpx

    from modelreg.safety.pickles import UnsafePickleError, may_hold_pickle, require_clean
    from modelreg.validators.neuron_host import uses_neuron
    from modelreg.validators.openai_client import (
        EndpointTimeout,
        EndpointUnavailable,
        OpenAIClient,
    )

    started = time.perf_counter()
    deadline = time.monotonic() + timeout
    port = free_port()
    runtime = LaunchedRuntime(serve_argv(entry, bundle, port), port)
    evidence: dict[str, Any] = {
        "script": entry.script,
        "argv": list(entry.argv),
        "source": entry.source,
    }

    def ended(
        status: str, message: str | None = None, **response: Any
    ) -> tuple[ChildRun, dict[str, Any]]:
        evidence["log_tail"] = runtime.log_tail()
        wall = (time.perf_counter() - started) * 1000
        if status in ("crashed", "timeout"):
            tail = "\n".join(evidence["log_tail"][-5:]) or (message or "")
            return ChildRun(status, None, None, None, wall, tail), evidence  # type: ignore[arg-type]
        answered = {"status": status, "message": message} | response
        return ChildRun("ok", answered, 0, None, wall, ""), evidence

    # The server script unpickles what the bundle holds: nothing starts that was not
    # scanned clean here, whatever the record's holds say.
    try:
        require_clean(
            sorted(p for p in bundle.rglob("*") if p.is_file() and may_hold_pickle(p.name))
        )
    except UnsafePickleError as exc:
        return ended("load_error", str(exc))
    runtime.start()
    try:
        with httpx.Client(base_url=runtime.base_url, trust_env=False) as probe:
            ready = runtime.wait_ready(probe, deadline)
        evidence["ready"] = {"status": ready.status, "ms": ready.ms, "probe": ready.probe}
        if ready.status == "exited":
            return ended("crashed", f"the bundle's server {runtime.exit_status()}")
        if ready.status == "timeout":
            return ended("timeout")
        client = OpenAIClient(runtime.base_url, None, deadline, trust_env=False)
        generations = []
        try:
            for case in suite.cases:
                chat = has_template if case.chat is None else case.chat
                asked = case.prompt_for(context_length)
                body: dict[str, Any] = {"max_tokens": case.max_tokens, "seed": seed, **GREEDY}
                if chat:
                    body["messages"] = [{"role": "user", "content": asked}]
                    path = "/v1/chat/completions"
                else:
                    body["prompt"] = asked
                    path = "/v1/completions"
                answer = client.generate(path, body, chat)
                generations.append(
                    {
                        "id": case.id,
                        "prompt": case.prompt,
                        "expect": case.expect.describe(),
                        "mode": "chat" if chat else "completion",
                        "output": answer.text,
                        "finish_reason": answer.finish_reason,
                        "max_tokens": case.max_tokens,
                        "prompt_tokens": answer.prompt_tokens,
                        "completion_tokens": answer.completion_tokens,
                        "wall_ms": answer.wall_ms,
                    }
                )
        except EndpointTimeout:
            return ended("timeout")
        except EndpointUnavailable as exc:
            if not runtime.running():
                return ended("crashed", f"the bundle's server {runtime.exit_status()}")
            return ended("load_error", f"the bundle's server did not answer: {exc}")
        finally:
            client.close()
        pids = [p.pid for p in runtime.processes()]
        peaks = [p.peak_rss_bytes for p in runtime.processes() if p.peak_rss_bytes]
        evidence["uses_neuron"] = uses_neuron(pids)
        if require_neuron and not evidence["uses_neuron"]:
            return ended(
                "no_runtime",
                f"the bundle's server {entry.script} answered, but no process of it holds a "
                "Neuron device open or maps libnrt: it ran on the CPU, not on the device",
            )
        return ended(
            "ok",
            generations=generations,
            load_ms=ready.ms,
            peak_rss_bytes=sum(peaks) if peaks else None,
        )
    finally:
        evidence["stopped"] = runtime.stop()
        runtime.cleanup()
