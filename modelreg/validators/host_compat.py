"""``host-compat``: can this target run the artifact at all?

Format vs target kind, the CPU features the runtime build executes vs the target's CPU flags
(a llama.cpp built for AVX2 on an AVX1 host is a fail with that reason, not a crash), and
weights + KV cache at the configured context vs the target's memory.
"""

from __future__ import annotations

from typing import Any

from modelreg.deployed_unit import serves_own_runtime
from modelreg.manifests.fit import memory_fit, neuron_fit
from modelreg.registry.tables import utcnow
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import CheckContext, finish
from modelreg.validators.cpu_features import missing_flags
from modelreg.validators.llama_runtime import llama_report, target_flags

RUNTIME_TARGET_KIND = {"llama.cpp": "cpu", "transformers": "cpu", "neuron": "neuron"}


class HostCompatCheck:
    name = "host-compat"

    def run(self, ctx: CheckContext) -> CheckResult:
        started = utcnow()
        manifest = ctx.record.manifest
        failures: list[str] = []
        unknown: list[str] = []
        evidence: dict[str, Any] = {"target": ctx.target.name, "target_kind": ctx.target.kind}

        needed_kind = RUNTIME_TARGET_KIND[manifest.runtime.runtime]
        if needed_kind != ctx.target.kind:
            failures.append(
                f"{manifest.format} artifacts run on {manifest.runtime.runtime} "
                f"({needed_kind} targets); {ctx.target.name} is a {ctx.target.kind} target"
            )
            return finish(
                self.name,
                started,
                Outcome.FAIL,
                "; ".join(failures),
                evidence,
                classification="wrong_target",
            )

        if ctx.target.kind == "neuron":
            return self._neuron(ctx, started, evidence)
        fit = memory_fit(manifest, ctx.target.memory_bytes, context=ctx.options.context)
        evidence["memory"] = {
            "context_tokens": fit.kv.tokens,
            "weights_bytes": fit.weights_bytes,
            "kv_cache_bytes": fit.kv.bytes,
            "overhead_bytes": fit.overhead_bytes,
            "overhead_rule": fit.overhead_rule,
            "total_bytes": fit.total_bytes,
            "capacity_bytes": fit.capacity_bytes,
            "budget_bytes": fit.budget_bytes,
            "fits": fit.fits,
        }
        if fit.fits is False:
            failures.extend(fit.reasons)
        elif fit.fits is None:
            unknown.extend(fit.reasons)

        flags = target_flags(ctx)
        if manifest.runtime.runtime == "llama.cpp":
            self._cpu_features(ctx, flags, failures, unknown, evidence)
        declared = [
            f for f in manifest.runtime.cpu_features if flags is not None and f not in flags
        ]
        if declared:
            failures.append(f"the artifact needs CPU flags {', '.join(declared)}, absent on target")

        if failures:
            return finish(
                self.name,
                started,
                Outcome.FAIL,
                "; ".join(failures),
                evidence,
                classification="incompatible",
            )
        if unknown:
            return finish(self.name, started, Outcome.UNAVAILABLE, "; ".join(unknown), evidence)
        assert fit.total_bytes is not None and fit.budget_bytes is not None  # fit.fits is True
        return finish(
            self.name,
            started,
            Outcome.PASS,
            f"runtime build runs on {ctx.target.name}; needs {fit.total_bytes / 2**30:.2f} GiB "
            f"of a {fit.budget_bytes / 2**30:.2f} GiB budget at {fit.kv.tokens} tokens",
            evidence,
        )

    @staticmethod
    def _cpu_features(
        ctx: CheckContext,
        flags: frozenset[str] | None,
        failures: list[str],
        unknown: list[str],
        evidence: dict[str, Any],
    ) -> None:
        if flags is None:
            unknown.append(f"target {ctx.target.name} declares no cpu_flags")
            return
        evidence["target_cpu_flags"] = sorted(flags)
        if serves_own_runtime(ctx.target):
            # The bundled llama.cpp does not serve on this target: probing it would judge the
            # wrong build (and load the model for nothing). endpoint-smoke checks the build
            # that serves against these flags.
            evidence["runtime"] = "the target's own (launch / endpoint): see endpoint-smoke"
            return
        report = llama_report(ctx)
        features = report.response.get("build_features")
        evidence["runtime"] = {
            "llama_cpp_python_version": report.response.get("llama_cpp_python_version"),
            "system_info": report.response.get("system_info"),
        }
        if report.status == "no_runtime":
            unknown.append(report.response.get("message", "llama-cpp-python is not installed"))
        elif features is None:
            unknown.append(f"could not probe the llama.cpp build: {report.child.describe()}")
        else:
            missing = missing_flags(features, flags)
            if missing:
                failures.append(
                    f"llama.cpp was built for {', '.join(missing)}, which {ctx.target.name} "
                    "lacks (it would crash or compute garbage there)"
                )

    def _neuron(self, ctx: CheckContext, started: Any, evidence: dict[str, Any]) -> CheckResult:
        fit = neuron_fit(ctx.record.manifest, ctx.target.neuron_cores, ctx.target.memory_bytes)
        evidence["neuron_fit"] = {
            "tp_degree": fit.tp_degree,
            "neuron_cores": fit.neuron_cores,
            "per_rank_bytes": fit.per_rank_bytes,
            "reserve_bytes": fit.reserve_bytes,
            "core_budget_bytes": fit.core_budget_bytes,
            "contributors": [
                {
                    "name": c.name,
                    "dtype": c.dtype,
                    "placement": c.placement,
                    "per_rank_bytes": c.per_rank_bytes,
                }
                for c in fit.contributors
            ],
            "host_bytes": fit.host_bytes,
            "host_rule": fit.host_rule,
            "host_budget_bytes": fit.host_budget_bytes,
        }
        if fit.fits is False:
            return finish(
                self.name,
                started,
                Outcome.FAIL,
                "; ".join(fit.reasons),
                evidence,
                classification="does_not_fit",
            )
        if fit.fits is None:
            return finish(
                self.name,
                started,
                Outcome.UNAVAILABLE,
                "cannot tell whether it fits: " + "; ".join(fit.reasons),
                evidence,
            )
        return finish(
            self.name,
            started,
            Outcome.PASS,
            f"{(fit.per_rank_bytes or 0) / 2**30:.2f} GiB per NeuronCore at TP="
            f"{fit.tp_degree} (+ {fit.reserve_bytes / 2**30:.0f} GiB reserve) fits "
            f"{ctx.target.name}; host {(fit.host_bytes or 0) / 2**30:.2f} GiB",
            evidence,
        )
