"""The requests endpoint-smoke sends a server: the suite's cases, streamed with greedy
settings; the suite's latency plan as concurrent traffic; and, for a launched runtime, one
long prompt that fills its cache to the context the target serves.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from modelreg.schemas.suite import Case, Suite
from modelreg.validators.base import CheckContext
from modelreg.validators.exercised import ReportedRuntime, unconfirmed
from modelreg.validators.launch import LaunchedRuntime
from modelreg.validators.llama_runtime import probe_deadline
from modelreg.validators.openai_client import (
    Answer,
    EndpointRejected,
    EndpointTimeout,
    EndpointUnavailable,
    OpenAIClient,
)

# Greedy decoding as the bundled check does it: temperature 0 and, for the llama.cpp family
# (llama-server, ik_llama.cpp, llama-cpp-python — whose server defaults to a 1.1 repetition
# penalty), no repetition penalty. A server that refuses the extension is asked again without.
GREEDY = {"temperature": 0}
LLAMA_CPP_GREEDY = {"repeat_penalty": 1.0}
# The served-context probe of a launched runtime leaves this many tokens of the context for
# the template and the one new token (its time bound is the bundled probe's: probe_deadline).
PROBE_MARGIN_TOKENS = 16


def case_request(
    ctx: CheckContext, case: Case, model_id: str | None, has_template: bool
) -> tuple[str, dict[str, Any], bool]:
    """(path, body, chat) of the streamed greedy request that asks ``case``."""
    chat = has_template if case.chat is None else case.chat
    body: dict[str, Any] = {
        "max_tokens": case.max_tokens,
        **GREEDY,
        "seed": ctx.options.seed,
        "stream": True,
    }
    if model_id is not None:
        body["model"] = model_id
    asked = case.prompt_for(ctx.record.manifest.architecture.context_length)
    if chat:
        body["messages"] = [{"role": "user", "content": asked}]
        return "/v1/chat/completions", body, True
    body["prompt"] = asked
    return "/v1/completions", body, False


def ask_suite(
    ctx: CheckContext,
    suite: Suite,
    client: OpenAIClient,
    model_id: str | None,
    evidence: dict[str, Any],
    check_name: str,
) -> list[tuple[str, Answer]]:
    """Each case of ``suite`` asked in turn, its answer reported to the progress of
    ``check_name``; the sampling settings used are kept in ``evidence["sampling"]``."""
    has_template = ctx.record.manifest.architecture.chat_template_sha256 is not None
    extensions: dict[str, Any] = dict(LLAMA_CPP_GREEDY)
    sampling = evidence.setdefault("sampling", GREEDY | {"seed": ctx.options.seed})
    sampling |= extensions
    answers = []
    cases = suite.cases
    for k, case in enumerate(cases, 1):
        path, body, chat = case_request(ctx, case, model_id, has_template)
        try:
            answer = client.generate(path, body | extensions, chat)
        except EndpointRejected as exc:
            if not extensions:
                raise
            sampling["extensions_refused"] = str(exc)
            for key in extensions:
                sampling.pop(key, None)
            extensions = {}
            answer = client.generate(path, body, chat)
        answers.append((case.id, answer))
        ctx.progress.case_answered(check_name, k, len(cases), case.id)
    return answers


def latency_traffic(
    ctx: CheckContext,
    suite: Suite,
    client: OpenAIClient,
    model_id: str | None,
    deadline: float,
) -> dict[str, Any]:
    """The suite's latency plan against the server: ``warmup`` requests, then each case
    ``repeat`` times, ``concurrency`` clients each sending its next request when its last
    one ended (a closed loop), every request streamed on its own connection."""
    plan = suite.latency
    assert plan is not None
    serving = ctx.target.serving
    server = f"; the target serves {serving.parallel} in parallel" if serving else ""
    result: dict[str, Any] = {
        "batching": f"{plan.concurrency} concurrent streamed HTTP requests (a closed loop "
        f"of {plan.concurrency} clients); how the server batches them is its own{server}"
    }
    has_template = ctx.record.manifest.architecture.chat_template_sha256 is not None
    cases = [c for c in suite.cases if not plan.cases or c.id in plan.cases]
    if not cases:
        return result | {"status": "not_run", "message": "no case to ask"}
    local = threading.local()
    clients: list[OpenAIClient] = []

    def ask(case: Case) -> dict[str, Any]:
        if not hasattr(local, "client"):
            local.client = OpenAIClient(
                client.base_url, client.token, deadline, trust_env=client.trust_env
            )
            clients.append(local.client)
        path, body, chat = case_request(ctx, case, model_id, has_template)
        answer = local.client.generate(path, body, chat)
        tokens = answer.completion_tokens or 0
        return {
            "id": case.id,
            "completion_tokens": tokens,
            "finish_reason": answer.finish_reason,
            "ttft_ms": answer.ttft_ms,
            "decode_tokens": max(0, tokens - 1),
            "decode_ms": answer.decode_ms,
        }

    warm = [cases[i % len(cases)] for i in range(plan.warmup)]
    measured = [case for _ in range(plan.repeat) for case in cases]
    try:
        with ThreadPoolExecutor(plan.concurrency, "traffic") as pool:
            list(pool.map(ask, warm))
            started = time.perf_counter()
            requests = list(pool.map(ask, measured))
            wall_ms = round((time.perf_counter() - started) * 1000, 2)
    except (EndpointUnavailable, EndpointTimeout) as exc:
        return result | {"status": "error", "message": str(exc)[:500]}
    finally:
        for opened in clients:
            opened.close()
    return result | {
        "status": "ok",
        "requests": requests,
        "wall_ms": wall_ms,
        "max_in_flight": min(plan.concurrency, len(measured)),
    }


def served_context_probe(
    ctx: CheckContext,
    runtime: LaunchedRuntime,
    model_id: str | None,
    deadline: float,
    reported: ReportedRuntime,
) -> dict[str, Any]:
    """Fill the launched runtime's cache to the served context: one long prompt, one new
    token, within ``probe_deadline`` (and half the time left before ``deadline``); the
    runtime's peak RSS and prompt tokens/s afterwards are the measurement host-compat judges
    by. ``reported``: what the runtime said about itself (a runtime that is not the declared
    one is not measured)."""
    assert ctx.target.serving is not None
    tokens = ctx.target.serving.per_sequence(ctx.record.manifest.architecture.context_length)
    probe: dict[str, Any] = {"status": "not_run", "tokens_requested": tokens}
    if not tokens:
        probe["reason"] = "the served context is the trained one, which is not declared"
        return probe
    if unconfirmed(ctx.target.runtime, reported):
        probe["reason"] = "the declared runtime is not the one launched: nothing to measure"
        return probe
    bound = min(probe_deadline(ctx), max(0.0, deadline - time.monotonic()) / 2)
    probe["deadline_s"] = round(bound, 1)
    # " the" is one token in the tokenizers this runtime family serves; a margin for the
    # template's and the answer's tokens keeps it inside the context.
    words = max(1, tokens - PROBE_MARGIN_TOKENS)
    body: dict[str, Any] = {"prompt": "the" + " the" * (words - 1), "max_tokens": 1}
    body |= GREEDY | {"stream": False}  # one answer carrying usage: the token count
    if model_id is not None:
        body["model"] = model_id
    client = OpenAIClient(runtime.base_url, None, time.monotonic() + bound, trust_env=False)
    try:
        answer = client.generate("/v1/completions", body, chat=False)
    except EndpointTimeout:
        return probe | {"status": "timeout", "reason": f"no answer within {bound:.0f} s"}
    except EndpointUnavailable as exc:
        return probe | {"status": "error", "reason": str(exc)[:300]}
    finally:
        client.close()
    timings = answer.server_timings or {}
    evaluated = answer.prompt_tokens or _int_or_none(timings.get("prompt_n"))
    # The server's own prompt timing, else the request's wall time (prompt + one token).
    prompt_ms = _float_or_none(timings.get("prompt_ms")) or answer.ttft_ms or answer.wall_ms
    peaks = [p.peak_rss_bytes for p in runtime.processes() if p.peak_rss_bytes]
    if evaluated is None:
        # Words are not tokens, and a server may truncate: only its count is a measurement.
        return probe | {
            "status": "error",
            "reason": "the server did not report how many prompt tokens it evaluated",
        }
    return probe | {
        "status": "ok",
        "tokens_evaluated": evaluated,
        "prompt_ms": prompt_ms,
        "prompt_tokens_per_s": round(evaluated / (prompt_ms / 1000), 1) if prompt_ms else None,
        "resources": {"peak_rss_bytes": sum(peaks) if peaks else None},
    }


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None
