"""Record commands: inspect, add, show, list."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from modelreg.cli.app import JsonOption, RecordArg, app, registry
from modelreg.cli.render import HashProgress, emit, human_bytes, out, say, table

if TYPE_CHECKING:
    from modelreg.schemas.output import DeployabilityOut, RecordOut


# How a search result matched, as a word (a sha256 match names its file instead).
_MATCHED = {"record_id": "record id", "model_id": "model id"}


def named(record: RecordOut) -> str:
    """A record as a person types it: ``v3 r_0a1b2c3d4e5f`` (its model's version, its id)."""
    return f"v{record.version} {record.record_id}" if record.version else record.record_id


PathsArg = Annotated[
    list[str],
    typer.Argument(
        metavar="ARTIFACT...",
        help="A .gguf file (any shard of a split set), a safetensors checkpoint directory, "
        "a Neuron bundle directory, or hf://org/name@REV from the local Hugging Face cache.",
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
    str | None,
    typer.Option("--expect", help="Text every golden prompt's answer must contain (Paris)."),
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
    typer.Option(
        "--base-model",
        help="The model this artifact was made from: org/name@<40-hex commit> (or "
        "@sha256:<64-hex> of its weights). Without a revision a quantized record is held.",
    ),
]
TotalParamsOption = Annotated[
    int | None,
    typer.Option("--total-params", min=1, help="Declared total parameters (with --params-source)."),
]
ActiveParamsOption = Annotated[
    int | None,
    typer.Option(
        "--active-params", min=1, help="Declared active parameters (with --params-source)."
    ),
]
ParamsSourceOption = Annotated[
    str | None,
    typer.Option("--params-source", help="Where the declared counts are published (URL)."),
]
CompilePeakOption = Annotated[
    float | None,
    typer.Option("--compile-peak-gib", min=0, help="Neuron: peak host RAM the compile took."),
]
CompileSwapOption = Annotated[
    float | None,
    typer.Option("--compile-swap-gib", min=0, help="Neuron: swap the compile needed."),
]
DeployPeakOption = Annotated[
    float | None,
    typer.Option("--deploy-peak-gib", min=0, help="Neuron: peak host RSS at deploy (load)."),
]
DeploySwapOption = Annotated[
    float | None,
    typer.Option("--deploy-swap-gib", min=0, help="Neuron: swap the deploy needed."),
]
ColdStartOption = Annotated[
    float | None,
    typer.Option("--cold-start-seconds", min=0, help="Neuron: deploy start to ready."),
]
HostSourceOption = Annotated[
    str | None,
    typer.Option("--host-source", help="Where the compile/deploy host figures come from."),
]
LocationOption = Annotated[
    list[str] | None,
    typer.Option(
        "--location",
        help="Another URL its bytes can be fetched from (repeatable): file://HOST/path, "
        "hf://org/name@COMMIT, s3://bucket/prefix, oci://registry/repo@sha256:…; this host's "
        "path is recorded anyway.",
    ),
]
RecipeOption = Annotated[
    Path | None,
    typer.Option("--recipe", help="Quantization recipe YAML (tool, revision, scheme, ...)."),
]


GiB = 1 << 30

# The options that go into a manifest — name, typer annotation, default — shared by `add` and
# `inspect`, so that the same options give the same record id whichever built the manifest.
MANIFEST_OPTIONS: tuple[tuple[str, Any, Any], ...] = (
    ("model_id", ModelIdOption, None),
    ("source", SourceOption, None),
    ("license_id", LicenseOption, None),
    ("prompt", PromptOption, None),
    ("expect", ExpectOption, None),
    ("recipe", RecipeOption, None),
    ("effective", EffectiveOption, None),
    ("effective_source", EffectiveSourceOption, None),
    ("trust_cache", TrustCacheOption, False),
    ("base_model", BaseModelOption, None),
    ("total_params", TotalParamsOption, None),
    ("active_params", ActiveParamsOption, None),
    ("params_source", ParamsSourceOption, None),
    ("compile_peak_gib", CompilePeakOption, None),
    ("compile_swap_gib", CompileSwapOption, None),
    ("deploy_peak_gib", DeployPeakOption, None),
    ("deploy_swap_gib", DeploySwapOption, None),
    ("cold_start_seconds", ColdStartOption, None),
    ("host_source", HostSourceOption, None),
)


def manifest_options(command: Callable[..., int]) -> Callable[..., int]:
    """Give ``command`` every manifest option (``MANIFEST_OPTIONS``) in place of its
    ``manifest`` parameter, which receives them as ``modelreg.inspect``'s keyword options."""
    from functools import wraps
    from inspect import Parameter, Signature

    own = Signature.from_callable(command, eval_str=True)
    group = [
        Parameter(name, Parameter.POSITIONAL_OR_KEYWORD, default=default, annotation=annotation)
        for name, annotation, default in MANIFEST_OPTIONS
    ]
    parameters = [
        q for p in own.parameters.values() for q in (group if p.name == "manifest" else [p])
    ]

    @wraps(command)
    def with_manifest_options(**given: Any) -> int:
        flags = {name: given.pop(name) for name, _, _ in MANIFEST_OPTIONS}
        return command(**given, manifest=_manifest_options(**flags))

    # typer reads the parameters from the signature (and their annotations).
    with_manifest_options.__signature__ = own.replace(parameters=parameters)  # type: ignore[attr-defined]
    with_manifest_options.__annotations__ = {p.name: p.annotation for p in parameters}
    return with_manifest_options


def _host_run(
    job: str, peak: float | None, swap: float | None, seconds: float | None, source: str | None
) -> Any:
    from modelreg.errors import InvalidInput
    from modelreg.schemas.neuron import HostRun

    if peak is None and swap is None and seconds is None:
        return None
    for name, value in ((f"--{job}-peak-gib", peak), (f"--{job}-swap-gib", swap)):
        if value is not None and not math.isfinite(value):
            raise InvalidInput(f"{name} {value} must be a finite number")
    if seconds is not None and not math.isfinite(seconds):
        raise InvalidInput(f"seconds {seconds} must be a finite number")
    if not source:
        raise InvalidInput(f"--{job}-… figures need --host-source (where they were measured)")
    return HostRun(
        peak_rss_bytes=int(peak * GiB) if peak is not None else None,
        swap_bytes=int(swap * GiB) if swap is not None else None,
        seconds=seconds,
        source=f"declared:{source}",
    )


def _manifest_options(
    *,
    model_id: str | None,
    source: str | None,
    license_id: str | None,
    prompt: list[str] | None,
    expect: str | None,
    recipe: Path | None,
    effective: int | None,
    effective_source: str | None,
    trust_cache: bool,
    base_model: str | None,
    total_params: int | None,
    active_params: int | None,
    params_source: str | None,
    compile_peak_gib: float | None,
    compile_swap_gib: float | None,
    deploy_peak_gib: float | None,
    deploy_swap_gib: float | None,
    cold_start_seconds: float | None,
    host_source: str | None,
) -> dict[str, Any]:
    """The manifest flags as ``modelreg.inspect``'s keyword options (``ManifestOptions``)."""
    return {
        "model_id": model_id,
        "source": source,
        "license_id": license_id,
        "prompts": prompt or [],
        "expect": expect,
        "recipe": recipe,
        "effective_params": effective,
        "effective_source": effective_source,
        "trust_cache": trust_cache,
        "base_model": base_model,
        "total_params": total_params,
        "active_params": active_params,
        "params_source": params_source,
        "compile_host": _host_run("compile", compile_peak_gib, compile_swap_gib, None, host_source),
        "deploy_host": _host_run(
            "deploy", deploy_peak_gib, deploy_swap_gib, cold_start_seconds, host_source
        ),
    }


@app.command()
@manifest_options
def inspect(paths: PathsArg, manifest: dict[str, Any], json_out: JsonOption = False) -> int:
    """Print the manifest that `add` would record (no database): the same options give the
    same record id, and its --json is what POST /api/v1/records takes."""
    from modelreg.api import inspect as inspect_artifact
    from modelreg.schemas.output import InspectOutput

    built = inspect_artifact(paths, progress=HashProgress(), **manifest)
    if json_out:
        emit(
            InspectOutput(
                record_id=built.manifest.record_id,
                manifest=built.manifest.model_dump(mode="json"),
            )
        )
    else:
        for line in manifest_lines(built.manifest):
            out(line)
    return 0


@app.command()
@manifest_options
def add(
    ctx: typer.Context,
    paths: PathsArg,
    manifest: dict[str, Any],
    signature: Annotated[
        Path | None,
        typer.Option(
            "--signature",
            help="A model-signing bundle over the artifact (model_signing sign key …); its "
            "digests must be the artifact's.",
        ),
    ] = None,
    location: LocationOption = None,
    json_out: JsonOption = False,
) -> int:
    """Record an artifact: identity, license, parameters, quantization, file digests, and
    where its bytes can be fetched."""
    result = registry(ctx).add(
        paths,
        signature=signature,
        progress=HashProgress(),
        locations=location or [],
        **manifest,
    )
    if json_out:
        emit(result)
        return 0
    record = result.record
    out(record.record_id)
    say(
        f"{'registered' if result.created else 'already registered'}: {record.record_id} "
        f"({record.model_id})"
    )
    if record.state.state == "retired":
        say(
            f"{record.record_id} is retired ({record.state.reason}): the same bytes and facts "
            "are the same record, and it stays retired"
        )
    for reason in record.hold_reasons:
        say(f"on hold: {reason}")
    for note in result.notes:
        say(f"note: {note}")
    return 0


def deployability_text(verdict: DeployabilityOut) -> str:
    if verdict.deployable:
        return "deployable"
    return "NOT deployable — " + "; ".join(r.message for r in verdict.reasons)


def unit_text(unit: dict[str, str]) -> str:
    """A target's deployed unit on one line: ``image …; launch …; forbidden flags …``."""
    return "; ".join(f"{key} {value}" for key, value in unit.items())


def state_text(record: RecordOut) -> str:
    """The record's effective state, with why it is held when only its own facts hold it."""
    if record.state.state == "active" and record.effective_state == "held":
        from modelreg.reasons import ReasonCode, hold_code

        codes = dict.fromkeys(hold_code(r) for r in record.hold_reasons)
        why = [
            "facts unknown" if c is ReasonCode.FACT_UNKNOWN else c.value.replace("_", " ")
            for c in codes
        ]
        return f"held ({', '.join(why)})"
    return record.effective_state


@app.command()
def show(
    ctx: typer.Context,
    record_ref: RecordArg,
    runtime: Annotated[
        bool,
        typer.Option(
            "--runtime", help="Also print each run's whole runtime fingerprint, one per line."
        ),
    ] = False,
    runs: Annotated[
        int,
        typer.Option(
            "--runs",
            min=0,
            help="Show the newest N runs, newest first; older ones are folded into one line "
            "(0: every run; --json always has every run).",
        ),
    ] = 5,
    json_out: JsonOption = False,
) -> int:
    """One record: manifest, state, where it is production, deployability, evidence (the
    newest runs first)."""
    from modelreg.fingerprint import summary
    from modelreg.schemas.manifest import Manifest

    shown = registry(ctx).show(record_ref)
    if json_out:
        emit(shown)
        return 0
    record = shown.record
    out(
        f"record     {named(record)}   (added {record.created_at:%Y-%m-%d %H:%M} UTC by "
        f"{record.created_by})"
    )
    out(f"location   {record.location}")
    for line in manifest_lines(Manifest.model_validate(shown.manifest, context={"stored": True})):
        out(line)
    out(
        f"state      {state_text(record)}"
        + (f": {record.state.reason}" if record.state.reason else "")
    )
    for now, p in [(True, p) for p in shown.production] + [(False, p) for p in shown.approvals]:
        out(
            f"{'production on' if now else 'promoted to'} {p.target}"
            + f"{' since' if now else ''} {p.at:%Y-%m-%d %H:%M} UTC by {p.actor}"
            + (f" ({p.why})" if p.why else "")
            + (f", labelled {p.label}" if p.label else "")
            + ("" if now else " — not production there now")
        )
        # The approval it was promoted with: who answers for it, until when, what it cannot do.
        if p.owner:
            out(f"  owner {p.owner}")
        if p.retest_by:
            out(f"  re-test by {p.retest_by.isoformat()}")
        for text in p.limitations:
            out(f"  known limitation: {text}")
    for verdict in shown.deployability:
        out(f"on {verdict.target:<12} {deployability_text(verdict)}")
    for target, unit in shown.units.items():
        out(f"unit on {target:<9} {unit_text(unit)}")
    newest = list(reversed(shown.runs))
    folded = newest[runs:] if runs else []
    newest = newest[:runs] if runs else newest
    if newest:
        out()
        rows = [
            (
                f"{c.finished_at:%Y-%m-%d %H:%M:%S}",
                run.target,
                "one-off" if run.exploratory else run.origin,
                c.check,
                c.outcome.value,
                c.classification or "",
                c.summary,
            )
            for run in newest
            for c in run.checks
        ]
        print(
            table(rows, ["when (UTC)", "target", "origin", "check", "outcome", "class", "summary"])
        )
        for run in newest:
            kind = "one-off run (not counted)" if run.exploratory else f"{run.origin} run"
            out(f"{kind} {run.run_id} on {run.target}: {summary(run.fingerprint)}")
            if runtime:
                for key, value in sorted(run.fingerprint.items()):
                    out(f"  {key}  {value}")
        if folded:
            out(
                f"{len(folded)} older run(s), {folded[-1].checks[0].finished_at:%Y-%m-%d} to "
                f"{folded[0].checks[0].finished_at:%Y-%m-%d}, not shown (--runs 0 shows all)"
                if all(r.checks for r in folded)
                else f"{len(folded)} older run(s) not shown (--runs 0 shows all)"
            )
        from modelreg.schemas.verification import generations

        failing = [
            (run.target, c, g)
            for run in newest[:1]
            for c in run.checks
            for g in generations(c.evidence)
            if g.get("classification") not in (None, "pass")
        ]
        for target, check, gen in failing:
            out(
                f"failed case on {target} ({check.check}): {gen.get('prompt')!r} -> "
                f"{gen.get('output')!r} [{gen.get('classification')}]"
            )
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
    state: Annotated[
        str | None,
        typer.Option(
            "--state",
            help="Only records in this state: active, held (held, or a hold applies), retired.",
        ),
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """List records, oldest first, with their state (and deployability with --deployable-on)."""
    listed = registry(ctx).records(model, deployable_on=deployable_on, state=state)
    if json_out:
        emit(listed)
        return 0
    if not listed.records:
        if deployable_on:
            say(
                f"no record is deployable on {deployable_on} — verify one with: modelreg verify "
                f"RECORD --target {deployable_on}"
            )
        else:
            say("no records — add one with: modelreg add FILE.gguf --model-id org/name --source …")
        return 0
    headers = [
        "record",
        "version",
        "model",
        "format",
        "license",
        "params",
        "bpw",
        "state",
        "added (UTC)",
    ]
    if deployable_on:
        headers.append(f"on {deployable_on}")
    rows = []
    for item in listed.records:
        r = item.record
        row = [
            r.record_id,
            f"v{r.version}" if r.version else "",
            r.model_id,
            r.format,
            r.license or "unknown",
            f"{item.total_parameters:,}" if item.total_parameters is not None else "unknown",
            "unknown" if item.bits_per_weight is None else f"{item.bits_per_weight:.2f}",
            state_text(r),
            f"{r.created_at:%Y-%m-%d %H:%M}",
        ]
        if item.deployability is not None:
            row.append(deployability_text(item.deployability))
        rows.append(row)
    print(table(rows, headers))
    return 0


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[
        str,
        typer.Argument(
            help="A record id or a prefix of one (r_3f2a…), a file's sha256 or 8+ hex "
            "digits of it, or a part of a model id (smollm2).",
            show_default=False,
        ),
    ],
    limit: Annotated[
        int, typer.Option("--limit", min=1, max=200, help="At most this many records.")
    ] = 50,
    json_out: JsonOption = False,
) -> int:
    """Find records by record id prefix, by any file's sha256 (which file matched is named)
    or by a part of their model's id, newest first. Exit 1 when none does."""
    found = registry(ctx).search(query, limit=limit)
    if json_out:
        emit(found)
        return 0 if found.matches else 1
    if not found.matches:
        say(f"no record id or file's sha256 starts with {found.query!r}, and no model id holds it")
        return 1
    rows = [
        [
            m.record.record_id,
            m.record.model_id,
            state_text(m.record),
            f"file {m.file}" if m.matched == "sha256" else _MATCHED[m.matched],
            f"{m.record.created_at:%Y-%m-%d %H:%M}",
        ]
        for m in found.matches
    ]
    print(table(rows, ["record", "model", "state", "matched", "added (UTC)"]))
    if found.truncated:
        say(f"more records match: showing the newest {limit} (--limit)")
    return 0


def _count(c: Any) -> str:
    return "unknown" if c.value is None else f"{c.value:,} ({c.provenance})"


def _base_model(m: Any) -> str:
    if m.base_model is None:
        return "unknown"
    return f"{m.base_model}@{m.base_model_revision or '(revision unknown)'}"


def _label_verdict(check: Any) -> str:
    verdicts = {f.consistent for f in check.findings}
    if False in verdicts:
        return "contradicts the tensors"
    return "count unknown" if None in verdicts else "matches the tensors"


def _named(what: str, name: str | None, sha256: str | None) -> list[str]:
    """``what NAME sha256:…`` for a recipe input given by name and / or digest."""
    given = [v for v in (name, f"sha256:{sha256}" if sha256 else None) if v]
    return [f"{what} {' '.join(given)}"] if given else []


def _recipe_lines(m: Any) -> list[str]:
    from modelreg.manifests.provenance import is_quantized

    q = m.quantization
    r = q.recipe if q is not None else None
    lines = []
    if r is not None:
        parts = [
            (r.tool or "tool unknown") + (f" {r.tool_revision}" if r.tool_revision else ""),
            f"scheme {r.scheme or 'unknown'}",
            *([f"group {r.group_size}"] if r.group_size else []),
            *([f"from {r.source_type}"] if r.source_type else []),
            *_named("imatrix", r.importance_matrix_file, r.importance_matrix_sha256),
            *_named("calibration", r.calibration_set, r.calibration_set_sha256),
            *([f"excluded {', '.join(r.excluded_tensors)}"] if r.excluded_tensors else []),
        ]
        lines.append(f"recipe     {', '.join(parts)}")
        if r.requantized:
            lines.append(
                f"           requantized (from {r.source_type or 'a quantized file'}"
                + (", --allow-requantize" if r.allow_requantize else "")
                + "): can lose far more quality than quantizing from 16 or 32 bits"
            )
        if r.notes:
            lines.append(f"           notes: {r.notes}")
    elif is_quantized(m):
        lines.append("recipe     unknown (give --recipe recipe.yaml)")
    i = q.importance_matrix if q is not None else None
    if i is not None:
        counts = [
            f"{name} {value}"
            for name, value in (("entries", i.entries_count), ("chunks", i.chunks_count))
            if value is not None
        ]
        lines.append(
            f"imatrix    {i.file or 'file unknown'}, dataset {i.dataset or 'unknown'}"
            + (f", {', '.join(counts)}" if counts else "")
            + f" ({i.source})"
        )
    return lines


def _arch_line(a: Any) -> str:
    """``arch  llama  layers 30  hidden 576  heads 9/3 kv  context 8,192``: the figures the
    artifact states, then those it does not, named as unknown (never "None")."""

    def n(value: int | None) -> str | None:
        return None if value is None else f"{value:,}"

    heads, kv = a.head_count, a.head_count_kv
    figures = [("layers", n(a.block_count)), ("hidden", n(a.embedding_length))]
    if heads is not None and kv is not None:
        figures.append(("heads", f"{heads:,}/{kv:,} kv"))
    else:
        figures += [("heads", n(heads)), ("kv heads", n(kv))]
    figures.append(("context", n(a.context_length)))
    if a.expert_count:
        used = a.expert_used_count
        figures.append(("experts", f"{used:,}/{a.expert_count:,}" if used is not None else None))
    shown = "  ".join(f"{name} {text}" for name, text in figures if text is not None)
    unknown = [name for name, text in figures if text is None]
    gaps = f"  ({', '.join(unknown)} unknown)" if unknown else ""
    return f"arch       {a.architecture}  {shown}{gaps}".rstrip()


def manifest_lines(m: Any) -> list[str]:
    lines = [
        f"model      {m.model_id or 'unknown'}",
        f"source     {m.source or 'unknown'}",
        f"license    {m.license.id or 'unknown'} (from {m.license.source})",
        f"base model {_base_model(m)}",
        f"format     {m.format}   runtime {m.runtime.runtime}",
    ]
    if m.architecture.architecture:
        lines.append(_arch_line(m.architecture))
    p = m.parameters
    lines += [
        f"params     total {_count(p.total)}",
        f"           non-embedding {_count(p.non_embedding)}",
        f"           active {_count(p.active)}   effective {_count(p.effective)}",
    ]
    lines += [
        f"{'labels' if i == 0 else '':<10} {c.label!r} ({c.source}) {_label_verdict(c)}"
        for i, c in enumerate(m.label_checks)
    ]
    q = m.quantization
    if q and (q.tensor_types or q.nominal_file_type):
        by_count = sorted(q.tensor_types.items(), key=lambda kv: (-kv[1].tensors, kv[0]))
        hist = ", ".join(f"{k} {v.tensors}" for k, v in by_count)
        bpw = f"{q.bits_per_weight:.2f}" if q.bits_per_weight is not None else "unknown"
        lines.append(
            f"quant      {q.nominal_file_type or 'unknown'} nominal, {bpw} real bits/weight"
        )
        lines.append(f"           tensors: {hist}")
    lines += _recipe_lines(m)
    for f in m.files:
        lines.append(f"file       {f.path}  {human_bytes(f.bytes)}  sha256:{f.sha256}")
    for reason in m.hold_reasons:
        lines.append(f"HOLD       {reason}")
    # What a scan found that holds nothing (hidden characters in a card or metadata): said,
    # since only its holds would otherwise show.
    for finding in m.findings:
        if not finding.holds:
            where = f" {finding.where}" if finding.where else ""
            lines.append(f"finding    {finding.code} in {finding.file}{where}: {finding.message}")
    return lines
