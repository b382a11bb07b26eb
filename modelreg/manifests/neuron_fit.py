"""Will a Neuron bundle fit: every parameter group resident per NeuronCore, host RAM at
deploy, host RAM at compile — and how long a verify must wait for it to load.

A fit is only as good as its inventory. The residency a bundle declares (its ``modules``) is
checked against the parameter groups its config implies (embeddings, lm_head, attention,
router, experts, dense / shared MLP, norms): a group that no module holds, or holds with fewer
bytes than its parameters need at the declared dtype (beyond a stated tolerance), makes the
verdict ``incomplete`` — never ``fits``. Forgetting the tied 262k-row lm_head is exactly how
the Gemma-4 inf2 port came out 1.5 GB per core short of what it thought it had.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from modelreg.errors import InvalidInput
from modelreg.manifests.neuron_dtypes import dtype_bytes
from modelreg.schemas.manifest import PARAMETER_GROUPS, Manifest, NeuronModule

if TYPE_CHECKING:
    from modelreg.targets import Target

GB, GiB = 10**9, 1 << 30
NEURON_CORE_HBM_BYTES = 16 * GiB
# Device memory a loaded NEFF needs beyond its weights (runtime scratch, I/O tensors, KV
# cache). Stated in every report, configurable.
DEFAULT_NEURON_RESERVE_BYTES = 2 * GiB
# Host RAM a slim deploy needs beyond its embedding table when no peak was measured.
DEFAULT_NEURON_HOST_RUNTIME_BYTES = 4 * GiB
# How far a module's declared bytes may fall short of its groups' parameters × dtype width
# before the groups count as not accounted for. Covers rounding in declared sizes ("1.48 GB")
# and per-channel scales; a missing group is 100% short.
DEFAULT_RESIDENCY_TOLERANCE = 0.03
# A verify waits this many times the bundle's measured cold start (cold EBS reads vary).
COLD_START_MARGIN = 1.5


class FitVerdict(StrEnum):
    FITS = "fits"
    DOES_NOT_FIT = "does not fit"
    INCOMPLETE = "incomplete"  # a parameter group is not accounted for: the sum proves nothing
    UNKNOWN = "unknown"  # an input is unknown


@dataclass(frozen=True)
class Contributor:
    """One resident module on every rank."""

    name: str
    dtype: str
    placement: str
    per_rank_bytes: int | None
    groups: tuple[str, ...] = ()
    # Bytes of one full copy that its groups' parameters need at ``dtype`` (None: unknown).
    expected_bytes: int | None = None
    bytes_source: str = "declared"  # or "computed from N parameters at dtype"


@dataclass(frozen=True)
class GroupResidency:
    """Where one parameter group lives (``held_by`` None: nowhere that was declared)."""

    group: str
    params: int | None
    held_by: str | None


@dataclass(frozen=True)
class HostFit:
    """Host memory a job needs against a host's RAM (less headroom) plus its declared swap."""

    job: str  # "deploy" or "compile"
    needed_bytes: int | None
    rule: str  # how needed_bytes was obtained
    ram_bytes: int | None
    swap_bytes: int  # declared swap counted; undeclared swap counts as none
    budget_bytes: int | None
    fits: bool | None
    reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class NeuronFit:
    tp_degree: int | None
    neuron_cores: int
    per_rank_bytes: int | None
    reserve_bytes: int
    core_budget_bytes: int
    contributors: list[Contributor]
    host_bytes: int | None
    host_rule: str
    host_budget_bytes: int | None
    fits_device: bool | None
    fits_host: bool | None
    reasons: list[str] = field(default_factory=list)
    groups: list[GroupResidency] = field(default_factory=list)
    missing_groups: list[str] = field(default_factory=list)
    complete: bool = False
    tolerance: float = DEFAULT_RESIDENCY_TOLERANCE
    neff_bytes: int | None = None  # the compiled artifact's size, when known
    weights_all_ranks_bytes: int | None = None  # what the neff must carry, computed
    layout: str = "recorded"  # or the name of a tried variant
    observed: str | None = None  # what happened when that variant was tried
    host: HostFit | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> FitVerdict:
        if self.fits_device is False or self.fits_host is False:
            return FitVerdict.DOES_NOT_FIT
        if not self.complete:
            return FitVerdict.INCOMPLETE if self.groups else FitVerdict.UNKNOWN
        if self.fits_device is None or self.fits_host is None:
            return FitVerdict.UNKNOWN
        return FitVerdict.FITS

    @property
    def fits(self) -> bool | None:
        """True only when every group is resident and it fits; False when it cannot fit."""
        return {FitVerdict.FITS: True, FitVerdict.DOES_NOT_FIT: False}.get(self.verdict)


def parameter_groups(manifest: Manifest) -> tuple[dict[str, int], str] | None:
    """Parameters per group and their provenance: the config split in the ledger, else the
    tensor roles of the quantization summary; None when neither is known."""
    ledger_groups = manifest.parameters.groups
    if ledger_groups is not None:
        return dict(ledger_groups.counts), ledger_groups.provenance
    quant = manifest.quantization
    if quant is not None and quant.groups:
        return {name: stats.params for name, stats in quant.groups.items()}, "tensors"
    return None


def resident_requirements(manifest: Manifest) -> dict[str, int | None] | None:
    """Parameters each group puts on the device (None: the group exists, size unknown).

    The lm_head is resident even when tied: the device multiplies by the embedding matrix
    (vocab × hidden) at the end, whatever the checkpoint stores once.
    """
    found = parameter_groups(manifest)
    if found is None:
        return None
    counts, _ = found
    need: dict[str, int | None] = {g: n for g, n in counts.items() if n > 0}
    arch = manifest.architecture
    if arch.tied_embeddings and not counts.get("output"):
        vocab, hidden = arch.vocab_size, arch.embedding_length
        need["output"] = vocab * hidden if vocab and hidden else None
    return dict(sorted(need.items(), key=lambda kv: PARAMETER_GROUPS.index(kv[0])))


def module_groups(module: NeuronModule) -> tuple[str, ...]:
    """The groups a module holds: as declared, else its name when that is a group name."""
    if module.groups:
        return tuple(module.groups)
    return (module.name,) if module.name in PARAMETER_GROUPS else ()


def _bytes(n: int | None) -> str:
    return "unknown" if n is None else f"{n / GB:.2f} GB"


def _contributors(
    modules: list[NeuronModule],
    need: dict[str, int | None] | None,
    tp: int | None,
    tolerance: float,
    reasons: list[str],
) -> tuple[list[Contributor], dict[str, str], set[str]]:
    """Per-rank shares, which module holds which group, and the groups held short."""
    holders: dict[str, str] = {}
    short: set[str] = set()
    contributors = []
    for module in modules:
        groups = module_groups(module)
        width = dtype_bytes(module.dtype)
        for group in groups:
            if group in holders:
                reasons.append(
                    f"group {group} is declared by two modules ({holders[group]}, "
                    f"{module.name}): each group belongs to one module"
                )
                short.add(group)
            holders.setdefault(group, module.name)
        params = [need.get(g, 0) for g in groups] if need is not None else [None]
        expected = (
            round(sum(p for p in params if p is not None) * width)
            if width is not None and groups and None not in params
            else None
        )
        if groups and width is None:
            reasons.append(
                f"module {module.name}: dtype {module.dtype!r} unknown, its bytes cannot be "
                "checked against its groups"
            )
            short.update(groups)
        if not groups:
            reasons.append(
                f"module {module.name} names no parameter group: give it groups "
                f"({', '.join(PARAMETER_GROUPS)})"
            )
        full = module.bytes if module.bytes is not None else expected
        source = "declared"
        if module.bytes is None and expected is not None:
            n_params = sum(p for p in params if p is not None)
            source = f"computed from {n_params:,} parameters at {module.dtype}"
        elif module.bytes is not None and expected is not None:
            if module.bytes < expected * (1 - tolerance):
                reasons.append(
                    f"module {module.name} declares {_bytes(module.bytes)} but its groups "
                    f"({', '.join(groups)}) need {_bytes(expected)} at {module.dtype} "
                    f"(tolerance {tolerance:.0%}): not all of it is accounted for"
                )
                short.update(groups)
            elif module.bytes > expected * (1 + tolerance):
                reasons.append(
                    f"module {module.name} declares {_bytes(module.bytes)}, more than the "
                    f"{_bytes(expected)} its groups need at {module.dtype}"
                )
        if full is None or tp is None:
            share = None
        else:
            share = full // tp if module.placement == "sharded" else full
        contributors.append(
            Contributor(
                module.name, module.dtype, module.placement, share, groups, expected, source
            )
        )
    contributors.sort(key=lambda c: -(c.per_rank_bytes or 0))
    return contributors, holders, short


def deploy_host_fit(
    manifest: Manifest,
    host_memory_bytes: int | None,
    *,
    swap_bytes: int | None = None,
    headroom_fraction: float = 0.10,
) -> HostFit:
    """The bundle's deploy-host peak RSS (measured, or embedding table + runtime) against the
    host's RAM less headroom plus its declared swap."""
    facts = manifest.neuron
    if facts is None:
        raise InvalidInput("not a Neuron bundle: it has no compile facts (neuron section)")
    deploy = facts.deploy_host
    embed = facts.host_embedding
    needed: int | None
    if deploy is not None and deploy.peak_rss_bytes is not None:
        needed = deploy.peak_rss_bytes
        rule = "measured deploy peak RSS" + (f" on {deploy.instance}" if deploy.instance else "")
    elif embed is not None and embed.bytes is not None:
        needed = embed.bytes + DEFAULT_NEURON_HOST_RUNTIME_BYTES
        rule = f"host embedding table + {DEFAULT_NEURON_HOST_RUNTIME_BYTES / GiB:.0f} GiB runtime"
    else:
        needed, rule = None, "host needs unknown"
    fit = _host_fit("deploy", needed, rule, host_memory_bytes, swap_bytes, headroom_fraction)
    if deploy is not None and deploy.swap_bytes and (swap_bytes or 0) < deploy.swap_bytes:
        fit.notes.append(
            f"the measured deploy ran with {_bytes(deploy.swap_bytes)} of swap; this host "
            f"declares {_bytes(swap_bytes or 0)}: add the swap the recipe used, or declare "
            "swap_gib on the target once it has it"
        )
    return fit


def _host_fit(
    job: str,
    needed: int | None,
    rule: str,
    ram: int | None,
    swap: int | None,
    headroom_fraction: float,
) -> HostFit:
    if not 0 <= headroom_fraction < 1:
        raise InvalidInput(f"headroom {headroom_fraction} must be in [0, 1)")
    swap_counted = swap or 0
    budget = round(ram * (1 - headroom_fraction)) + swap_counted if ram else None
    reasons = []
    fits: bool | None = None
    if needed is None:
        reasons.append(f"{job} host: {rule}")
    elif budget is None:
        reasons.append(f"{job} host memory unknown")
    else:
        fits = needed <= budget
        if not fits:
            reasons.append(
                f"{job} host needs {needed / GiB:.2f} GiB ({rule}); budget {budget / GiB:.2f} GiB "
                f"({1 - headroom_fraction:.0%} of {(ram or 0) / GiB:.0f} GiB RAM + "
                f"{swap_counted / GiB:.0f} GiB declared swap)"
            )
    return HostFit(job, needed, rule, ram, swap_counted, budget, fits, reasons)


def compile_host_fit(
    manifest: Manifest, target: Target, *, headroom_fraction: float = 0.10
) -> HostFit:
    """Can ``target`` compile this bundle: its recorded compile peak host memory against the
    target's RAM less headroom plus declared swap (``fit --compile-host TARGET``)."""
    facts = manifest.neuron
    if facts is None:
        raise InvalidInput("not a Neuron bundle: it has no compile facts (neuron section)")
    compile_run = facts.compile_host
    if compile_run is not None and compile_run.peak_rss_bytes is not None:
        needed: int | None = compile_run.peak_rss_bytes
        rule = "recorded compile peak host memory" + (
            f" on {compile_run.instance}" if compile_run.instance else ""
        )
    else:
        needed, rule = None, "compile peak host memory unknown: record it (compile_host)"
    fit = _host_fit(
        "compile", needed, rule, target.memory_bytes, target.swap_bytes, headroom_fraction
    )
    if compile_run is not None and compile_run.swap_bytes and fit.fits is not False:
        fit.notes.append(
            f"the recorded compile ran with {_bytes(compile_run.swap_bytes)} of swap"
            + (f" on {compile_run.instance}" if compile_run.instance else "")
        )
    return fit


def neuron_fit(
    manifest: Manifest,
    neuron_cores: int,
    host_memory_bytes: int | None,
    *,
    reserve_bytes: int = DEFAULT_NEURON_RESERVE_BYTES,
    headroom_fraction: float = 0.10,
    host_swap_bytes: int | None = None,
    tolerance: float = DEFAULT_RESIDENCY_TOLERANCE,
    modules: list[NeuronModule] | None = None,
    layout: str = "recorded",
    observed: str | None = None,
) -> NeuronFit:
    """Per-NeuronCore residency under the bundle's tensor-parallel degree, checked group by
    group against the parameters the config implies, and host RAM at deploy.

    ``modules`` evaluates another residency layout of the same bundle (a variant).
    """
    facts = manifest.neuron
    if facts is None:
        raise InvalidInput("not a Neuron bundle: it has no compile facts (neuron section)")
    if not 0 <= tolerance < 1:
        raise InvalidInput(f"tolerance {tolerance} must be in [0, 1)")
    if not 0 <= headroom_fraction < 1:
        raise InvalidInput(f"headroom {headroom_fraction} must be in [0, 1)")
    reasons: list[str] = []
    tp = facts.tp_degree
    if tp is None:
        reasons.append("tp_degree unknown")
    elif tp > neuron_cores:
        reasons.append(f"tp_degree {tp} needs {tp} NeuronCores; the target has {neuron_cores}")
    need = resident_requirements(manifest)
    resident = facts.modules if modules is None else modules
    contributors, holders, short = _contributors(resident, need, tp, tolerance, reasons)

    groups: list[GroupResidency] = []
    missing: list[str] = []
    if need is None:
        reasons.append(
            "parameter groups unknown (no config split, no tensors): cannot check that every "
            "group is resident"
        )
    else:
        for group, params in need.items():
            held_by = holders.get(group)
            if group == "embeddings" and held_by is None and facts.host_embedding is not None:
                held_by = f"host embedding table {facts.host_embedding.file}"
            groups.append(GroupResidency(group, params, held_by))
            if held_by is None:
                missing.append(group)
        if missing:
            reasons.append(
                f"not accounted for: {', '.join(missing)} — no resident module holds "
                f"{'it' if len(missing) == 1 else 'them'} (declare each group's module)"
            )
    unknown = [c.name for c in contributors if c.per_rank_bytes is None]
    if not contributors:
        reasons.append("no module residency declared")
    elif unknown and tp is not None:
        reasons.append(f"bytes unknown for {', '.join(unknown)}")
    complete = need is not None and not missing and not short and bool(contributors)
    per_rank = (
        None if unknown or not contributors else sum(c.per_rank_bytes or 0 for c in contributors)
    )
    budget = round(NEURON_CORE_HBM_BYTES * (1 - headroom_fraction))
    fits_device: bool | None
    if tp is not None and tp > neuron_cores:
        fits_device = False
    elif per_rank is None:
        # Known shares alone may already be too much: then it cannot fit, whatever is unknown.
        known = sum(c.per_rank_bytes or 0 for c in contributors)
        fits_device = False if known + reserve_bytes > budget and tp is not None else None
    else:
        fits_device = per_rank + reserve_bytes <= budget
    if fits_device is False and tp is not None and tp <= neuron_cores:
        counted = sum(c.per_rank_bytes or 0 for c in contributors)
        top = ", ".join(
            f"{c.name} {c.dtype} {c.placement} {(c.per_rank_bytes or 0) / GB:.2f} GB"
            for c in contributors[:3]
        )
        reasons.insert(
            0,
            f"{(counted + reserve_bytes) / GiB:.2f} GiB per NeuronCore (weights "
            f"{counted / GiB:.2f} + reserve {reserve_bytes / GiB:.2f}) exceeds the "
            f"{budget / GiB:.2f} GiB budget by {(counted + reserve_bytes - budget) / GiB:.2f} "
            f"GiB; biggest: {top}",
        )

    host = deploy_host_fit(
        manifest, host_memory_bytes, swap_bytes=host_swap_bytes, headroom_fraction=headroom_fraction
    )
    reasons += host.reasons
    # Every rank loads its own shard or copy: what the compiled bundle carries in total.
    all_ranks = per_rank * tp if per_rank is not None and tp is not None else None
    notes = list(host.notes) if modules is None else []
    if facts.neff_bytes is not None and all_ranks is not None and modules is None:
        notes.append(
            f"neff {facts.neff_bytes / GB:.1f} GB on disk beside {all_ranks / GB:.1f} GB of "
            f"computed weights over {tp} ranks"
        )
    return NeuronFit(
        tp,
        neuron_cores,
        per_rank,
        reserve_bytes,
        budget,
        contributors,
        host.needed_bytes,
        host.rule,
        host.budget_bytes,
        fits_device,
        host.fits,
        reasons,
        groups,
        missing,
        complete,
        tolerance,
        facts.neff_bytes,
        all_ranks,
        layout,
        observed,
        host,
        notes,
    )


def neuron_fit_for_target(
    manifest: Manifest,
    target: Target,
    *,
    reserve_bytes: int = DEFAULT_NEURON_RESERVE_BYTES,
    headroom_fraction: float = 0.10,
    tolerance: float = DEFAULT_RESIDENCY_TOLERANCE,
) -> list[NeuronFit]:
    """The recorded layout's fit on ``target``, then each tried variant's (``fit`` prints them
    all; its exit code follows the first)."""
    if target.kind != "neuron":
        raise InvalidInput(
            f"{target.name} is a {target.kind} target: Neuron bundles fit inf2 targets"
        )
    facts = manifest.neuron
    if facts is None:
        raise InvalidInput("not a Neuron bundle: it has no compile facts (neuron section)")

    def one(modules: list[NeuronModule] | None, layout: str, observed: str | None) -> NeuronFit:
        return neuron_fit(
            manifest,
            target.neuron_cores,
            target.memory_bytes,
            reserve_bytes=reserve_bytes,
            headroom_fraction=headroom_fraction,
            host_swap_bytes=target.swap_bytes,
            tolerance=tolerance,
            modules=modules,
            layout=layout,
            observed=observed,
        )

    fits = [one(None, "recorded", None)]
    fits += [one(v.modules, v.name, v.observed) for v in facts.variants]
    return fits


def recommended_verify_timeout(manifest: Manifest, target: Target) -> tuple[float, str]:
    """Seconds a verify on ``target`` should wait for this artifact, and why: the target
    kind's default, raised to COLD_START_MARGIN × the bundle's measured cold start."""
    base = target.verify_timeout_seconds
    facts = manifest.neuron
    measured = facts.deploy_host.seconds if facts and facts.deploy_host else None
    if measured is None:
        return base, f"{target.kind} default"
    wanted = measured * COLD_START_MARGIN
    if wanted <= base:
        return base, f"{target.kind} default ({measured:.0f} s measured cold start fits)"
    return wanted, f"{COLD_START_MARGIN}× the measured {measured:.0f} s cold start"
