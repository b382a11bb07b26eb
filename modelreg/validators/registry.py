"""Validators, registered in one place, and which of them a record needs on a target.

(Not in the package ``__init__``: the runtime child processes import ``modelreg.validators.*``
and must not pay for the registry's database imports.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelreg.validators.base import Check
from modelreg.validators.digest import DigestCheck
from modelreg.validators.embed_scale import EmbedScaleCheck
from modelreg.validators.endpoint import EndpointSmoke
from modelreg.validators.gguf_smoke import GGUFCpuSmoke
from modelreg.validators.host_compat import HostCompatCheck
from modelreg.validators.neuron_smoke import NeuronSmoke
from modelreg.validators.signature import SignatureCheck
from modelreg.validators.transformers_smoke import TransformersCpuSmoke

if TYPE_CHECKING:
    from modelreg.targets import Target

CHECKS: dict[str, Check] = {
    check.name: check
    for check in (
        DigestCheck(),
        HostCompatCheck(),
        GGUFCpuSmoke(),
        TransformersCpuSmoke(),
        EmbedScaleCheck(),
        NeuronSmoke(),
        SignatureCheck(),
        EndpointSmoke(),
    )
}

# (record format, target kind) -> the checks that must pass, in the order they run.
REQUIRED_CHECKS: dict[tuple[str, str], tuple[str, ...]] = {
    ("gguf", "cpu"): ("digest", "host-compat", "gguf-cpu-smoke"),
    ("gguf", "neuron"): ("digest", "host-compat"),
    ("safetensors", "cpu"): ("digest", "host-compat", "transformers-cpu-smoke"),
    ("safetensors", "neuron"): ("digest", "host-compat"),
    ("neuron", "neuron"): ("digest", "host-compat", "embed-scale", "neuron-smoke"),
    ("neuron", "cpu"): ("digest", "host-compat"),
}


# Generation checks through a runtime modelreg brings along. A target that names the runtime
# that serves (launch or endpoint) is judged through that runtime instead: a pass in the
# bundled mainline llama.cpp says nothing about a fork, its flags or a container (seed 004).
BUNDLED_RUNTIME_CHECKS = frozenset({"gguf-cpu-smoke", "transformers-cpu-smoke", "neuron-smoke"})


def required_checks(record_format: str, target: Target) -> tuple[str, ...]:
    """The checks a record of ``record_format`` needs on ``target``, in the order they run:
    the format's; ``endpoint-smoke`` in place of the bundled runtime's generation check when
    the target declares a launch or an endpoint; the artifact signature when it trusts
    artifact keys."""
    from modelreg.deployed_unit import serves_own_runtime

    # A format with no entry still gets the checks every artifact needs; host-compat then
    # says why it cannot run there.
    names = REQUIRED_CHECKS.get((record_format, target.kind), ("digest", "host-compat"))
    if serves_own_runtime(target):
        names = (*(n for n in names if n not in BUNDLED_RUNTIME_CHECKS), "endpoint-smoke")
    if target.trust_artifact_keys:
        names = (*names, "signature")
    return names
