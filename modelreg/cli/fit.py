"""``modelreg fit``: will this record fit that target's memory, before anyone tries?"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from modelreg.cli.main import JsonOption, TargetOption, _manifest_ref, app
from modelreg.cli.render import emit_json, table
from modelreg.errors import InvalidInput

GB, GiB = 10**9, 1 << 30


def _sizes(n: int | None) -> dict[str, Any]:
    if n is None:
        return {"bytes": None, "GB": None, "GiB": None}
    return {"bytes": n, "GB": round(n / GB, 3), "GiB": round(n / GiB, 3)}


def _row(name: str, n: int | None, note: str = "") -> tuple[str, str, str, str, str]:
    if n is None:
        return (name, "unknown", "", "", note)
    return (name, f"{n:,}", f"{n / GB:.3f}", f"{n / GiB:.3f}", note)


@app.command()
def fit(
    ctx: typer.Context,
    record_ref: Annotated[
        str, typer.Argument(metavar="RECORD", help="Record id/prefix, or a manifest .json file.")
    ],
    target: TargetOption = "cpu",
    context: Annotated[
        int | None, typer.Option("--context", help="Tokens of context per sequence.")
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Sequences held at once.")] = 1,
    kv_dtype: Annotated[
        str, typer.Option("--kv-dtype", help="KV cache element type: f16, q8_0, q4_0, f32.")
    ] = "f16",
    overhead: Annotated[
        float, typer.Option("--overhead", help="Runtime overhead as a fraction of weights.")
    ] = 0.10,
    headroom: Annotated[
        float, typer.Option("--headroom", help="Fraction of memory kept free.")
    ] = 0.10,
    json_out: JsonOption = False,
) -> int:
    """Weights + KV cache + overhead against TARGET's memory; exit 0 only if it fits."""
    from modelreg.manifests.fit import memory_fit
    from modelreg.targets import get_target

    the_target = get_target(target)
    name, manifest = _manifest_ref(ctx, record_ref)
    if (the_target.kind == "neuron") != (manifest.format == "neuron"):
        raise InvalidInput(
            f"{name} is a {manifest.format} artifact; {target} is a {the_target.kind} target "
            "(Neuron bundles fit inf2 targets, everything else cpu targets)"
        )
    if the_target.kind == "neuron":
        return _neuron_fit(name, manifest, the_target, headroom, json_out)
    result = memory_fit(
        manifest,
        the_target.memory_bytes,
        context=context,
        sequences=concurrency,
        kv_dtype=kv_dtype,
        overhead_fraction=overhead,
        headroom_fraction=headroom,
    )
    verdict = {True: "fits", False: "does not fit", None: "unknown"}[result.fits]
    kv = result.kv
    if json_out:
        emit_json(
            {
                "record": name,
                "target": target,
                "verdict": verdict,
                "fits": result.fits,
                "reasons": result.reasons,
                "weights": _sizes(result.weights_bytes),
                "kv_cache": _sizes(kv.bytes)
                | {
                    "tokens": kv.tokens,
                    "sequences": kv.sequences,
                    "kv_dtype": kv.kv_dtype,
                    "layers": kv.layers,
                    "sliding_window_layers": kv.sliding_layers,
                    "window": kv.window,
                    "unknown": kv.unknown,
                    "notes": kv.notes,
                },
                "overhead": _sizes(result.overhead_bytes) | {"rule": result.overhead_rule},
                "total": _sizes(result.total_bytes),
                "capacity": _sizes(result.capacity_bytes),
                "budget": _sizes(result.budget_bytes) | {"headroom": result.headroom_fraction},
            }
        )
    else:
        kv_note = f"{kv.tokens} tokens × {kv.sequences} seq, {kv.kv_dtype}"
        if kv.sliding_layers:
            kv_note += f"; {kv.sliding_layers}/{kv.layers} layers capped at {kv.window}"
        rows = [
            _row("weights", result.weights_bytes, "sum of tensor bytes"),
            _row("kv cache", kv.bytes, kv_note),
            _row("overhead", result.overhead_bytes, result.overhead_rule),
            _row("total", result.total_bytes),
            _row(
                "budget",
                result.budget_bytes,
                f"{1 - headroom:.0%} of {target}'s {(result.capacity_bytes or 0) / GiB:.1f} GiB",
            ),
        ]
        print(table(rows, ["", "bytes", "GB", "GiB", "note"]))
        print(f"verdict: {verdict}" + (f" — {'; '.join(result.reasons)}" if result.reasons else ""))
        for note in kv.notes:
            print(f"note: {note}")
    return 0 if result.fits else 1


def _neuron_fit(name: str, manifest: Any, target: Any, headroom: float, json_out: bool) -> int:
    from modelreg.manifests.fit import neuron_fit

    result = neuron_fit(
        manifest, target.neuron_cores, target.memory_bytes, headroom_fraction=headroom
    )
    verdict = {True: "fits", False: "does not fit", None: "unknown"}[result.fits]
    if json_out:
        emit_json(
            {
                "record": name,
                "target": target.name,
                "verdict": verdict,
                "fits": result.fits,
                "reasons": result.reasons,
                "tp_degree": result.tp_degree,
                "neuron_cores": result.neuron_cores,
                "per_rank": _sizes(result.per_rank_bytes),
                "reserve": _sizes(result.reserve_bytes),
                "core_budget": _sizes(result.core_budget_bytes) | {"headroom": headroom},
                "contributors": [
                    {"name": c.name, "dtype": c.dtype, "placement": c.placement}
                    | _sizes(c.per_rank_bytes)
                    for c in result.contributors
                ],
                "host": _sizes(result.host_bytes) | {"rule": result.host_rule},
                "host_budget": _sizes(result.host_budget_bytes),
                "fits_device": result.fits_device,
                "fits_host": result.fits_host,
            }
        )
    else:
        rows = [
            _row(f"{c.name} ({c.dtype}, {c.placement})", c.per_rank_bytes, "per NeuronCore")
            for c in result.contributors
        ]
        rows += [
            _row("weights per rank", result.per_rank_bytes, f"TP={result.tp_degree}"),
            _row("runtime reserve", result.reserve_bytes, "scratch, I/O, KV cache"),
            _row("core budget", result.core_budget_bytes, f"{1 - headroom:.0%} of 16 GiB HBM"),
            _row("host RAM", result.host_bytes, result.host_rule),
            _row("host budget", result.host_budget_bytes, f"{1 - headroom:.0%} of {target.name}"),
        ]
        print(table(rows, ["", "bytes", "GB", "GiB", "note"]))
        print(f"verdict: {verdict}" + (f" — {'; '.join(result.reasons)}" if result.reasons else ""))
    return 0 if result.fits else 1
