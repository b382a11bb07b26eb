"""``gguf-cpu-smoke``: the Paris check through llama.cpp on CPU, in a child process.

Greedy decoding, every case of the suite (by default the Paris check, at most 16 new tokens)
through one loaded model, the model's chat template when it has one; judged by
``smoke.judge_run``. The same child reports the build's compiled features and, on a target that
declares what it serves, measures the served context (``served_context_probe`` in the
evidence, which ``verify.measured_memory`` judges under host-compat; see llama_runtime).
"""

from __future__ import annotations

from typing import Any

from modelreg import host
from modelreg.clock import utcnow
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import CheckContext, finish
from modelreg.validators.llama_runtime import llama_report
from modelreg.validators.smoke import judge_run


class GGUFCpuSmoke:
    name = "gguf-cpu-smoke"

    def run(self, ctx: CheckContext) -> CheckResult:
        started = utcnow()
        report = llama_report(ctx)
        response = report.response
        evidence: dict[str, Any] = {
            "llama_cpp_python_version": response.get("llama_cpp_python_version"),
            "system_info": response.get("system_info"),
            "build_features": response.get("build_features"),
            "host": host.hostname(),
            "host_cpu_model": host.cpu_model(),
            "host_cpu_flags": sorted(host.cpu_flags()),
        }
        probe = report.served_context_probe()
        if probe is not None:
            evidence["served_context_probe"] = probe
        if report.child.status == "ok" and response.get("status") == "incompatible":
            missing = ", ".join(response.get("missing_features", []))
            return finish(
                self.name,
                started,
                Outcome.UNAVAILABLE,
                f"not run: the llama.cpp build needs {missing}",
                evidence,
            )
        if report.child.status == "ok" and not report.loaded_requested:
            return finish(
                self.name,
                started,
                Outcome.UNAVAILABLE,
                f"not run: {report.not_loaded_because or 'not requested'}",
                evidence,
            )
        return judge_run(
            self.name, started, report.child, evidence, "llama.cpp", report.suite, ctx.target
        )
