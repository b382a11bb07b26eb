"""``transformers-cpu-smoke``: the Paris check through transformers on CPU, in a child process.

Same prompts, limits and verdict rules as the GGUF check; evidence carries the transformers and
torch versions, the dtype, load and generation milliseconds and the outputs.
"""

from __future__ import annotations

from typing import Any

from modelreg import host
from modelreg.clock import utcnow
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import CheckContext, finish
from modelreg.validators.child import run_child
from modelreg.validators.smoke import (
    judge_run,
    request_prompts,
    smoke_memory_problem,
    smoke_suite,
)
from modelreg.validators.transformers_child import CHILD_ARGV


class TransformersCpuSmoke:
    name = "transformers-cpu-smoke"

    def run(self, ctx: CheckContext) -> CheckResult:
        started = utcnow()
        evidence: dict[str, Any] = {
            "host": host.hostname(),
            "host_cpu_model": host.cpu_model(),
            "host_cpu_flags": sorted(host.cpu_flags()),
        }
        if not ctx.target.is_local:
            return finish(
                self.name,
                started,
                Outcome.UNAVAILABLE,
                f"not run: this host ({host.hostname()}) is not target {ctx.target.name}",
                evidence,
            )
        problem = smoke_memory_problem(ctx)
        if problem:
            return finish(self.name, started, Outcome.UNAVAILABLE, f"not run: {problem}", evidence)
        weights = [f.path for f in ctx.record.manifest.files if f.role == "weights"]
        suite = smoke_suite(ctx)
        request = {
            "model_dir": str(ctx.files[weights[0]].parent),
            "prompts": request_prompts(suite, ctx.record.manifest.architecture.context_length),
            "max_tokens": ctx.options.max_new_tokens,
            "threads": ctx.threads,
            "dtype": None,  # the checkpoint's own dtype
        }
        argv = ctx.options.transformers_child_argv or CHILD_ARGV
        child = run_child(
            argv,
            request,
            timeout=ctx.timeout,
            memory_limit_bytes=ctx.options.memory_limit_bytes,
        )
        response = child.response or {}
        evidence |= {
            "transformers_version": response.get("transformers_version"),
            "torch_version": response.get("torch_version"),
        }
        return judge_run(self.name, started, child, evidence, "transformers", suite, ctx.target)
