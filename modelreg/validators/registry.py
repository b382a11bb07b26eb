"""Validators, registered in one place, and which of them a record needs on a target.

(Not in the package ``__init__``: the runtime child processes import ``modelreg.validators.*``
and must not pay for the registry's database imports.)
"""

from __future__ import annotations

from modelreg.targets import Target
from modelreg.validators.base import Check
from modelreg.validators.digest import DigestCheck
from modelreg.validators.embed_scale import EmbedScaleCheck
from modelreg.validators.gguf_smoke import GGUFCpuSmoke
from modelreg.validators.host_compat import HostCompatCheck
from modelreg.validators.neuron_smoke import NeuronSmoke
from modelreg.validators.signature import SignatureCheck
from modelreg.validators.transformers_smoke import TransformersCpuSmoke

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


def required_checks(record_format: str, target: Target) -> tuple[str, ...]:
    """The checks a record of this format needs on ``target``: the format's, plus the
    artifact signature when the target trusts artifact keys."""
    # A format with no entry still gets the checks every artifact needs; host-compat then
    # says why it cannot run there.
    names = REQUIRED_CHECKS.get((record_format, target.kind), ("digest", "host-compat"))
    if target.trust_artifact_keys:
        names = (*names, "signature")
    return names
