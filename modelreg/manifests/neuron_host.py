"""Host RAM for a Neuron bundle (part of the fit, modelreg.manifests.neuron_fit): what the
deploy host needs to load it (the weights staged in host memory on their way to the devices,
plus the Neuron runtime's own), and what the compile host needs to build it — from the
host runs the manifest records when there are any, else from the documented defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from modelreg.errors import InvalidInput
from modelreg.schemas.manifest import Manifest
from modelreg.units import GiB

if TYPE_CHECKING:
    from modelreg.targets import Target


GB = 10**9
# Host RAM a slim deploy needs beyond its embedding table when no peak was measured.
DEFAULT_NEURON_HOST_RUNTIME_BYTES = 4 * GiB


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


def _bytes(n: int | None) -> str:
    return "unknown" if n is None else f"{n / GB:.2f} GB"


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
