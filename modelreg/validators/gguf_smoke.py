"""``gguf-cpu-smoke``: the Paris check through llama.cpp on CPU, in a child process.

Greedy decoding, at most 16 new tokens, the model's chat template when it has one. Pass iff
every golden prompt's answer contains its expected text; otherwise the failure is classified:
``wrong_answer``, ``degenerate``, ``load_error``, ``crashed`` (with the signal) or ``timeout``.
"""

from __future__ import annotations

from typing import Any

from modelreg import host
from modelreg.registry.tables import utcnow
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.answers import classify_answer
from modelreg.validators.base import CheckContext, finish
from modelreg.validators.llama_runtime import llama_report


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
            **report.child.evidence(),
        }

        def done(outcome: Outcome, summary: str, classification: str | None = None) -> CheckResult:
            return finish(self.name, started, outcome, summary, evidence, classification)

        if report.child.status == "timeout":
            return done(Outcome.FAIL, f"llama.cpp {report.child.describe()}", "timeout")
        if report.child.status == "crashed":
            return done(Outcome.FAIL, f"llama.cpp {report.child.describe()}", "crashed")
        if report.child.status == "no_response":
            return done(Outcome.FAIL, f"llama.cpp {report.child.describe()}", "crashed")
        status = response.get("status")
        if status == "no_runtime":
            return done(Outcome.UNAVAILABLE, response.get("message", "llama.cpp not installed"))
        if status == "incompatible":
            missing = ", ".join(response.get("missing_features", []))
            return done(Outcome.SKIPPED, f"not run: the llama.cpp build needs {missing}")
        if not report.loaded_requested:
            reason = report.not_loaded_because or "not run"
            outcome = Outcome.UNAVAILABLE if not ctx.target.is_local else Outcome.SKIPPED
            return done(outcome, f"not run: {reason}")
        if status == "load_error":
            evidence["log_errors"] = response.get("log_errors", [])
            evidence["log_tail"] = response.get("log_tail", [])
            detail = (response.get("log_errors") or [response.get("message", "")])[-1]
            return done(Outcome.FAIL, f"llama.cpp could not load the model: {detail}", "load_error")
        if status != "ok":
            return done(Outcome.FAIL, f"unexpected child status {status!r}", "crashed")

        evidence |= {
            "load_ms": response.get("load_ms"),
            "n_ctx": response.get("n_ctx"),
            "n_threads": response.get("n_threads"),
            "has_chat_template": response.get("has_chat_template"),
        }
        generations = response.get("generations", [])
        first_failure: tuple[str, dict[str, Any]] | None = None
        for gen in generations:
            gen["classification"] = classify_answer(gen["output"], gen["expect"])
            if gen["classification"] != "pass" and first_failure is None:
                first_failure = (gen["classification"], gen)
        evidence["generations"] = generations
        if first_failure is None:
            outputs = " | ".join(repr(g["output"]) for g in generations)
            return done(Outcome.PASS, f"answered {outputs}")
        classification, gen = first_failure
        return done(
            Outcome.FAIL,
            f"{classification}: {gen['prompt']!r} -> {gen['output']!r} "
            f"(expected {gen['expect']!r})",
            classification,
        )
