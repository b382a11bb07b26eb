"""What needs no registry: inspect, targets, suite and card files, diff, fit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from modelreg.api.views import _card_output, _suite_output, targets_output
from modelreg.errors import (
    InvalidInput,
)
from modelreg.judging import load_suite_ref
from modelreg.rules import (
    StoredRun,
)
from modelreg.schemas.output import (
    CardValidateOutput,
    DiffOutput,
    DiffSection,
    FitOutput,
    SuiteOutput,
    TargetsOutput,
)

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.manifests.build import BuiltArtifact
    from modelreg.record import Record
    from modelreg.schemas.manifest import Manifest
    from modelreg.schemas.neuron import HostRun
    from modelreg.targets import Target


class ManifestOptions(TypedDict, total=False):
    """The keyword options of ``inspect`` (and of ``Registry.add`` / ``Registry.inspect``)."""

    model_id: str | None
    source: str | None
    license_id: str | None
    prompts: Sequence[str]
    expect: str | None  # what each prompt's answer must contain (None: "Paris")
    recipe: Path | None
    effective_params: int | None
    effective_source: str | None
    base_model: str | None
    total_params: int | None
    active_params: int | None
    params_source: str | None
    compile_host: HostRun | None
    deploy_host: HostRun | None
    trust_cache: bool
    progress: Any


class FitOptions(TypedDict, total=False):
    """The what-ifs of ``fit`` (``Registry.fit``): left out, the target's serving
    configuration decides them."""

    context: int | None
    concurrency: int | None
    kv_dtype: str | None
    overhead: float
    headroom: float
    bits: float | None  # weights at this width from the ledger: a what-if
    quant: str | None  # … or at the width of this llama.cpp type (Q4_K_M)


def known_options(function: str, given: Mapping[str, object], kind: type) -> None:
    """A keyword a caller misspelled is refused by the function it called (not by the one it
    forwards to), as Python words it."""
    for name in given:
        if name not in kind.__annotations__:
            raise TypeError(f"{function}() got an unexpected keyword argument {name!r}")


def inspect(
    paths: Sequence[str | Path],
    *,
    model_id: str | None = None,
    source: str | None = None,
    license_id: str | None = None,
    prompts: Sequence[str] = (),
    expect: str | None = None,
    recipe: Path | None = None,
    effective_params: int | None = None,
    effective_source: str | None = None,
    base_model: str | None = None,
    total_params: int | None = None,
    active_params: int | None = None,
    params_source: str | None = None,
    compile_host: HostRun | None = None,
    deploy_host: HostRun | None = None,
    trust_cache: bool = False,
    progress: Any = None,
) -> BuiltArtifact:
    """Read, digest and describe an artifact — the manifest ``add`` would record — without
    touching a database.

    ``total_params`` / ``active_params`` with ``params_source`` declare counts the artifact
    cannot establish itself (provenance ``declared:<source>``); ``compile_host`` /
    ``deploy_host`` declare a Neuron bundle's measured host peaks when it states none.
    """
    from modelreg.manifests.build import build_manifest
    from modelreg.manifests.recipe import load_recipe
    from modelreg.schemas.manifest import Count, GoldenPrompt

    declared = None
    if expect is not None and not prompts:
        raise InvalidInput("`expect` needs `prompts`", "give the prompt whose answer it checks")
    if any(not given.strip() for given in [*prompts, *([expect] if expect is not None else [])]):
        raise InvalidInput("`prompts` and `expect` must not be empty")
    if (effective_params is None) != (effective_source is None):
        raise InvalidInput("`effective_params` and `effective_source` go together")
    if effective_params is not None:
        if effective_params <= 0:
            raise InvalidInput(f"`effective_params` {effective_params} must be positive")
        declared = Count(value=effective_params, provenance=f"declared:{effective_source}")
    return build_manifest(
        paths,
        model_id=model_id,
        source=source,
        license_id=license_id,
        golden_prompts=[GoldenPrompt(prompt=p, expect=expect or "Paris") for p in prompts],
        recipe=load_recipe(recipe) if recipe else None,
        effective=declared,
        trust_cache=trust_cache,
        base_model=base_model,
        total_params=total_params,
        active_params=active_params,
        params_source=params_source,
        compile_host=compile_host,
        deploy_host=deploy_host,
        progress=progress,
        on_hashing=getattr(progress, "start", None),
    )


def targets(targets_file: Path | None = None) -> TargetsOutput:
    """Every target known without a registry: the built-in ones, and those a targets file
    defines (read, not applied: ``Registry.define_targets`` applies them)."""
    from modelreg import config
    from modelreg.targets import targets_in_file

    return targets_output(targets_in_file(targets_file or config.targets_file()), here=True)


def unapplied_targets(registry_targets: TargetsOutput, path: Path | None = None) -> list[str]:
    """Targets a targets file on this host defines that the registry does not have as
    defined there (none when the file is absent or unreadable): what ``targets apply`` would
    change. No verdict reads the file; this is a note for the person who wrote it."""
    from modelreg import config
    from modelreg.errors import ModelregError
    from modelreg.targets import read_target_specs, spec_as_json, spec_digest

    path = path or config.targets_file()
    try:
        specs = read_target_specs(path)
    except ModelregError:
        return []
    stored = {t.name: t for t in registry_targets.targets}
    found = []
    for name, spec in specs.items():
        known = stored.get(name)
        if known is None or known.spec_sha256 != spec_digest(spec_as_json(spec)):
            found.append(name)
    return found


def check_suite(path: Path) -> SuiteOutput:
    """Validate a suite file (no database): its name, digest, cases and subsets."""
    suite = load_suite_ref(path)
    return _suite_output(None, "check", suite, f"{path}: {len(suite.cases)} cases, valid")


def validate_card_file(path: Path) -> CardValidateOutput:
    """Check a model card on its own (no record, no database)."""
    from modelreg.validators.card import validate_card

    return _card_output(path, validate_card(path), None, None)


def diff(name_a: str, a: Manifest, name_b: str, b: Manifest) -> DiffOutput:
    """What changed from manifest A to manifest B, section by section."""
    from modelreg.manifests.diff import diff_manifests

    result = diff_manifests(a, b)
    return DiffOutput(
        a=name_a,
        b=name_b,
        same_model=result.same_model,
        metadata_only=result.metadata_only,
        changed=result.changed,
        changed_dimensions=result.changed_dimensions,
        attribution_warning=result.attribution_warning,
        notes=result.notes,
        sections={s.name: DiffSection(changed=s.changed, a=s.a, b=s.b) for s in result.sections},
        metadata_keys=result.metadata_keys,
    )


def fit(
    name: str,
    manifest: Manifest,
    target: Target,
    *,
    compile_host: bool = False,
    **options: Unpack[FitOptions],
) -> FitOutput:
    """Weights + KV cache + overhead against ``target``'s memory (Neuron bundles: every
    parameter group resident per NeuronCore under the tp degree, and host RAM apart; each
    recorded layout variant too). ``compile_host``: can ``target`` compile the bundle?"""
    from modelreg.manifests.fit_report import compile_host_report, fit_report

    known_options("fit", options, FitOptions)
    if compile_host:
        if manifest.neuron is None:
            raise InvalidInput(f"{name} is not a Neuron bundle: `compile_host` applies to bundles")
        return compile_host_report(name, manifest, target, options.get("headroom", 0.10))
    return fit_report(name, manifest, target, **options)


def signed_run_problem_for(
    record: Record, target: str, run: StoredRun, statement: dict[str, Any]
) -> str | None:
    from modelreg.signing import run_statement_problem

    digests = {f.path: f.sha256 or "" for f in record.manifest.files}
    return run_statement_problem(statement, record.id, target, run, digests)
