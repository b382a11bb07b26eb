"""One llama.cpp child run per verify, shared by ``host-compat`` and ``gguf-cpu-smoke``.

Importing llama_cpp costs ~0.2 s; probing the build and generating in the same child keeps
``verify`` close to the cost of a bare script that loads the model and generates.

On a target that declares what it serves (``serving:``) and that the bundled runtime serves,
the same child then measures the served context (``probe`` in the child's request): a context
of the served context × KV sequences cells with the served KV cache types, filled by one
prompt. Its time bound is half the check's timeout (the target's verify_timeout_seconds
raises it: a 26B model on a 2013 Xeon fills 8,192 tokens in minutes, not seconds); the child's
timeout grows by that bound and ``PROBE_SETUP_SECONDS``, so the probe never takes the
generations' time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from modelreg import host
from modelreg.deployed_unit import serves_own_runtime
from modelreg.manifests.fit import memory_fit
from modelreg.schemas.suite import Suite
from modelreg.validators.base import CheckContext
from modelreg.validators.child import ChildRun, run_child
from modelreg.validators.smoke import (
    request_prompts,
    smoke_memory_problem,
    smoke_suite,
    suite_context,
)

PROBE_TIMEOUT_SHARE = 0.5
# The probe's own model load and context allocation, and the batch under way at its bound.
PROBE_SETUP_SECONDS = 30.0

if TYPE_CHECKING:
    from modelreg.targets import Target


@dataclass(frozen=True)
class ServedProbePlan:
    """The served-context probe a verify asks for: its child request, or why none was asked."""

    cells: int | None  # served context × KV sequences
    request: dict[str, Any] | None
    not_run_because: str | None = None


@dataclass(frozen=True)
class LlamaReport:
    child: ChildRun
    loaded_requested: bool
    not_loaded_because: str | None
    suite: Suite
    probe: ServedProbePlan | None = None  # None: the target declares no serving for us

    @property
    def response(self) -> dict[str, Any]:
        return self.child.response or {}

    @property
    def status(self) -> str:
        return str(self.response.get("status", self.child.status))

    def served_context_probe(self) -> dict[str, Any] | None:
        """The probe's evidence: what the child measured (``status`` ok or timeout, with
        ``resources``), else ``status: not_run`` / ``error`` and why. None when no probe is
        due (the target declares no serving, or serves with its own runtime)."""
        plan = self.probe
        if plan is None:
            return None
        base: dict[str, Any] = {"cells": plan.cells}
        if plan.request is None:
            return base | {"status": "not_run", "reason": plan.not_run_because}
        response = self.response
        reason = None
        if self.child.status != "ok":
            reason = f"the llama.cpp child {self.child.describe()}"
        elif response.get("status") == "incompatible":
            reason = f"the llama.cpp build needs {', '.join(response.get('missing_features', []))}"
        elif response.get("status") == "load_error":
            reason = f"llama.cpp could not load the model: {response.get('message', '')}"
        elif response.get("status") != "ok":
            reason = response.get("message") or f"child status {response.get('status')!r}"
        elif not isinstance(response.get("probe"), dict):
            reason = "the llama.cpp child answered without the probe"
        if reason is not None:
            return base | {"status": "not_run", "reason": reason}
        return base | probe_with_resources(response["probe"])


def probe_with_resources(probe: dict[str, Any]) -> dict[str, Any]:
    """The child's probe answer with its figures as ``resources`` (the shape of a smoke run's)."""
    from modelreg.schemas.suite import Resources

    decode_ms = probe.get("decode_ms")
    resources = Resources(
        peak_rss_bytes=probe.get("peak_rss_bytes"),
        load_ms=probe.get("setup_ms"),
        prompt_tokens_per_s=probe.get("prompt_tokens_per_s"),
        # One decode step at the full context.
        decode_tokens_per_s=round(1000 / decode_ms, 2) if decode_ms else None,
        context_used_tokens=probe.get("tokens_evaluated") or None,
        context_tokens=probe.get("n_ctx"),
    )
    return probe | {"resources": resources.model_dump(mode="json")}


def target_flags(ctx: CheckContext) -> frozenset[str] | None:
    """The CPU flags the target's hosts have: the declared ones when the target declares them
    (a host that checks it may have more — an AVX2 host checking an AVX1-only target must not
    lend it AVX2: seed 004's silent failure), else this host's when it is one of them."""
    return declared_or_host_flags(ctx.target)


def declared_or_host_flags(target: Target) -> frozenset[str] | None:
    """``target_flags`` of a target (declared, else this host's when it is one of its hosts)."""
    if target.cpu_flags is not None:
        return target.cpu_flags
    return host.cpu_flags() if target.is_local else None


def probe_deadline(ctx: CheckContext) -> float:
    """Seconds the served-context probe may take: half the check's timeout."""
    return ctx.timeout * PROBE_TIMEOUT_SHARE


def served_probe_plan(ctx: CheckContext, not_loaded_because: str | None) -> ServedProbePlan | None:
    """The probe this verify asks the child for, or why it asks none; None when no probe is
    due: the target declares no serving, or names its own runtime (``launch`` / ``endpoint``:
    endpoint-smoke measures that one)."""
    serving = ctx.target.serving
    if serving is None or serves_own_runtime(ctx.target):
        return None
    trained = ctx.record.manifest.architecture.context_length
    context = serving.per_sequence(trained)
    cells = context * serving.kv_sequences if context else None

    def not_run(why: str) -> ServedProbePlan:
        return ServedProbePlan(cells, None, why)

    if not_loaded_because is not None:
        return not_run(not_loaded_because)
    if not context or cells is None:
        return not_run(
            f"{ctx.target.name} serves the model's trained context, which the artifact does not "
            "declare"
        )
    if trained and context > trained:
        # host-compat fails it: positions past the trained context are not served.
        return not_run(f"served context {context} exceeds the model's trained context {trained}")
    fit = memory_fit(
        ctx.record.manifest,
        ctx.target.memory_bytes,
        context=context,
        sequences=serving.kv_sequences,
        kv_dtype=serving.kv_dtype_k,
        kv_dtype_v=serving.kv_dtype_v,
    )
    if fit.fits is False:
        # host-compat fails it; allocating it here could get the child (and the smoke) killed.
        return not_run("the estimate at the served context does not fit: " + "; ".join(fit.reasons))
    request = {
        "n_ctx": cells,
        "tokens": cells,
        "type_k": serving.kv_dtype_k,
        "type_v": serving.kv_dtype_v,
        "deadline_s": round(probe_deadline(ctx), 3),
    }
    return ServedProbePlan(cells, request)


def llama_report(ctx: CheckContext) -> LlamaReport:
    if ctx.llama is not None:
        return ctx.llama
    reason = None
    if not ctx.target.is_local:
        reason = f"this host ({host.hostname()}) is not target {ctx.target.name}"
    else:
        reason = smoke_memory_problem(ctx)
    (model_file,) = [f for f in ctx.record.manifest.files if f.role == "weights"][:1]
    suite = smoke_suite(ctx)
    flags = target_flags(ctx)
    request: dict[str, Any] = {
        "model_path": str(ctx.files[model_file.path]),
        "prompts": request_prompts(suite, ctx.record.manifest.architecture.context_length),
        "n_ctx": suite_context(suite, ctx.record.manifest.architecture.context_length),
        "n_threads": ctx.threads,
        "max_tokens": ctx.options.max_new_tokens,
        "seed": ctx.options.seed,
        "host_flags": sorted(flags) if flags is not None else None,
        "load": reason is None,
    }
    timeout = ctx.timeout
    if suite.latency is not None:
        # Latency like traffic, after the judged run: as long again at most.
        request["traffic"] = suite.latency.model_dump(mode="json")
        timeout += ctx.timeout
    probe = served_probe_plan(ctx, reason)
    if probe is not None and probe.request is not None:
        request["probe"] = probe.request
        timeout += probe.request["deadline_s"] + PROBE_SETUP_SECONDS
    warm, ctx.warm_llama_child = ctx.warm_llama_child, None
    if warm is not None:
        child = warm.exchange(request, timeout)
    else:
        child = run_child(
            ctx.options.llama_child_argv,
            request,
            timeout=timeout,
            memory_limit_bytes=ctx.options.memory_limit_bytes,
        )
    report = LlamaReport(child, reason is None, reason, suite, probe)
    ctx.llama = report
    return report
