"""One llama.cpp child run per verify, shared by ``host-compat`` and ``gguf-cpu-smoke``.

Importing llama_cpp costs ~0.2 s; probing the build and generating in the same child keeps
``verify`` close to the cost of a bare script that loads the model and generates.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modelreg import host
from modelreg.schemas.suite import Suite
from modelreg.validators.base import CheckContext
from modelreg.validators.child import ChildRun, RuntimeChild, run_child
from modelreg.validators.smoke import (
    request_prompts,
    smoke_memory_problem,
    smoke_suite,
    suite_context,
)


@dataclass(frozen=True)
class LlamaReport:
    child: ChildRun
    loaded_requested: bool
    not_loaded_because: str | None
    suite: Suite

    @property
    def response(self) -> dict[str, Any]:
        return self.child.response or {}

    @property
    def status(self) -> str:
        return self.response.get("status", self.child.status)


def target_flags(ctx: CheckContext) -> frozenset[str] | None:
    return host.cpu_flags() if ctx.target.is_local else ctx.target.cpu_flags


def llama_report(ctx: CheckContext) -> LlamaReport:
    cached = ctx.shared.get("llama")
    if isinstance(cached, LlamaReport):
        return cached
    reason = None
    if not ctx.target.is_local:
        reason = f"this host ({host.hostname()}) is not target {ctx.target.name}"
    else:
        reason = smoke_memory_problem(ctx)
    (model_file,) = [f for f in ctx.record.manifest.files if f.role == "weights"][:1]
    suite = smoke_suite(ctx)
    flags = target_flags(ctx)
    request = {
        "model_path": str(ctx.files[model_file.path]),
        "prompts": request_prompts(suite),
        "n_ctx": suite_context(suite),
        "n_threads": ctx.threads,
        "max_tokens": ctx.options.max_new_tokens,
        "seed": ctx.options.seed,
        "host_flags": sorted(flags) if flags is not None else None,
        "load": reason is None,
    }
    warm = ctx.shared.pop("warm_llama_child", None)
    if isinstance(warm, RuntimeChild):
        child = warm.exchange(request, ctx.timeout)
    else:
        child = run_child(
            ctx.options.llama_child_argv,
            request,
            timeout=ctx.timeout,
            memory_limit_bytes=ctx.options.memory_limit_bytes,
        )
    report = LlamaReport(child, reason is None, reason, suite)
    ctx.shared["llama"] = report
    return report
