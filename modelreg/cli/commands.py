"""Record commands: inspect, add, show, list."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from modelreg import config
from modelreg.cli.main import JsonOption, _registry, app
from modelreg.cli.render import HashProgress, emit_json, human_bytes, say, table
from modelreg.errors import InvalidInput

PathsArg = Annotated[
    list[str],
    typer.Argument(
        metavar="ARTIFACT...",
        help="A .gguf file (any shard of a split set), a safetensors checkpoint directory, "
        "or hf://org/name@REV from the local Hugging Face cache.",
    ),
]
TrustCacheOption = Annotated[
    bool,
    typer.Option(
        "--trust-cache",
        help="hf:// only: take LFS blob names as the files' sha256 instead of re-hashing.",
    ),
]
ModelIdOption = Annotated[
    str | None,
    typer.Option("--model-id", help="Exact model id, org/name (hf:// sources: the repo id)."),
]
SourceOption = Annotated[
    str | None,
    typer.Option(
        "--source",
        help="Immutable source pin: hf://org/name@<40-hex commit>, pypi://pkg==ver or "
        "sha256:<64-hex>.",
    ),
]
LicenseOption = Annotated[
    str | None, typer.Option("--license", help="License id when the artifact declares none.")
]
PromptOption = Annotated[
    list[str] | None,
    typer.Option("--prompt", help="Golden prompt for the smoke check (repeatable)."),
]
ExpectOption = Annotated[
    str, typer.Option("--expect", help="Text every golden prompt's answer must contain.")
]
EffectiveOption = Annotated[
    int | None,
    typer.Option(
        "--effective-params",
        help="Declared effective parameters (never computed), e.g. Gemma 3n E2B's.",
    ),
]
EffectiveSourceOption = Annotated[
    str | None,
    typer.Option(
        "--effective-source",
        help="Where the effective count is declared, with its condition (URL or card).",
    ),
]
BaseModelOption = Annotated[
    str | None,
    typer.Option("--base-model", help="The model this artifact was made from, org/name."),
]
RecipeOption = Annotated[
    Path | None,
    typer.Option("--recipe", help="Quantization recipe YAML (tool, revision, scheme, ...)."),
]


def _build(
    paths: list[str],
    model_id: str | None,
    source: str | None,
    license_id: str | None,
    prompts: list[str] | None,
    expect: str,
    recipe: Path | None,
    effective: int | None = None,
    effective_source: str | None = None,
    trust_cache: bool = False,
    base_model: str | None = None,
) -> Any:
    from modelreg.manifests.build import build_manifest
    from modelreg.manifests.recipe import load_recipe
    from modelreg.schemas.manifest import Count, GoldenPrompt

    declared = None
    if (effective is None) != (effective_source is None):
        raise InvalidInput("--effective-params and --effective-source go together")
    if effective is not None:
        if effective <= 0:
            raise InvalidInput(f"--effective-params {effective} must be positive")
        declared = Count(value=effective, provenance=f"declared:{effective_source}")
    progress = HashProgress()
    return build_manifest(
        paths,
        model_id=model_id,
        source=source,
        license_id=license_id,
        golden_prompts=[GoldenPrompt(prompt=p, expect=expect) for p in prompts or []],
        recipe=load_recipe(recipe) if recipe else None,
        effective=declared,
        trust_cache=trust_cache,
        base_model=base_model,
        progress=progress,
        on_hashing=progress.start,
    )


@app.command()
def inspect(
    paths: PathsArg,
    model_id: ModelIdOption = None,
    source: SourceOption = None,
    license_id: LicenseOption = None,
    prompt: PromptOption = None,
    expect: ExpectOption = "Paris",
    recipe: RecipeOption = None,
    effective: EffectiveOption = None,
    effective_source: EffectiveSourceOption = None,
    base_model: BaseModelOption = None,
    json_out: JsonOption = False,
) -> int:
    """Print the manifest that `add` would record (no database)."""
    built = _build(
        paths,
        model_id,
        source,
        license_id,
        prompt,
        expect,
        recipe,
        effective,
        effective_source,
        base_model=base_model,
    )
    manifest = built.manifest
    if json_out:
        emit_json(manifest.model_dump(mode="json"))
    else:
        print(_manifest_text(manifest))
    return 0


@app.command()
def add(
    ctx: typer.Context,
    paths: PathsArg,
    model_id: ModelIdOption = None,
    source: SourceOption = None,
    license_id: LicenseOption = None,
    prompt: PromptOption = None,
    expect: ExpectOption = "Paris",
    recipe: RecipeOption = None,
    effective: EffectiveOption = None,
    effective_source: EffectiveSourceOption = None,
    trust_cache: TrustCacheOption = False,
    base_model: BaseModelOption = None,
    json_out: JsonOption = False,
) -> int:
    """Record an artifact: identity, license, parameters, quantization, file digests."""
    built = _build(
        paths,
        model_id,
        source,
        license_id,
        prompt,
        expect,
        recipe,
        effective,
        effective_source,
        trust_cache,
        base_model,
    )
    registry = _registry(ctx)
    record, created = registry.add(built.manifest, built.root, config.actor(), built.resolution)
    if json_out:
        emit_json({"created": created, **_record_json(registry, record)})
    else:
        print(record.id)
        say(f"{'registered' if created else 'already registered'}: {record.id} ({record.model_id})")
        for reason in record.hold_reasons:
            say(f"on hold: {reason}")
    return 0


@app.command()
def show(
    ctx: typer.Context,
    record_ref: Annotated[str, typer.Argument(metavar="RECORD", help="Record id or prefix.")],
    json_out: JsonOption = False,
) -> int:
    """Show one record: manifest, holds, verifications with evidence, deployability."""
    registry = _registry(ctx)
    record = registry.get(record_ref)
    data = _record_json(registry, record)
    if json_out:
        emit_json(data)
        return 0
    print(
        f"record     {record.id}   "
        f"(added {record.created_at:%Y-%m-%d %H:%M} by {record.created_by})"
    )
    print(f"location   {record.root}")
    print(_manifest_text(record.manifest))
    if data["state"]["state"] != "active":
        print(f"STATE      {data['state']['state']}: {data['state']['reason'] or ''}")
    for target, verdict in data["deployability"].items():
        state = "deployable" if verdict["deployable"] else "NOT deployable"
        why = f" — {'; '.join(verdict['reasons'])}" if verdict["reasons"] else ""
        print(f"on {target:<12} {state}{why}")
    if data["verifications"]:
        print()
        rows = [
            (
                v["finished_at"][:19],
                v["target"],
                v["check"],
                v["outcome"],
                v["classification"] or "",
                v["summary"],
            )
            for v in data["verifications"]
        ]
        print(table(rows, ["when", "target", "check", "outcome", "class", "summary"]))
    return 0


@app.command("list")
def list_records(
    ctx: typer.Context,
    model: Annotated[str | None, typer.Option("--model", help="Only this model id.")] = None,
    deployable_on: Annotated[
        str | None,
        typer.Option(
            "--deployable-on",
            help="Only records deployable on this target now (stale evidence is listed "
            "with the runtime change that made it stale).",
        ),
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """List records, oldest first."""
    registry = _registry(ctx)
    if deployable_on:
        return _list_deployable(registry, deployable_on, model, json_out)
    records = registry.records(model)
    if json_out:
        emit_json([r.summary() for r in records])
        return 0
    if not records:
        say("no records — add one with: modelreg add FILE.gguf --model-id org/name --source ...")
        return 0
    rows = []
    for r in records:
        s = r.summary()
        rows.append(
            (
                s["id"],
                s["model_id"],
                s["format"],
                s["license"] or "unknown",
                f"{s['total_parameters']:,}" if s["total_parameters"] is not None else "unknown",
                f"{s['bits_per_weight']:.2f}" if s["bits_per_weight"] else "",
                "hold" if s["on_hold"] else "",
                s["created_at"][:19],
            )
        )
    print(table(rows, ["record", "model", "format", "license", "params", "bpw", "", "added"]))
    return 0


def _record_json(registry: Any, record: Any) -> dict[str, Any]:
    """Everything known about a record, for `show --json` and `add --json`."""
    from modelreg import deploy

    verifications = registry.verifications(record.id)
    targets = sorted({v.target for v in verifications})
    return {
        "record": record.summary()
        | {
            "root": str(record.root),
            "created_by": record.created_by,
            "hold_reasons": record.hold_reasons,
        },
        "manifest": record.manifest.model_dump(mode="json"),
        "state": dict(zip(("state", "reason"), registry.state(record.id), strict=True)),
        "deployability": {
            t: _deployability_json(deploy.deployability(registry, record, t)) for t in targets
        },
        "verifications": [
            {"run_id": v.run_id, "target": v.target, "host": v.host}
            | v.result.model_dump(mode="json")
            for v in verifications
        ],
    }


def _deployability_json(verdict: Any) -> dict[str, Any]:
    return {
        "deployable": verdict.deployable,
        "reasons": verdict.reasons,
        "run_id": verdict.run_id,
        "verified_at": verdict.verified_at.isoformat() if verdict.verified_at else None,
    }


def _count(c: Any) -> str:
    return "unknown" if c.value is None else f"{c.value:,} ({c.provenance})"


def _manifest_text(m: Any) -> str:
    lines = [
        f"model      {m.model_id or 'unknown'}",
        f"source     {m.source or 'unknown'}",
        f"license    {m.license.id or 'unknown'} (from {m.license.source})",
        f"base model {m.base_model or 'unknown'}",
        f"format     {m.format}   runtime {m.runtime.runtime}",
    ]
    a = m.architecture
    if a.architecture:
        lines.append(
            f"arch       {a.architecture}  layers {a.block_count}  hidden {a.embedding_length}  "
            f"heads {a.head_count}/{a.head_count_kv} kv  context {a.context_length}"
            + (f"  experts {a.expert_used_count}/{a.expert_count}" if a.expert_count else "")
        )
    p = m.parameters
    lines += [
        f"params     total {_count(p.total)}",
        f"           non-embedding {_count(p.non_embedding)}",
        f"           active {_count(p.active)}   effective {_count(p.effective)}",
    ]
    q = m.quantization
    if q:
        by_count = sorted(q.tensor_types.items(), key=lambda kv: (-kv[1].tensors, kv[0]))
        hist = ", ".join(f"{k} {v.tensors}" for k, v in by_count)
        bpw = f"{q.bits_per_weight:.2f}" if q.bits_per_weight is not None else "unknown"
        lines.append(
            f"quant      {q.nominal_file_type or 'unknown'} nominal, {bpw} real bits/weight"
        )
        lines.append(f"           tensors: {hist}")
    for f in m.files:
        lines.append(f"file       {f.path}  {human_bytes(f.bytes)}  sha256:{f.sha256}")
    for reason in m.hold_reasons:
        lines.append(f"HOLD       {reason}")
    return "\n".join(lines)


def _list_deployable(registry: Any, target: str, model: str | None, json_out: bool) -> int:
    from modelreg import deploy

    rows = [
        (record, verdict)
        for record, verdict in deploy.records_on(registry, target, model)
        if verdict.deployable or any(r.startswith("stale:") for r in verdict.reasons)
    ]
    if json_out:
        emit_json(
            [
                record.summary() | {"target": target} | _deployability_json(verdict)
                for record, verdict in rows
            ]
        )
        return 0
    if not rows:
        say(
            f"no record is deployable on {target} — verify one with: modelreg verify RECORD "
            f"--target {target}"
        )
        return 0
    print(
        table(
            [
                (
                    record.id,
                    record.model_id,
                    record.format,
                    "deployable" if verdict.deployable else "; ".join(verdict.reasons),
                    f"{verdict.verified_at:%Y-%m-%d %H:%M}" if verdict.verified_at else "",
                )
                for record, verdict in rows
            ],
            ["record", "model", "format", f"on {target}", "verified"],
        )
    )
    return 0
