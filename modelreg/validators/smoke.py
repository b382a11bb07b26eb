"""What every generation smoke check shares: which suite to run, and how to judge the run.

The runtime differs (llama.cpp, transformers, torch-neuronx); the verdict rules do not. Every
run is judged against a ``Suite`` — the one given in ``VerifyOptions.suite``, else a suite made
of the golden prompts (the record's, the target's, or the built-in Paris check) that must all
pass. A run that produced nothing is ``load_error``, ``crashed`` (with the signal) or
``timeout``; otherwise each case is judged by ``judge`` (degenerate → no_stop → answer) and the
suite's gates decide, with the resource gates of the target (``gates:``) on top.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from modelreg import units
from modelreg.costs import describe_cost, run_cost
from modelreg.manifests.fit import memory_fit
from modelreg.schemas.manifest import GoldenPrompt
from modelreg.schemas.suite import (
    Case,
    Classification,
    Expectation,
    FinishReason,
    Generation,
    Suite,
    SuiteResult,
    Thresholds,
)
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import CheckContext, finish
from modelreg.validators.child import ChildRun
from modelreg.validators.judge import evaluate_suite, suite_on_target
from modelreg.validators.resources import resources_from_response, with_traffic

if TYPE_CHECKING:
    from modelreg.targets import Target

# Context the smoke runs allocate: a golden prompt and 16 new tokens fit easily.
SMOKE_CONTEXT = 512
DEFAULT_COMPLETION_PROMPT = "The capital of France is"
# A chat model asked only "What is the capital of France?" may ramble (SmolLM2 lists
# arrondissements); asking for one word makes the check about the answer, not the style.
DEFAULT_CHAT_PROMPT = "What is the capital of France? Answer in one word."
DEFAULT_EXPECT = "Paris"
# Answers that name one of these instead of (or beside) Paris are wrong.
# Not "Nice": matched case-insensitively it is an English word ("Nice question! Paris.").
DEFAULT_REJECT = ("Lyon", "Marseille", "Toulouse", "Berlin", "London", "Madrid", "Rome")
GOLDEN_SUITE_NAME = "golden-prompts"


def smoke_memory_problem(ctx: CheckContext) -> str | None:
    """Why the model cannot be loaded for a smoke run on this host, if it cannot."""
    fit = memory_fit(ctx.record.manifest, ctx.target.memory_bytes, context=smoke_context(ctx))
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


def golden_suite(prompts: Sequence[GoldenPrompt], max_tokens: int = 16) -> Suite:
    """Golden prompts as a suite every case of which must pass. The built-in Paris prompts also
    reject the answers that name another city."""
    cases = []
    for number, golden in enumerate(prompts, 1):
        builtin = golden.expect == DEFAULT_EXPECT and golden.prompt in (
            DEFAULT_CHAT_PROMPT,
            DEFAULT_COMPLETION_PROMPT,
        )
        cases.append(
            Case(
                id=f"golden-{number}",
                subset="golden",
                prompt=golden.prompt,
                chat=golden.chat,
                max_tokens=max_tokens,
                expect=Expectation(
                    value=golden.expect, reject=list(DEFAULT_REJECT) if builtin else []
                ),
            )
        )
    return Suite(name=GOLDEN_SUITE_NAME, thresholds=Thresholds(min_pass_rate=1.0), cases=cases)


def smoke_suite(ctx: CheckContext) -> Suite:
    """The suite a smoke check runs: the one asked for, else the golden prompts; judged with
    the target's resource gates on top of its own."""
    if ctx.options.suite is not None:
        suite = ctx.options.suite
    else:
        suite = golden_suite(golden_prompts(ctx), ctx.options.max_new_tokens)
    return suite_on_target(suite, ctx.target.name, ctx.target.gates)


def suite_context(suite: Suite, context_length: int | None = None) -> int:
    """Tokens of context to allocate so that every case's prompt (at a pessimistic 2 characters
    per token, plus a chat template's wrapping) and its whole budget fit — a long-context
    case's as sized for a model of ``context_length``, never past it."""
    needed = max(len(c.prompt_for(context_length)) // 2 + 128 + c.max_tokens for c in suite.cases)
    wanted = max(SMOKE_CONTEXT, -(-needed // 256) * 256)
    return min(wanted, context_length) if context_length else wanted


def smoke_context(ctx: CheckContext) -> int:
    return suite_context(smoke_suite(ctx), ctx.record.manifest.architecture.context_length)


def request_prompts(suite: Suite, context_length: int | None = None) -> list[dict[str, Any]]:
    """The ``prompts`` list of a runtime child's request (long-context cases sized for a model
    of ``context_length``)."""
    return [
        {
            "id": c.id,
            "prompt": c.prompt_for(context_length),
            "chat": c.chat,
            "max_tokens": c.max_tokens,
            "expect": c.expect.describe(),
        }
        for c in suite.cases
    ]


def generations_from_response(response: dict[str, Any], suite: Suite) -> dict[str, Generation]:
    """A child's generations keyed by case id (by position when the child did not echo ids)."""
    by_id: dict[str, Generation] = {}
    for position, raw in enumerate(response.get("generations") or []):
        case_id = raw.get("id")
        if case_id is None and position < len(suite.cases):
            case_id = suite.cases[position].id
        if case_id is None:
            continue
        finish_reason = raw.get("finish_reason")
        by_id[case_id] = Generation(
            case_id=case_id,
            prompt=raw["prompt"],
            output=raw["output"],
            chat=raw.get("mode") == "chat",
            finish_reason=FinishReason(finish_reason) if finish_reason else None,
            stopped_by_eos=raw.get("stopped_by_eos"),
            prompt_tokens=raw.get("prompt_tokens"),
            completion_tokens=raw.get("completion_tokens"),
            max_tokens=raw.get("max_tokens"),
            ttft_ms=raw.get("ttft_ms"),
            prompt_ms=raw.get("prompt_ms"),
            decode_ms=raw.get("decode_ms"),
        )
    return by_id


# When several classes fail a suite, the summary names the most telling one.
_SEVERITY = [
    Classification.DEGENERATE,
    Classification.NO_STOP,
    Classification.WRONG_ANSWER,
    Classification.NOT_RUN,
]


def failure_class(result: SuiteResult) -> str:
    """One classification for a failed suite run: the class of its failing cases when the pass
    rates failed (the most common; ties go to the most severe), else ``gate_failed``."""
    failing = [c.classification for c in result.failing_cases]
    rate_failed = any(r.startswith(("pass rate", "subset ")) for r in result.reasons)
    if not rate_failed or not failing:
        return "gate_failed"
    counts = Counter(failing)
    return min(counts, key=lambda cls: (-counts[cls], _SEVERITY.index(cls)))


def describe_result(result: SuiteResult) -> str:
    """One line: pass rate, per subset, resource figures."""
    passed = sum(c.passed for c in result.cases)
    parts = [f"suite {result.suite_name}: {passed}/{len(result.cases)} passed"]
    if len(result.subsets) > 1:
        parts.append(
            "(" + ", ".join(f"{s.subset} {s.passed}/{s.total}" for s in result.subsets) + ")"
        )
    r = result.resources
    if r is not None:
        figures = []
        if r.peak_rss_gib is not None:
            figures.append(f"peak RSS {units.gib(r.peak_rss_gib)}")
        if r.decode_tokens_per_s is not None:
            figures.append(f"decode {units.rate(r.decode_tokens_per_s)}")
        if r.ttft_ms_max is not None:
            figures.append(f"TTFT max {units.duration_ms(r.ttft_ms_max)}")
        t = r.traffic
        if t is not None and t.status == "ok":
            p50, p95 = units.duration_ms(t.ttft_ms_p50 or 0), units.duration_ms(t.ttft_ms_p95 or 0)
            figures.append(
                f"traffic {t.requests} requests × {t.concurrency} in flight: TTFT p50 {p50} "
                f"p95 {p95}"
            )
        elif t is not None:
            figures.append(f"traffic not measured ({t.reason})")
        if figures:
            return " ".join(parts) + "; " + ", ".join(figures)
    return " ".join(parts)


def judge_run(
    check: str,
    started: datetime,
    child: ChildRun,
    evidence: dict[str, Any],
    runtime: str,
    suite: Suite,
    target: Target | None = None,
) -> CheckResult:
    """Turn a finished child run into the check's result; ``evidence`` is completed in place
    and keeps every output, the suite's name and digest, the verdict per case and the
    measured resources (and, on a ``target`` that declares a price or a power draw, what
    1,000 generated tokens cost there: ``cost``)."""
    response = child.response or {}
    evidence |= child.evidence()
    evidence["suite"] = {"name": suite.name, "digest": suite.digest()}

    def done(outcome: Outcome, summary: str, classification: str | None = None) -> CheckResult:
        return finish(check, started, outcome, summary, evidence, classification)

    if child.status == "timeout":
        return done(Outcome.FAIL, f"{runtime} {child.describe()}", Classification.TIMEOUT)
    if child.status in ("crashed", "no_response"):
        return done(Outcome.FAIL, f"{runtime} {child.describe()}", Classification.CRASHED)
    status = response.get("status")
    if status == "no_runtime":
        return done(Outcome.UNAVAILABLE, response.get("message", f"{runtime} is not installed"))
    if status == "unsafe_template":
        return done(
            Outcome.FAIL,
            f"{runtime} refused to render the chat template: {response.get('message', '')}",
            Classification.UNSAFE_TEMPLATE,
        )
    if status == "load_error":
        for key in ("log_errors", "log_tail", "traceback_tail", "peak_rss_bytes"):
            if key in response:
                evidence[key] = response[key]
        detail = (response.get("log_errors") or [response.get("message", "")])[-1]
        return done(
            Outcome.FAIL, f"{runtime} could not load the model: {detail}", Classification.LOAD_ERROR
        )
    if status != "ok":
        return done(Outcome.FAIL, f"unexpected child status {status!r}", Classification.CRASHED)
    for key in (
        "load_ms",
        "dtype",
        "n_ctx",
        "n_threads",
        "threads",
        "has_chat_template",
        "mapped_libraries",
    ):
        if key in response:
            evidence[key] = response[key]
    resources = resources_from_response(response)
    if suite.latency is not None:
        resources = with_traffic(resources, response.get("traffic"), suite.latency)
        evidence["traffic_requests"] = (response.get("traffic") or {}).get("requests")
    result = evaluate_suite(suite, generations_from_response(response, suite), resources)
    verdicts = {c.case_id: c for c in result.cases}
    generations = response.get("generations", [])
    for position, gen in enumerate(generations):
        case_id = gen.get("id") or (
            suite.cases[position].id if position < len(suite.cases) else None
        )
        if case_id in verdicts:
            gen["classification"] = verdicts[case_id].classification
            gen["reason"] = verdicts[case_id].reason
    evidence["generations"] = generations
    evidence["resources"] = resources.model_dump(mode="json")
    evidence["suite_result"] = result.model_dump(mode="json")
    cost = run_cost(target, resources)
    if cost is not None:
        evidence["cost"] = cost
    if result.passed:
        if suite.name == GOLDEN_SUITE_NAME:
            outputs = " | ".join(repr(g["output"]) for g in generations)
            summary = f"answered {outputs}"
        else:
            summary = describe_result(result)
        costs = describe_cost(cost)
        return done(Outcome.PASS, f"{summary}; {costs}" if costs else summary)
    if suite.name == GOLDEN_SUITE_NAME and result.failing_cases:
        first = result.failing_cases[0]
        return done(
            Outcome.FAIL,
            f"{first.classification}: {first.prompt!r} -> {first.output!r} "
            f"({first.reason}; expected {first.expect.describe()})",
            first.classification,
        )
    return done(
        Outcome.FAIL,
        describe_result(result) + " — " + "; ".join(result.reasons),
        failure_class(result),
    )
