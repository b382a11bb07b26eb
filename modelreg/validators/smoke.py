"""What every generation smoke check shares: which prompts to ask, and how to judge the run.

The runtime differs (llama.cpp, transformers, torch-neuronx); the verdict rules do not: pass iff
every golden prompt's answer contains its expected text, otherwise ``wrong_answer``,
``degenerate``, ``load_error``, ``crashed`` (with the signal) or ``timeout``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from modelreg.manifests.fit import memory_fit
from modelreg.schemas.manifest import GoldenPrompt
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.answers import (
    DEFAULT_CHAT_PROMPT,
    DEFAULT_COMPLETION_PROMPT,
    DEFAULT_EXPECT,
    classify_answer,
)
from modelreg.validators.base import CheckContext, finish
from modelreg.validators.child import ChildRun

# Context the smoke runs allocate: a golden prompt and 16 new tokens fit easily.
SMOKE_CONTEXT = 512


def smoke_memory_problem(ctx: CheckContext) -> str | None:
    """Why the model cannot be loaded for a smoke run on this host, if it cannot."""
    fit = memory_fit(ctx.record.manifest, ctx.target.memory_bytes, context=SMOKE_CONTEXT)
    if fit.fits is False:
        return "the model does not fit this host's memory: " + "; ".join(fit.reasons)
    return None


def golden_prompts(ctx: CheckContext) -> list[GoldenPrompt]:
    """The record's own prompts, else the target's, else the default Paris check."""
    if ctx.record.manifest.golden_prompts:
        return list(ctx.record.manifest.golden_prompts)
    if ctx.target.golden_prompts:
        return list(ctx.target.golden_prompts)
    has_template = ctx.record.manifest.architecture.chat_template_sha256 is not None
    prompt = DEFAULT_CHAT_PROMPT if has_template else DEFAULT_COMPLETION_PROMPT
    return [GoldenPrompt(prompt=prompt, expect=DEFAULT_EXPECT, chat=has_template)]


def judge_run(
    check: str,
    started: datetime,
    child: ChildRun,
    evidence: dict[str, Any],
    runtime: str,
) -> CheckResult:
    """Turn a finished child run into the check's result; ``evidence`` is completed in place."""
    response = child.response or {}
    evidence |= child.evidence()

    def done(outcome: Outcome, summary: str, classification: str | None = None) -> CheckResult:
        return finish(check, started, outcome, summary, evidence, classification)

    if child.status == "timeout":
        return done(Outcome.FAIL, f"{runtime} {child.describe()}", "timeout")
    if child.status in ("crashed", "no_response"):
        return done(Outcome.FAIL, f"{runtime} {child.describe()}", "crashed")
    status = response.get("status")
    if status == "no_runtime":
        return done(Outcome.UNAVAILABLE, response.get("message", f"{runtime} is not installed"))
    if status == "load_error":
        for key in ("log_errors", "log_tail", "traceback_tail"):
            if key in response:
                evidence[key] = response[key]
        detail = (response.get("log_errors") or [response.get("message", "")])[-1]
        return done(Outcome.FAIL, f"{runtime} could not load the model: {detail}", "load_error")
    if status != "ok":
        return done(Outcome.FAIL, f"unexpected child status {status!r}", "crashed")
    for key in ("load_ms", "dtype", "n_ctx", "n_threads", "threads", "has_chat_template"):
        if key in response:
            evidence[key] = response[key]
    generations = response.get("generations", [])
    first_failure: dict[str, Any] | None = None
    for gen in generations:
        gen["classification"] = classify_answer(gen["output"], gen["expect"])
        if gen["classification"] != "pass" and first_failure is None:
            first_failure = gen
    evidence["generations"] = generations
    if first_failure is None:
        outputs = " | ".join(repr(g["output"]) for g in generations)
        return done(Outcome.PASS, f"answered {outputs}")
    return done(
        Outcome.FAIL,
        f"{first_failure['classification']}: {first_failure['prompt']!r} -> "
        f"{first_failure['output']!r} (expected {first_failure['expect']!r})",
        first_failure["classification"],
    )
