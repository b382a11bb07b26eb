"""``fit`` as a report: the memory arithmetic of ``fit.py`` laid out line by line, in bytes,
GB (10⁹) and GiB (2³⁰), for the CLI table, ``--json`` and the HTTP API alike."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelreg.errors import InvalidInput
from modelreg.schemas.output import FitLine, FitOutput, Sizes

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


def fit_report(
    name: str,
    manifest: Manifest,
    target: Target,
    *,
    context: int | None = None,
    concurrency: int = 1,
    kv_dtype: str = "f16",
    overhead: float = 0.10,
    headroom: float = 0.10,
) -> FitOutput:
    """Will ``manifest`` fit ``target``? (Neuron bundles fit inf2 targets, everything else
    cpu targets.)"""
    if (target.kind == "neuron") != (manifest.format == "neuron"):
        raise InvalidInput(
            f"{name} is a {manifest.format} artifact; {target.name} is a {target.kind} target",
            "Neuron bundles fit inf2 targets, everything else cpu targets",
        )
    if target.kind == "neuron":
        return _neuron(name, manifest, target, headroom)
    from modelreg.manifests.fit import memory_fit

    result = memory_fit(
        manifest,
        target.memory_bytes,
        context=context,
        sequences=concurrency,
        kv_dtype=kv_dtype,
        overhead_fraction=overhead,
        headroom_fraction=headroom,
    )
    kv = result.kv
    kv_note = f"{kv.tokens} tokens × {kv.sequences} seq, {kv.kv_dtype}"
    if kv.sliding_layers:
        kv_note += f"; {kv.sliding_layers}/{kv.layers} layers capped at {kv.window}"
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
    return FitOutput(
        record=name,
        target=target.name,
        kind="cpu",
        verdict=_VERDICT[result.fits],
        fits=result.fits,
        reasons=list(result.reasons),
        lines=[
            _line("weights", "weights", result.weights_bytes, "sum of tensor bytes"),
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


def _neuron(name: str, manifest: Manifest, target: Target, headroom: float) -> FitOutput:
    from modelreg.manifests.fit import neuron_fit

    result = neuron_fit(
        manifest, target.neuron_cores, target.memory_bytes, headroom_fraction=headroom
    )
    lines = [
        _line(
            f"module:{c.name}",
            f"{c.name} ({c.dtype}, {c.placement})",
            c.per_rank_bytes,
            "per NeuronCore",
        )
        for c in result.contributors
    ]
    lines += [
        _line("per_rank", "weights per rank", result.per_rank_bytes, f"TP={result.tp_degree}"),
        _line("reserve", "runtime reserve", result.reserve_bytes, "scratch, I/O, KV cache"),
        _line(
            "core_budget",
            "core budget",
            result.core_budget_bytes,
            f"{1 - headroom:.0%} of 16 GiB HBM",
        ),
        _line("host", "host RAM", result.host_bytes, result.host_rule),
        _line(
            "host_budget",
            "host budget",
            result.host_budget_bytes,
            f"{1 - headroom:.0%} of {target.name}",
        ),
    ]
    return FitOutput(
        record=name,
        target=target.name,
        kind="neuron",
        verdict=_VERDICT[result.fits],
        fits=result.fits,
        reasons=list(result.reasons),
        lines=lines,
        detail={
            "tp_degree": result.tp_degree,
            "neuron_cores": result.neuron_cores,
            "fits_device": result.fits_device,
            "fits_host": result.fits_host,
            "headroom": headroom,
            "contributors": [
                {"name": c.name, "dtype": c.dtype, "placement": c.placement}
                | sizes(c.per_rank_bytes).model_dump()
                for c in result.contributors
            ],
        },
    )
