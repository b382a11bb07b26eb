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
        return measured_memory(results, target)
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
    """A runtime that really used more memory than the target's budget fails host-compat,
    with the estimate and the measurement side by side."""
    peaks = [
        r.evidence.get("resources", {}).get("peak_rss_bytes")
        for r in results
        if isinstance(r.evidence.get("resources"), dict)
    ]
    measured = max((p for p in peaks if isinstance(p, int)), default=None)
    if measured is None or not target.memory_bytes:
        return results
    budget = int(target.memory_bytes * MEMORY_BUDGET_SHARE)
    bound = []
    for result in results:
        if result.check == "host-compat":
            evidence = dict(result.evidence) | {
                "measured_peak_rss_bytes": measured,
                "budget_bytes": budget,
            }
            result = result.model_copy(update={"evidence": evidence})
            if measured > budget and result.outcome is not Outcome.FAIL:
                estimate = (result.evidence.get("memory") or {}).get("total_bytes")
                estimated = f"estimated {estimate / GiB:.2f} GiB, " if estimate else ""
                result = _replace(
                    result,
                    Outcome.FAIL,
                    f"the runtime used {measured / GiB:.2f} GiB ({estimated}measured peak RSS) "
                    f"of a {budget / GiB:.2f} GiB budget on {target.name}",
                    "does_not_fit",
                )
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
