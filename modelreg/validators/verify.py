"""``run_checks``: run the checks a record needs on a target and return every result; and the
post-run rules that bind those results to what really ran.

Storing the results, judging deployability and writing the event are the API's
(``modelreg.api.Registry.verify``), inside the model's lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from modelreg import units
from modelreg.clock import utcnow
from modelreg.progress import VerifyProgress
from modelreg.record import Record
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.targets import Target
from modelreg.validators.base import CheckContext, VerifyOptions
from modelreg.validators.child import RuntimeChild
from modelreg.validators.registry import CHECKS, required_checks

GiB = 1 << 30
# The share of a target's memory a runtime may use (the rest: headroom), as in memory_fit.
MEMORY_BUDGET_SHARE = 0.90


def run_checks(
    record: Record,
    target: Target,
    files: dict[str, Path],
    options: VerifyOptions | None = None,
    warm_llama_child: RuntimeChild | None = None,
    *,
    artifact_signatures: list[dict[str, Any]] | None = None,
    progress: VerifyProgress | None = None,
) -> list[CheckResult]:
    """Run the checks ``record`` needs on ``target``; results in their order.

    ``files`` maps each manifest path to where the checks read it (the staged view).
    ``warm_llama_child`` is a llama.cpp child the caller started early; it is used if a check
    needs one and killed otherwise. When ``gguf-cpu-smoke`` is required, the llama.cpp child
    is sent its request before any check runs (the model loads, then every case runs), and
    the checks marked ``concurrent`` (re-hashing) run beside it in a thread; the checks that
    read the child's report (host-compat's build probe, the smoke's verdict) take it when it
    arrives. Nothing here decides a verdict: the caller stores the results after every one
    of them, re-hash included, is in. ``progress`` is told as each check starts and ends.
    """
    reporter = progress or VerifyProgress()
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="check")
    try:
        ctx = CheckContext(
            record,
            target,
            files,
            options or VerifyOptions(),
            progress=reporter,
            artifact_signatures=artifact_signatures or [],
        )
        names = required_checks(record.format, target)
        loads_llama = LLAMA_GENERATION_CHECK in names
        if warm_llama_child is None and loads_llama:
            # Started here, in the calling thread (a child dies with the thread that started
            # it), and asked from the runtime thread below.
            warm_llama_child = RuntimeChild(
                ctx.options.llama_child_argv, memory_limit_bytes=ctx.options.memory_limit_bytes
            )
        ctx.warm_llama_child = warm_llama_child
        runtime = None
        if loads_llama:
            from modelreg.validators.smoke import smoke_suite

            # Said here, before any check can start in the pool: the child is loading now.
            reporter.runtime_started("llama.cpp", len(smoke_suite(ctx).cases))
            runtime = pool.submit(_ask_llama, ctx)
        background = {
            name: pool.submit(_run_check, name, ctx)
            for name in names
            if getattr(CHECKS[name], "concurrent", False)
        }
        inline = {}
        for name in names:
            if name in background:
                continue
            if runtime is not None and name in LLAMA_REPORT_READERS:
                runtime.result()
            inline[name] = _run_check(name, ctx)
        if runtime is not None:
            runtime.result()
        return [background[n].result() if n in background else inline[n] for n in names]
    finally:
        # Killed before the threads are waited for: a check that raised leaves no runtime
        # thread waiting on a child until its timeout.
        if warm_llama_child is not None:
            warm_llama_child.discard()
        pool.shutdown(wait=True)


# The check that loads the model in the llama.cpp child, and the checks that read that child's
# one report (``llama_runtime.llama_report``: the build probe and the generations).
LLAMA_GENERATION_CHECK = "gguf-cpu-smoke"
LLAMA_REPORT_READERS = frozenset({"host-compat", LLAMA_GENERATION_CHECK})


def _ask_llama(ctx: CheckContext) -> None:
    """Send the llama.cpp child its request and wait for its report (kept in ``ctx.llama``
    for the checks that read it)."""
    from modelreg.validators.llama_runtime import llama_report

    report = llama_report(ctx)
    ctx.progress.runtime_answered("llama.cpp", report.status)


def _run_check(name: str, ctx: CheckContext) -> CheckResult:
    ctx.progress.check_started(name)
    result = CHECKS[name].run(ctx)
    ctx.progress.check_finished(result)
    return result


def _replace(result: CheckResult, outcome: Outcome, summary: str, cls: str) -> CheckResult:
    return result.model_copy(update={"outcome": outcome, "summary": summary, "classification": cls})


def bind_to_staging(
    results: list[CheckResult], changes: list[str], unrecorded: list[str]
) -> list[CheckResult]:
    """Fail the digest check when a staged file changed while verify ran (its hash and the
    runtime may have seen different bytes), or when files a runtime would load sit beside
    the record's files without being part of it."""
    problems = []
    if changes:
        problems.append("; ".join(changes))
    if unrecorded:
        problems.append(
            "files a runtime would load are not part of the record: " + ", ".join(unrecorded)
        )
    if not problems:
        return results
    bound = []
    for result in results:
        if result.check == "digest":
            evidence = dict(result.evidence) | {"changed": changes, "unrecorded": unrecorded}
            result = _replace(
                result.model_copy(update={"evidence": evidence}),
                Outcome.FAIL,
                "; ".join(problems),
                "changed_during_verify" if changes else "unrecorded_files",
            )
        bound.append(result)
    return bound


# The bundled runtime each generation check runs: (the runtime's name in targets.yaml, the
# package that brings it).
_BUNDLED_RUNTIME = {
    "gguf-cpu-smoke": ("llama.cpp", "llama-cpp-python"),
    "transformers-cpu-smoke": ("transformers", "transformers"),
    "neuron-smoke": ("neuron", "torch-neuronx"),
}


def exercised_runtime(results: list[CheckResult], target: Target) -> list[CheckResult]:
    """Declared ⇒ exercised: a generation check ran modelreg's bundled runtime, so a target
    that declares another (``runtime: {llama.cpp: ik_llama.cpp b3900}``) learns nothing about
    it from that run — the check says ``unavailable`` (never a pass), naming what was declared
    and what ran, and how to have the declared one exercised (``launch`` or ``endpoint``). A
    declaration the bundled runtime satisfies (``llama.cpp: llama-cpp-python 0.3.36`` or
    ``0.3.36``) is exercised. The evidence names the runtime that answered either way."""
    from modelreg.fingerprint import package_version

    bound = []
    for result in results:
        bundled = _BUNDLED_RUNTIME.get(result.check)
        if bundled is None:
            bound.append(result)
            continue
        runtime, package = bundled
        version = package_version(package)
        exercised = f"{package} {version}"
        evidence = dict(result.evidence) | {"exercised_runtime": exercised}
        result = result.model_copy(update={"evidence": evidence})
        accepted = {version, exercised, f"{package}=={version}"}
        unexercised = [
            f"{name} {value}"
            for name, value in target.runtime.items()
            if not (name in (runtime, package) and str(value).strip() in accepted)
        ]
        if target.image is not None:
            # A pinned image is a runtime too: the bundled one is not it.
            unexercised.append(f"image {target.image}")
        if unexercised and result.outcome is not Outcome.UNAVAILABLE:
            result = _replace(
                result,
                Outcome.UNAVAILABLE,
                f"declared {', '.join(unexercised)}, exercised {exercised}: give `launch` or "
                f"`endpoint` in {target.name}'s definition so verify runs the declared runtime",
                "runtime_not_exercised",
            )
        bound.append(result)
    return bound


# A probe covered the served context if it evaluated at least this share of it (the endpoint
# probe leaves a few tokens for the template; a server that truncated the prompt did not).
PROBE_COVERAGE = 0.95


def _measuring(results: Sequence[CheckResult]) -> list[CheckResult]:
    """The checks whose runtime could measure the served context on the host that ran them:
    the bundled runtimes', and a runtime verify launched (a remote endpoint's memory cannot be
    read from the verifying host: the estimate stands). A runtime that is not the declared
    one measured nothing about the target. (A Neuron target's served shape is bounded by
    what its bundle was compiled for instead.)"""
    return [
        r
        for r in results
        if (
            r.check in ("gguf-cpu-smoke", "transformers-cpu-smoke")
            or (r.check == "endpoint-smoke" and r.evidence.get("mode") == "launch")
        )
        and r.classification != "runtime_not_exercised"
    ]


def uploaded_served_problem(results: Sequence[CheckResult], target: Target) -> str | None:
    """Why a run verified elsewhere cannot count on ``target``, which declares what it
    serves: its host-compat passed without the served context measured (a run of an older
    modelreg, or one that skipped the probe). None when nothing is wrong with it."""
    if target.serving is None or target.kind != "cpu" or not _measuring(results):
        return None
    compat = next((r for r in results if r.check == "host-compat"), None)
    if compat is None or compat.outcome is not Outcome.PASS:
        return None
    return unmeasured_because(compat.evidence.get("served_context_probe"))


def unmeasured_because(probe: dict[str, Any] | None) -> str | None:
    """Why a due served-context probe measured nothing the verdict may rest on (None: it
    did): it did not run, stopped at its bound, evaluated too little of the context, or left
    no peak."""
    from modelreg.validators.llama_runtime import PROBE_TIMEOUT_SHARE

    if probe is None:
        return "the served context was not measured"
    requested, evaluated = probe.get("tokens_requested"), probe.get("tokens_evaluated")
    if probe.get("status") == "timeout":
        return (
            f"the served-context probe stopped at its {probe.get('deadline_s')} s bound after "
            f"{evaluated if evaluated is not None else 'an unknown number'} of {requested} "
            f"tokens — raise the target's verify_timeout_seconds (the probe may take "
            f"{PROBE_TIMEOUT_SHARE:.0%} of it)"
        )
    if probe.get("status") != "ok":
        why = probe.get("reason") or probe.get("message") or f"status {probe.get('status')}"
        return f"the served context was not measured: {why}"
    if not isinstance(requested, int) or not isinstance(evaluated, int):
        return "the served-context probe did not report how many tokens it evaluated"
    if evaluated < requested * PROBE_COVERAGE:
        return (
            f"the served-context probe evaluated {evaluated} of the {requested} tokens served "
            "(a prompt truncated or refused): the served context was not measured"
        )
    peak = (probe.get("resources") or {}).get("peak_rss_bytes") or probe.get("peak_rss_bytes")
    if not isinstance(peak, int):
        return "the served-context probe measured no peak RSS"
    return None


def measured_memory(results: list[CheckResult], target: Target) -> list[CheckResult]:
    """Judge host-compat's memory on the larger of what the runtime really used (its peak
    RSS) and what host-compat estimated, both recorded in its evidence: over the target's
    budget is a fail with both numbers.

    On a target that declares what it serves (``serving``) and that the bundled llama.cpp
    serves, the peak measured at the served context (gguf-cpu-smoke's
    ``served_context_probe``) counts too, and is named in the pass summary; a probe that timed
    out or could not run makes host-compat ``unavailable`` with that reason unless it already
    failed — a served configuration nobody measured is unknown."""
    measuring = _measuring(results)
    probe_due = target.serving is not None and target.kind == "cpu" and bool(measuring)
    probe: dict[str, Any] | None = None
    peaks: list[Any] = []
    for r in results:
        resources = r.evidence.get("resources")
        if isinstance(resources, dict):
            peaks.append(resources.get("peak_rss_bytes"))
        served = r.evidence.get("served_context_probe")
        if r in measuring and isinstance(served, dict):
            probe = served
            # A probe that stopped at its bound measured a real (lower-bound) peak too.
            if isinstance(served.get("resources"), dict):
                peaks.append(served["resources"].get("peak_rss_bytes"))
    measured = max((p for p in peaks if isinstance(p, int)), default=None)
    if probe_due and probe is None:
        names = ", ".join(r.check for r in measuring)
        probe = {"status": "not_run", "reason": f"{names} recorded no served-context probe"}
    if measured is None and not probe_due:
        return results
    budget = int(target.memory_bytes * MEMORY_BUDGET_SHARE) if target.memory_bytes else None

    unmeasured = unmeasured_because(probe) if probe_due else None

    bound = []
    for result in results:
        if result.check != "host-compat":
            bound.append(result)
            continue
        estimate = (result.evidence.get("memory") or {}).get("total_bytes")
        estimated = estimate if isinstance(estimate, int) else None
        known = [b for b in (measured, estimated) if b is not None]
        used = max(known) if known else None
        evidence = dict(result.evidence) | {
            "measured_peak_rss_bytes": measured,
            "estimated_bytes": estimated,
            "used_bytes": used,
            "budget_bytes": budget,
        }
        if probe is not None:
            evidence["served_context_probe"] = {
                key: probe.get(key)
                for key in (
                    "status",
                    "cells",
                    "kv_dtype_k",
                    "kv_dtype_v",
                    "tokens_requested",
                    "tokens_evaluated",
                    "prompt_ms",
                    "prompt_tokens_per_s",
                    "peak_rss_bytes",
                    "resources",
                    "deadline_s",
                    "reason",
                    "message",
                )
                if probe.get(key) is not None
            }
        result = result.model_copy(update={"evidence": evidence})
        if result.outcome is Outcome.FAIL:
            bound.append(result)
            continue
        if used is not None and budget is not None and used > budget:
            if measured is not None and measured >= (estimated or 0):
                also = f"estimated {estimated / GiB:.2f} GiB, " if estimated else ""
                summary = (
                    f"the runtime used {measured / GiB:.2f} GiB ({also}measured peak RSS) "
                    f"of a {budget / GiB:.2f} GiB budget on {target.name}"
                )
            else:
                also = f"; measured peak RSS {measured / GiB:.2f} GiB" if measured else ""
                summary = (
                    f"the runtime needs {used / GiB:.2f} GiB (estimated{also}) "
                    f"of a {budget / GiB:.2f} GiB budget on {target.name}"
                )
            result = _replace(result, Outcome.FAIL, summary, "does_not_fit")
        elif unmeasured is not None:
            result = _replace(result, Outcome.UNAVAILABLE, unmeasured, "served_context_unmeasured")
        elif result.outcome is Outcome.PASS and probe is not None and probe.get("status") == "ok":
            peak = (probe.get("resources") or {}).get("peak_rss_bytes") or probe.get(
                "peak_rss_bytes"
            )
            rate = probe.get("prompt_tokens_per_s")
            figures = f"measured {peak / GiB:.2f} GiB peak" if isinstance(peak, int) else "measured"
            figures += f" at {probe.get('tokens_evaluated')} tokens"
            if rate:
                figures += f" ({units.rate(rate, 'prompt tok/s')})"
            result = result.model_copy(update={"summary": f"{result.summary}; {figures}"})
        bound.append(result)
    return bound


def reference_check(
    record: Record, reference: Record, staged: dict[str, Path], plan: Any
) -> CheckResult:
    """``reference-agreement``: the candidate (its staged files) against a reference record
    of the same tokenizer — greedy top-1 agreement and mean KL over a fixed text — judged by
    the suite's agreement thresholds (the default chat suite's when none is in force)."""
    from modelreg.suites import default_suite
    from modelreg.validators.agreement import AgreementSide, agreement_check, measure_agreement

    started = utcnow()

    def side(of: Record, where: dict[str, Path]) -> AgreementSide:
        weights = [f.path for f in of.manifest.files if f.role == "weights"]
        path = where[weights[0]]
        if of.format == "gguf":
            return AgreementSide("llama.cpp", path)
        return AgreementSide("transformers", path.parent)

    candidate = side(record, staged)
    reference_files = {f.path: reference.root / f.path for f in reference.manifest.files}
    run = measure_agreement(
        candidate,
        side(reference, reference_files),
        timeout=plan.options.timeout_seconds or 300.0,
    )
    run.evidence["reference_record_id"] = reference.id
    return agreement_check(run, plan.suite or default_suite(), started)


def agreement_unmeasured(suite: Any, target: Any = None) -> CheckResult | None:
    """A required ``reference-agreement`` result, ``unavailable``, when the suite in force
    names a reference (``thresholds.reference``) — or ``target`` does (``reference`` in its
    definition) — and this verify compared none: a comparison asked for and not made is not
    met (fail closed). None otherwise: agreement thresholds without a named reference judge a
    comparison asked for (``--reference``) and hold back no verify that asked for none."""
    from modelreg.validators.agreement import AGREEMENT_CHECK
    from modelreg.validators.base import finish

    named = getattr(getattr(suite, "thresholds", None), "reference", None)
    by = f"suite {suite.name}" if named is not None else None
    if named is None and getattr(target, "reference", None) is not None:
        named, by = target.reference, f"target {target.name}"
    if named is None or by is None:
        return None
    return finish(
        AGREEMENT_CHECK,
        utcnow(),
        Outcome.UNAVAILABLE,
        f"{by} names reference {named}, and no reference was compared: verify with "
        f"--reference {named}",
        {
            "suite": {"name": suite.name, "digest": suite.digest()} if suite is not None else None,
            "reference": named,
            "named_by": by,
        },
    )
