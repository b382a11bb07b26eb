"""``host-compat``: can this target run the artifact at all?

Format vs target kind, the CPU features the runtime build executes vs the target's CPU flags
(a llama.cpp built for AVX2 on an AVX1 host is a fail with that reason, not a crash), and
weights + KV cache at the configured context vs the target's memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modelreg.clock import utcnow
from modelreg.deployed_unit import serves_own_runtime
from modelreg.manifests.fit import memory_fit
from modelreg.manifests.neuron_fit import neuron_fit
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import CheckContext, finish
from modelreg.validators.cpu_features import missing_flags
from modelreg.validators.llama_runtime import llama_report, target_flags

RUNTIME_TARGET_KIND = {"llama.cpp": "cpu", "transformers": "cpu", "neuron": "neuron"}


@dataclass(frozen=True)
class ServedShape:
    """What the memory check sizes the KV cache for, and why."""

    context: int | None  # None: the default (min(4096, trained context))
    sequences: int
    kv_dtype_k: str
    kv_dtype_v: str
    source: str
    unknown: str | None = None  # why the served context is not known

    def describe(self, tokens: int) -> str:
        shape = f"{tokens} tokens" + (f" × {self.sequences} seq" if self.sequences > 1 else "")
        return f"{shape} ({self.source})"


def served_shape(ctx: CheckContext) -> ServedShape:
    """The target's serving configuration when it declares one (a context of None there is
    the model's trained context), else ``verify --context``, else the default."""
    serving = ctx.target.serving
    if serving is not None:
        trained = ctx.record.manifest.architecture.context_length
        context = serving.per_sequence(trained)
        return ServedShape(
            context,
            serving.kv_sequences,
            serving.kv_dtype_k,
            serving.kv_dtype_v,
            f"served by {ctx.target.name}: {serving.source}"
            + ("" if serving.context else ", the trained context"),
            None
            if context
            else f"{ctx.target.name} serves the model's trained context, which the artifact "
            "does not declare",
        )
    if ctx.options.context is not None:
        return ServedShape(ctx.options.context, 1, "f16", "f16", "verify --context")
    return ServedShape(
        None, 1, "f16", "f16", f"default: {ctx.target.name} declares no serving context"
    )


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
        served = served_shape(ctx)
        fit = memory_fit(
            manifest,
            ctx.target.memory_bytes,
            context=served.context,
            sequences=served.sequences,
            kv_dtype=served.kv_dtype_k,
            kv_dtype_v=served.kv_dtype_v,
            latent_mla_runtime=ctx.target.runs_ik_llama,
        )
        evidence["memory"] = {
            "context_tokens": fit.kv.tokens,
            "sequences": fit.kv.sequences,
            "kv_dtype": fit.kv.kv_dtype,
            "context_source": served.source,
            "weights_bytes": fit.weights_bytes,
            "kv_cache_bytes": fit.kv.bytes,
            "overhead_bytes": fit.overhead_bytes,
            "overhead_rule": fit.overhead_rule,
            "total_bytes": fit.total_bytes,
            "capacity_bytes": fit.capacity_bytes,
            "budget_bytes": fit.budget_bytes,
            "fits": fit.fits,
        }
        if served.unknown:
            unknown.append(served.unknown)
        elif fit.fits is False:
            failures.extend(fit.reasons)
        elif fit.fits is None:
            unknown.extend(fit.reasons)

        flags = target_flags(ctx)
        declared = ctx.target.cpu_flags
        if ctx.target.is_local and declared is not None:
            # This host checks a target that declares its CPU: the checks here stand for that
            # CPU only if this host has every flag it declares (extra ones are never lent).
            from modelreg import host

            lacking = sorted(declared - host.cpu_flags())
            evidence["host_lacks_declared_flags"] = lacking
            if lacking:
                unknown.append(
                    f"this host ({host.hostname()}) lacks {', '.join(lacking)}, which "
                    f"{ctx.target.name} declares: it cannot stand for that CPU"
                )
        if manifest.runtime.runtime == "llama.cpp":
            self._cpu_features(ctx, flags, failures, unknown, evidence)
        needed = [f for f in manifest.runtime.cpu_features if flags is not None and f not in flags]
        if needed:
            failures.append(f"the artifact needs CPU flags {', '.join(needed)}, absent on target")
        self._tensor_kernels(ctx, flags, failures, unknown, evidence)

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
            f"of a {fit.budget_bytes / 2**30:.2f} GiB budget at {served.describe(fit.kv.tokens)}",
            evidence,
        )

    @staticmethod
    def _tensor_kernels(
        ctx: CheckContext,
        flags: frozenset[str] | None,
        failures: list[str],
        unknown: list[str],
        evidence: dict[str, Any],
    ) -> None:
        """Tensor layouts whose only x86 kernel needs CPU features (ik_llama.cpp's
        row-interleaved ``_R4``/``_R8`` types need AVX2: on AVX1 the output is garbage)."""
        from modelreg.manifests.tensor_types import interleaved_cpu_requirements

        quant = ctx.record.manifest.quantization
        needs = interleaved_cpu_requirements(quant.tensor_types if quant else {})
        if not needs:
            return
        evidence["tensor_type_cpu_requirements"] = {n.type_name: list(n.flags) for n in needs}
        if flags is None:
            unknown.append(
                f"target {ctx.target.name} declares no cpu_flags, and "
                f"{', '.join(n.type_name for n in needs)} need {', '.join(needs[0].flags)}"
            )
            return
        for need in needs:
            missing = [f for f in need.flags if f not in flags]
            if missing:
                failures.append(f"{need.message} — {ctx.target.name} lacks {', '.join(missing)}")

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
        from modelreg.manifests.neuron_fit import FitVerdict

        # What the target serves is what is checked (``verify --context`` when it declares
        # nothing): beyond the compiled shape it is "not compiled for this", not a fit.
        serving = ctx.target.serving
        fit = neuron_fit(
            ctx.record.manifest,
            ctx.target.neuron_cores,
            ctx.target.memory_bytes,
            context=serving.per_sequence(ctx.record.manifest.architecture.context_length)
            if serving is not None
            else ctx.options.context,
            sequences=serving.parallel if serving is not None else None,
            max_output_tokens=serving.max_output_tokens if serving is not None else None,
        )
        shape = fit.shape
        evidence["neuron_fit"] = {
            "tp_degree": fit.tp_degree,
            "neuron_cores": fit.neuron_cores,
            "compiled_shape": shape.as_dict(),
            "context": fit.context,
            "sequences": fit.sequences,
            "compiled_for": fit.compiled_for,
            "per_rank_bytes": fit.per_rank_bytes,
            "kv_per_rank_bytes": fit.kv_per_rank_bytes,
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
                classification=(
                    "not_compiled_for_this"
                    if fit.verdict is FitVerdict.NOT_COMPILED
                    else "does_not_fit"
                ),
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
            f"{fit.tp_degree} (+ {(fit.kv_per_rank_bytes or 0) / 2**30:.2f} GiB KV cache for "
            f"{shape.seq_len} tokens × {shape.batch_size} seq, + {fit.reserve_bytes / 2**30:.0f} "
            f"GiB reserve) fits {ctx.target.name}; host {(fit.host_bytes or 0) / 2**30:.2f} GiB",
            evidence,
        )
