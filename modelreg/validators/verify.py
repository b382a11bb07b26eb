"""``run_checks``: run the checks a record needs on a target and return every result; and the
post-run rules that bind those results to what really ran.

Storing the results, judging deployability and writing the event are the API's
(``modelreg.api.Registry.verify``), inside the model's lock.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from modelreg.registry.store import Record
from modelreg.registry.tables import utcnow
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
) -> list[CheckResult]:
    """Run the checks ``record`` needs on ``target``, in their order.

    ``files`` maps each manifest path to where the checks read it (the staged view).
    ``warm_llama_child`` is a llama.cpp child the caller started early; it is used if a check
    needs one and killed otherwise. Checks marked ``concurrent`` (re-hashing) run in a thread
    beside the others, which mostly wait on a child process.
    """
    try:
        ctx = CheckContext(record, target, files, options or VerifyOptions())
        ctx.shared["artifact_signatures"] = artifact_signatures or []
        if warm_llama_child is not None:
            ctx.shared["warm_llama_child"] = warm_llama_child
        names = required_checks(record.format, target)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="check") as pool:
            background = {
                name: pool.submit(CHECKS[name].run, ctx)
                for name in names
                if getattr(CHECKS[name], "concurrent", False)
            }
            inline = {name: CHECKS[name].run(ctx) for name in names if name not in background}
            results = [background[n].result() if n in background else inline[n] for n in names]
        return results
    finally:
        if warm_llama_child is not None:
            warm_llama_child.discard()


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


def measured_memory(results: list[CheckResult], target: Target) -> list[CheckResult]:
    """Judge host-compat's memory on the larger of what the runtime really used (its peak
    RSS) and what host-compat estimated, both recorded in its evidence: over the target's
    budget is a fail with both numbers.

    On a target that declares what it serves (``serving``) and that the bundled llama.cpp
    serves, the peak measured at the served context (gguf-cpu-smoke's
    ``served_context_probe``) counts too, and is named in the pass summary; a probe that timed
    out or could not run makes host-compat ``unavailable`` with that reason unless it already
    failed — a served configuration nobody measured is unknown."""
    from modelreg.validators.llama_runtime import PROBE_MAX_SECONDS, PROBE_TIMEOUT_SHARE

    # The runs that can measure here: the bundled runtimes' checks, and a runtime verify
    # launched (a remote endpoint's memory cannot be read from here: the estimate stands).
    # A Neuron target's served shape is bounded by what its bundle was compiled for instead.
    measuring = [
        r
        for r in results
        if r.check in ("gguf-cpu-smoke", "transformers-cpu-smoke")
        or (r.check == "endpoint-smoke" and r.evidence.get("mode") == "launch")
    ]
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

    unmeasured = None
    if probe_due and probe is not None and probe.get("status") != "ok":
        if probe.get("status") == "timeout":
            unmeasured = (
                f"the served-context probe stopped at its {probe.get('deadline_s')} s bound "
                f"after {probe.get('tokens_evaluated')} of {probe.get('tokens_requested')} "
                f"tokens — give verify a longer --timeout (the probe may take "
                f"{PROBE_TIMEOUT_SHARE:.0%} of it, at most {PROBE_MAX_SECONDS:.0f} s)"
            )
        else:
            why = probe.get("reason") or probe.get("message") or f"status {probe.get('status')}"
            unmeasured = f"the served context was not measured: {why}"

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
                figures += f" ({rate:.0f} prompt tok/s)"
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


def agreement_unmeasured(suite: Any) -> CheckResult | None:
    """A required ``reference-agreement`` result, ``unavailable``, when the suite in force sets
    agreement thresholds but this verify compared no reference: a threshold nobody measured
    is not met (fail closed). None when the suite sets none."""
    from modelreg.validators.agreement import AGREEMENT_CHECK
    from modelreg.validators.base import finish

    if suite is None:
        return None
    thresholds = suite.thresholds
    wanted = [
        name
        for name, limit in (
            ("min_top1_agreement", thresholds.min_top1_agreement),
            ("max_mean_kl", thresholds.max_mean_kl),
        )
        if limit is not None
    ]
    if not wanted:
        return None
    return finish(
        AGREEMENT_CHECK,
        utcnow(),
        Outcome.UNAVAILABLE,
        f"suite {suite.name} sets {' and '.join(wanted)}, and no reference was compared: "
        "verify with --reference RECORD (a record of the same tokenizer)",
        {"suite": {"name": suite.name, "digest": suite.digest()}, "thresholds": wanted},
    )
