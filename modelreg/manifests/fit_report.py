"""``fit`` as a report: the memory arithmetic of ``fit.py`` laid out line by line, in bytes,
GB (10⁹) and GiB (2³⁰), for the CLI table, ``--json`` and the HTTP API alike."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from modelreg.errors import InvalidInput
from modelreg.schemas.output import FitLine, FitOutput, FitWhatIf, Sizes

if TYPE_CHECKING:
    from modelreg.schemas.manifest import Manifest
    from modelreg.targets import Target

GB, GiB = 10**9, 1 << 30
_VERDICT = {True: "fits", False: "does not fit", None: "unknown"}


def sizes(n: int | None) -> Sizes:
    if n is None:
        return Sizes(bytes=None, GB=None, GiB=None)
    return Sizes(bytes=n, GB=round(n / GB, 3), GiB=round(n / GiB, 3))


def _line(key: str, name: str, n: int | None, note: str = "") -> FitLine:
    return FitLine(key=key, name=name, sizes=sizes(n), note=note)


def measured_line(peak_rss_bytes: int, run_id: str) -> FitLine:
    """The runtime's measured peak beside the estimate (from a verify run's evidence)."""
    return _line(
        "measured_peak_rss",
        "measured peak RSS",
        peak_rss_bytes,
        f"runtime child of run {run_id[:12]} (the estimate is weights + KV + overhead)",
    )


def _started_with(target: Target, context: int | None, concurrency: int | None) -> list[str]:
    """What a what-if asks beyond what the target's launch starts its runtime with: a runtime
    started with ``-c 8192`` serves no 100,000-token context, whatever the memory."""
    serving = target.serving
    if serving is None or "launch" not in serving.source:
        return []
    beyond = []
    if context and serving.context and context > serving.context:
        beyond.append(
            f"context {context} is beyond the {serving.context} tokens per sequence "
            f"{target.name}'s runtime is started with (its launch flags)"
        )
    if concurrency and concurrency > serving.parallel:
        beyond.append(
            f"{concurrency} sequences are beyond the {serving.parallel} parallel slots "
            f"{target.name}'s runtime is started with (its launch flags)"
        )
    return beyond


def fit_report(
    name: str,
    manifest: Manifest,
    target: Target,
    *,
    context: int | None = None,
    concurrency: int | None = None,
    kv_dtype: str | None = None,
    overhead: float = 0.10,
    headroom: float = 0.10,
    bits: float | None = None,
    quant: str | None = None,
) -> FitOutput:
    """Will ``manifest`` fit ``target``? (Neuron bundles fit inf2 targets, everything else
    cpu targets.) ``context`` / ``concurrency`` / ``kv_dtype`` are what-ifs; left out, the
    target's serving configuration decides them (else min(4096, trained context), 1, f16).
    ``bits`` / ``quant``: weights at that width from the parameter ledger instead of the
    tensors' bytes (a what-if, said so in the output; KV cache and overhead as always)."""
    if (target.kind == "neuron") != (manifest.format == "neuron"):
        raise InvalidInput(
            f"{name} is a {manifest.format} artifact; {target.name} is a {target.kind} target",
            "Neuron bundles fit inf2 targets, everything else cpu targets",
        )
    what_if = None
    if bits is not None or quant is not None:
        if target.kind == "neuron":
            raise InvalidInput(
                "`bits` / `quant` weigh a cpu target's weights; a Neuron bundle's residency is "
                "per module (its recorded dtypes)"
            )
        from modelreg.manifests.fit import what_if_weights

        what_if = what_if_weights(manifest, bits, quant)
    if target.kind == "neuron":
        return _neuron(name, manifest, target, headroom, context=context, sequences=concurrency)
    from modelreg.manifests.fit import memory_fit, weights_bytes

    serving = target.serving
    started_with = _started_with(target, context, concurrency)
    if serving is not None:
        context = context or serving.per_sequence(manifest.architecture.context_length)
        concurrency = concurrency or serving.kv_sequences
        kv_k, kv_v = (kv_dtype, kv_dtype) if kv_dtype else (serving.kv_dtype_k, serving.kv_dtype_v)
    else:
        kv_k = kv_v = kv_dtype or "f16"
    result = memory_fit(
        manifest,
        target.memory_bytes,
        context=context,
        sequences=concurrency or 1,
        kv_dtype=kv_k,
        kv_dtype_v=kv_v,
        overhead_fraction=overhead,
        headroom_fraction=headroom,
        latent_mla_runtime=target.runs_ik_llama,
        weights_what_if=what_if.bytes if what_if is not None else None,
    )
    if started_with:
        result = dataclasses.replace(result, fits=False, reasons=[*result.reasons, *started_with])
    kv = result.kv
    kv_note = f"{kv.tokens} tokens × {kv.sequences} seq, {kv.kv_dtype}"
    if kv.sliding_layers:
        kv_note += f"; {kv.sliding_layers}/{kv.layers} layers capped at {kv.window}"
    if serving is not None:
        kv_note += f"; what {target.name} serves ({serving.source})"
    capacity = (result.capacity_bytes or 0) / GiB
    detail: dict[str, Any] = {
        "kv_cache": {
            "tokens": kv.tokens,
            "sequences": kv.sequences,
            "kv_dtype": kv.kv_dtype,
            "layers": kv.layers,
            "sliding_window_layers": kv.sliding_layers,
            "window": kv.window,
            "unknown": kv.unknown,
            "notes": kv.notes,
        },
        "overhead_rule": result.overhead_rule,
        "headroom": result.headroom_fraction,
        "capacity": sizes(result.capacity_bytes).model_dump(),
    }
    weights_note = what_if.describe() if what_if is not None else "sum of tensor bytes"
    return FitOutput(
        record=name,
        target=target.name,
        kind="cpu",
        verdict=_VERDICT[result.fits],
        fits=result.fits,
        reasons=list(result.reasons),
        what_if=(
            FitWhatIf(
                bits=what_if.bits,
                quant=what_if.quant,
                parameters=what_if.parameters,
                parameters_provenance=what_if.parameters_provenance,
                weights=sizes(what_if.bytes),
                recorded_weights=sizes(weights_bytes(manifest)),
            )
            if what_if is not None
            else None
        ),
        lines=[
            _line("weights", "weights", result.weights_bytes, weights_note),
            _line("kv_cache", "kv cache", kv.bytes, kv_note),
            _line("overhead", "overhead", result.overhead_bytes, result.overhead_rule),
            _line("total", "total", result.total_bytes),
            _line(
                "budget",
                "budget",
                result.budget_bytes,
                f"{1 - headroom:.0%} of {target.name}'s {capacity:.1f} GiB",
            ),
        ],
        detail=detail,
    )


def _neuron(
    name: str,
    manifest: Manifest,
    target: Target,
    headroom: float,
    *,
    context: int | None = None,
    sequences: int | None = None,
) -> FitOutput:
    """The Neuron fit at ``context`` tokens × ``sequences`` — left out, what the target
    serves (as host-compat checks it), else the compiled shape."""
    from modelreg.manifests.neuron_fit import neuron_fit_for_target

    serving = target.serving
    max_output = None
    if serving is not None:
        # A serving block without a context serves the trained one (not compiled for it,
        # unless the bundle was); its output limit must fit after the prompt bucket.
        context = context or serving.per_sequence(manifest.architecture.context_length)
        sequences = sequences or serving.parallel
        max_output = serving.max_output_tokens
    fits = neuron_fit_for_target(
        manifest,
        target,
        headroom_fraction=headroom,
        context=context,
        sequences=sequences,
        max_output_tokens=max_output,
    )
    recorded = fits[0]
    shape, kv = recorded.shape, recorded.kv
    lines = [
        _line(
            f"module:{c.name}",
            f"{c.name} ({c.dtype}, {c.placement})",
            c.per_rank_bytes,
            "per NeuronCore" + (f"; {c.bytes_source}" if c.bytes_source != "declared" else ""),
        )
        for c in recorded.contributors
    ]
    lines += [
        _line("per_rank", "weights per rank", recorded.per_rank_bytes, f"TP={recorded.tp_degree}"),
        _line(
            "kv_cache",
            "KV cache per rank",
            recorded.kv_per_rank_bytes,
            f"compiled for {shape.describe()}",
        ),
        _line("reserve", "runtime reserve", recorded.reserve_bytes, "scratch, I/O tensors"),
        _line(
            "per_rank_total",
            "per NeuronCore",
            recorded.device_per_rank_bytes,
            "weights + KV cache + reserve",
        ),
        _line(
            "core_budget",
            "core budget",
            recorded.core_budget_bytes,
            f"{1 - headroom:.0%} of 16 GiB HBM",
        ),
        _line("host", "host RAM", recorded.host_bytes, recorded.host_rule),
        _line(
            "host_budget",
            "host budget",
            recorded.host_budget_bytes,
            f"{1 - headroom:.0%} of {target.name} + declared swap",
        ),
    ]
    if recorded.neff_bytes is not None or recorded.weights_all_ranks_bytes is not None:
        lines += [
            _line(
                "weights_all_ranks",
                "weights, all ranks",
                recorded.weights_all_ranks_bytes,
                "computed from the modules",
            ),
            _line("neff", "neff on disk", recorded.neff_bytes, "the compiled artifact"),
        ]
    return FitOutput(
        record=name,
        target=target.name,
        kind="neuron",
        verdict=recorded.verdict.value,
        fits=recorded.fits,
        reasons=list(recorded.reasons),
        lines=lines,
        detail={
            "tp_degree": recorded.tp_degree,
            "neuron_cores": recorded.neuron_cores,
            "fits_device": recorded.fits_device,
            "fits_host": recorded.fits_host,
            "headroom": headroom,
            "compiled_shape": shape.as_dict(),
            # What was asked (None: nothing, the compiled shape is served) and whether the
            # compiled shape serves it (None: a fact it needs is not recorded).
            "request": {
                "context": recorded.context,
                "sequences": recorded.sequences,
                "compiled_for": recorded.compiled_for,
            },
            # Sized for the compiled shape, allocated whole at load whatever is asked.
            "kv_cache": {
                "tokens": kv.tokens if kv is not None else shape.seq_len,
                "sequences": kv.sequences if kv is not None else shape.batch_size,
                "kv_dtype": shape.kv_dtype,
                "per_rank": sizes(recorded.kv_per_rank_bytes).model_dump(),
                "layers": kv.layers if kv is not None else manifest.architecture.block_count,
                "sliding_window_layers": kv.sliding_layers if kv is not None else None,
                "window": kv.window if kv is not None else None,
                "unknown": list(recorded.kv_unknown),
            },
            "contributors": [
                {"name": c.name, "dtype": c.dtype, "placement": c.placement}
                | sizes(c.per_rank_bytes).model_dump()
                for c in recorded.contributors
            ],
            "groups": [
                {"group": g.group, "params": g.params, "held_by": g.held_by}
                for g in recorded.groups
            ],
            "missing_groups": list(recorded.missing_groups),
            "notes": list(
                dict.fromkeys(
                    [*recorded.notes, *(recorded.host.notes if recorded.host is not None else [])]
                )
            ),
            "layouts": [
                {
                    "layout": f.layout,
                    "verdict": f.verdict.value,
                    "per_rank": sizes(f.per_rank_bytes).model_dump(),
                    "kv_cache_per_rank": sizes(f.kv_per_rank_bytes).model_dump(),
                    "core_budget": sizes(f.core_budget_bytes).model_dump(),
                    "reasons": list(f.reasons),
                    "missing_groups": list(f.missing_groups),
                    "observed": f.observed,
                }
                for f in fits
            ],
        },
    )


def compile_host_report(
    name: str, manifest: Manifest, target: Target, headroom: float
) -> FitOutput:
    """Can ``target`` compile this Neuron bundle (its recorded compile peak host memory
    against the target's RAM less headroom plus declared swap)?"""
    from modelreg.manifests.neuron_host import compile_host_fit

    fit = compile_host_fit(manifest, target, headroom_fraction=headroom)
    return FitOutput(
        record=name,
        target=target.name,
        kind="compile-host",
        verdict=_VERDICT[fit.fits],
        fits=fit.fits,
        reasons=list(fit.reasons),
        lines=[
            _line("compile_peak", "compile peak host memory", fit.needed_bytes, fit.rule),
            _line("ram", "host RAM", fit.ram_bytes, target.name),
            _line("swap", "declared swap", fit.swap_bytes, "swap_gib of the target"),
            _line("budget", "budget", fit.budget_bytes, f"{1 - headroom:.0%} of RAM + swap"),
        ],
        detail={"notes": list(fit.notes), "headroom": headroom},
    )
