"""Registry-wide commands: diff, fit, export, import, db upgrade."""

from __future__ import annotations

import json
import math
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from modelreg.cli.app import JsonOption, TargetOption, app, registry
from modelreg.cli.render import emit, out, say, say_next, table
from modelreg.errors import InvalidInput

_REF_HELP = "Record id/prefix or manifest .json."


@app.command()
def diff(
    ctx: typer.Context,
    a: Annotated[str, typer.Argument(metavar="A", help=_REF_HELP)],
    b: Annotated[str, typer.Argument(metavar="B", help=_REF_HELP)],
    json_out: JsonOption = False,
) -> int:
    """What changed from A to B: identity, source, license, ledger, weights, quantization,
    tokenizer/template, config, runtime, files, golden prompts. Exit 0 even when they differ."""
    from modelreg import api

    if all(Path(r).suffix == ".json" and Path(r).is_file() for r in (a, b)):
        from modelreg.schemas.manifest import read_manifest_file

        result = api.diff(a, read_manifest_file(Path(a)), b, read_manifest_file(Path(b)))
    else:
        result = registry(ctx).diff(a, b)
    if json_out:
        emit(result)
        return 0
    out(f"a: {result.a}")
    out(f"b: {result.b}")
    for note in result.notes:
        out(note)
    rows = [(name, "changed" if s.changed else "same") for name, s in result.sections.items()]
    print(table(rows, ["section", ""]))
    if result.attribution_warning:
        say(f"warning: {result.attribution_warning}")
    return 0


def _positive_finite(name: str, value: float, low: float = 0.0, high: float | None = None) -> None:
    if not math.isfinite(value) or value < low or (high is not None and value >= high):
        bound = f" and below {high}" if high is not None else ""
        raise InvalidInput(f"{name} {value} must be a finite number ≥ {low}{bound}")


@app.command()
def fit(
    ctx: typer.Context,
    record_ref: Annotated[
        str,
        typer.Argument(
            metavar="RECORD|PATH",
            help="Record id/prefix, a manifest .json file, or an artifact read without hashing "
            "(a .gguf file, a safetensors checkpoint or Neuron bundle directory, "
            "hf://org/name@REV).",
        ),
    ],
    target: TargetOption = "cpu",
    context: Annotated[
        int | None,
        typer.Option(
            "--context",
            min=1,
            help="Tokens of context per sequence (default: what TARGET serves, else "
            "min(4096, trained context)).",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency", min=1, help="Sequences held at once (default: TARGET's, else 1)."
        ),
    ] = None,
    kv_dtype: Annotated[
        str | None,
        typer.Option(
            "--kv-dtype",
            help="KV cache element type: f16, bf16, f32, q8_0, q5_1, q5_0, q4_1, q4_0, iq4_nl "
            "(default: TARGET's, else f16).",
        ),
    ] = None,
    overhead: Annotated[
        float, typer.Option("--overhead", help="Runtime overhead as a fraction of weights.")
    ] = 0.10,
    headroom: Annotated[
        float, typer.Option("--headroom", help="Fraction of memory kept free.")
    ] = 0.10,
    bits: Annotated[
        float | None,
        typer.Option(
            "--bits",
            help="What-if: weights at B bits per weight from the parameter ledger (total × B "
            "÷ 8), not the artifact's tensors; KV cache and overhead as always.",
        ),
    ] = None,
    quant: Annotated[
        str | None,
        typer.Option(
            "--quant",
            metavar="TYPE",
            help="What-if: weights at the width of a llama.cpp type (Q4_K_M: 4.5 bits).",
        ),
    ] = None,
    compile_host: Annotated[
        str | None,
        typer.Option(
            "--compile-host",
            metavar="TARGET",
            help="Neuron bundles: can TARGET compile it (peak host RAM and swap)?",
        ),
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Weights + KV cache + overhead against TARGET's memory; exit 0 only if it fits. Neuron
    bundles: every parameter group must be resident (else 'incomplete'), and every recorded
    layout variant is shown."""

    _positive_finite("--overhead", overhead)
    _positive_finite("--headroom", headroom, high=1.0)
    options: dict[str, Any] = {"headroom": headroom}
    if compile_host is not None:
        options["compile_host"] = True
        target = compile_host
    else:
        options |= {
            "context": context,
            "concurrency": concurrency,
            "kv_dtype": kv_dtype,
            "overhead": overhead,
        }
        if bits is not None or quant is not None:
            options |= {"bits": bits, "quant": quant}
    # A record or a manifest file alike: targets resolve as in every command (shared ones too).
    result = registry(ctx).fit(record_ref, target, **options)
    if json_out:
        emit(result)
        return 0 if result.fits else 1
    rows = [
        (
            line.name,
            "unknown" if line.sizes.bytes is None else f"{line.sizes.bytes:,}",
            "" if line.sizes.GB is None else f"{line.sizes.GB:.3f}",
            "" if line.sizes.GiB is None else f"{line.sizes.GiB:.3f}",
            line.note,
        )
        for line in result.lines
    ]
    print(table(rows, ["", "bytes", "GB", "GiB", "note"]))
    if result.what_if is not None:
        w = result.what_if
        recorded = w.recorded_weights.GiB
        out(
            f"what-if: weights at {w.bits:g} bits per weight"
            + (f" ({w.quant})" if w.quant else "")
            + f" from {w.parameters:,} parameters — not this artifact"
            + (f" (its tensors: {recorded:.3f} GiB)" if recorded is not None else "")
        )
    out(
        f"verdict: {result.verdict}" + (f" — {'; '.join(result.reasons)}" if result.reasons else "")
    )
    for group in result.detail.get("missing_groups", []):
        out(f"not resident: {group} — no module of the bundle holds it")
    for layout in result.detail.get("layouts", [])[1:]:
        line = f"variant '{layout['layout']}': {layout['verdict']}"
        per_rank = layout["per_rank"]["GiB"]
        if per_rank is not None:
            line += f" at {per_rank:.2f} GiB of weights per NeuronCore"
        if layout["reasons"]:
            line += f" — {layout['reasons'][0]}"
        out(line)
        if layout.get("observed"):
            out(f"  observed: {layout['observed']}")
    notes = [*result.detail.get("kv_cache", {}).get("notes", []), *result.detail.get("notes", [])]
    for note in notes:
        out(f"note: {note}")
    return 0 if result.fits else 1


class ExportFormat(StrEnum):
    REGISTRY = "registry"
    CYCLONEDX = "cyclonedx"


@app.command("export")
def export(
    ctx: typer.Context,
    subject: Annotated[
        str | None,
        typer.Argument(
            help="registry format: the FILE to write (default: stdout); cyclonedx: the RECORD "
            "(id or prefix) or MODEL (ORG/NAME) the BOM describes.",
            metavar="[FILE | RECORD | MODEL]",
        ),
    ] = None,
    export_format: Annotated[
        ExportFormat,
        typer.Option(
            "--format",
            help="registry: the whole registry as JSON lines (import reads it); cyclonedx: a "
            "CycloneDX 1.6 ML-BOM of a record or model.",
        ),
    ] = ExportFormat.REGISTRY,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="File to write (default: stdout)."),
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Write the whole registry as JSON lines (records, evidence, promotions, states, events),
    ending with a trailer (row counts and a digest): a cut-short file is refused by import.
    With --format cyclonedx: a CycloneDX 1.6 ML-BOM of RECORD or MODEL (files and their
    sha256, license, base model, model card with the parameter ledger and quantization, suite
    results of the runs that count, the runtime, the evidence)."""
    if export_format is ExportFormat.CYCLONEDX:
        if subject is None:
            raise InvalidInput(
                "export --format cyclonedx names a RECORD or MODEL",
                "e.g. modelreg export --format cyclonedx r_0123abcd -o bom.cdx.json",
            )
        document = registry(ctx).cyclonedx(subject, output)
        if output is None:
            sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
        else:
            say(f"wrote a CycloneDX {document['specVersion']} BOM of {subject} to {output}")
        return 0
    if subject is not None and output is not None:
        raise InvalidInput("give the output FILE once: as the argument or as --output")
    target = output or (Path(subject) if subject is not None else None)
    if target is None and json_out:
        raise InvalidInput("--json needs an output FILE (stdout carries the export itself)")
    result = registry(ctx).export(target)
    if json_out:
        emit(result)
    else:
        say(
            f"exported {result.rows} rows"
            + (f" to {target}" if target else "")
            + f" (sha256 {result.sha256})"
        )
    return 0


@app.command("import")
def import_(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="A file written by modelreg export.")],
    with_targets: Annotated[
        bool,
        typer.Option(
            "--with-targets",
            help="Also define the file's shared targets here (they decide which keys a "
            "target trusts: import them only from a file you trust).",
        ),
    ] = False,
    json_out: JsonOption = False,
) -> int:
    """Load an export into this registry, all or nothing (e.g. SQLite -> PostgreSQL)."""
    result = registry(ctx).import_(path, with_targets=with_targets)
    if json_out:
        emit(result)
        return 0
    say("imported " + ", ".join(f"{n} {kind}s" for kind, n in sorted(result.counts.items())))
    if result.skipped.get("target"):
        say(
            f"not imported: {result.skipped['target']} shared target definition(s) "
            "(they decide which keys a target trusts; add --with-targets to import them)"
        )
    return 0


db_app = typer.Typer(
    help="The registry database: schema upgrades, values that cannot be read back.",
    no_args_is_help=True,
)
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(ctx: typer.Context, json_out: JsonOption = False) -> int:
    """Upgrade the registry's schema to this modelreg's (safe to run from many hosts at once).
    A shared PostgreSQL registry is upgraded only this way; SQLite upgrades itself."""
    from modelreg import api, config
    from modelreg.schemas.output import DbOutput

    db = ctx.obj.get("db") if ctx.obj else None
    before, after = api.upgrade(db)
    result = DbOutput(
        url=api.redact(config.database_url(db)),
        revision_before=before,
        revision=after,
        changed=before != after,
    )
    if json_out:
        emit(result)
    else:
        say(
            f"schema upgraded {before or 'empty'} → {after}"
            if result.changed
            else f"schema already at {after}"
        )
    return 0


@db_app.command("check")
def db_check(
    ctx: typer.Context,
    quarantine: Annotated[
        bool,
        typer.Option(
            "--quarantine",
            help="Make each value readable (lone surrogates → U+FFFD, JSON nested too deep → a "
            "note), with an event per row.",
        ),
    ] = False,
    json_out: JsonOption = False,
) -> int:
    """Name every stored value that cannot be read back (exit 1 when there is one and it was
    not quarantined)."""
    result = registry(ctx).db_check(quarantine=quarantine)
    if json_out:
        emit(result)
    else:
        for bad in result.bad:
            out(f"{bad.table} {bad.key} {bad.column}: {bad.why}")
        say(result.message)
        say_next(result)
    return 1 if result.bad and not result.quarantined else 0
