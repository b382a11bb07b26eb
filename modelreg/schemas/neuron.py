"""What a manifest records about an AWS Neuron bundle (``Manifest.neuron``): its compiled
modules and variants, the host-side runs and embeddings its forward pass needs, and how it is
served. Part of the manifest schema (modelreg.schemas.manifest)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from modelreg.limits import (
    MAX_BATCH,
    MAX_BUCKETS,
    MAX_HOST_SECONDS,
    MAX_TP_DEGREE,
    bounded,
)

# The one grammar for model ids: ``org/name``, ASCII letters, digits and ``._-``, each part
# starting with a letter or digit and at most MODEL_ID_PART_MAX long (the Hub's own limit).
# \A…\Z, not ^…$: "$" also matches before a trailing newline, so "org/name\n" would pass.
from modelreg.schemas.sizes import ByteCount, Tokens, Width, _known_groups


class NeuronModule(BaseModel):
    """One group of weights resident on the NeuronCores, and how it is laid out across ranks."""

    model_config = ConfigDict(extra="forbid")

    name: str  # "experts", "lm_head", "shared_mlp", "attention+rest"…
    dtype: str  # "int8", "fp8", "bf16"…
    placement: Literal["sharded", "replicated"]
    # Bytes of one full copy: split over tp_degree ranks when sharded, on every rank when
    # replicated. None: computed from the groups' parameters at ``dtype``.
    bytes: ByteCount | None = Field(default=None, ge=0)
    source: str = "unknown"
    # The parameter groups (ParameterGroups names) this module holds. Empty: the module's name
    # when it is a group name, else nothing — a fit then reports the groups nobody holds.
    groups: list[str] = Field(default_factory=list)

    @field_validator("groups")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        _known_groups(value)
        return value


class NeuronVariant(BaseModel):
    """Another residency layout of the same recipe that was tried (a rejected candidate), kept
    so that ``fit`` can show why the recorded layout was chosen."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    modules: list[NeuronModule] = Field(min_length=1)
    observed: str | None = None  # what happened when it was tried, e.g. the runtime's error
    source: str = "unknown"


class HostRun(BaseModel):
    """Host memory and time one job on the bundle took (compile or deploy), as measured or
    declared. Unknown is ``None``."""

    model_config = ConfigDict(extra="forbid")

    peak_rss_bytes: ByteCount | None = Field(default=None, ge=0)
    # Swap the measured run had (a compile that only finished with swap needs it again).
    swap_bytes: ByteCount | None = Field(default=None, ge=0)
    # Wall time: compile duration, or deploy start to ready (what a verify timeout must cover).
    seconds: Annotated[float | None, bounded(MAX_HOST_SECONDS, "seconds")] = Field(
        default=None, ge=0
    )
    instance: str | None = None  # where it ran, e.g. "inf2.8xlarge"
    source: str = "unknown"


class HostEmbedding(BaseModel):
    """A slim deploy looks embeddings up on the host and feeds the device ``inputs_embeds``."""

    model_config = ConfigDict(extra="forbid")

    file: str
    bytes: ByteCount | None = Field(default=None, ge=0)
    hidden_size: Width | None = Field(default=None, gt=0)
    # The factor the host multiplies looked-up rows by. Gemma's embedding class multiplies
    # by sqrt(hidden_size) inside the model; a host lookup must do the same. None: undeclared.
    scale: float | None = Field(default=None, gt=0)
    source: str = "unknown"


class ServeEntry(BaseModel):
    """A bundle's own serving entry point, as its deploy manifest declares it (``serve:`` in
    modelreg-deploy.json): the command that starts its OpenAI-compatible server, with
    ``{python}`` (this interpreter), ``{bundle}`` (the bundle directory) and ``{port}``
    (where it must listen, on 127.0.0.1) filled in; ``script`` is the bundle file it runs.
    What neuron-smoke exercises on a Neuron host: seed 001's embedding bug lived in the
    bundle's server (deploy_sqz.py / optb_server_sqz.py), not in its manifest."""

    model_config = ConfigDict(extra="forbid")

    argv: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(
        min_length=1, max_length=64
    )
    script: str = Field(min_length=1, max_length=4096)
    source: str | None = Field(default=None, max_length=4000)


class NeuronFacts(BaseModel):
    """What an Inferentia2 bundle was compiled as (NxD Inference, optimum-neuron, slim, or a
    bundle as published: config, neff / model.pt, embedding table, server, Dockerfile)."""

    model_config = ConfigDict(extra="forbid")

    layout: Literal["nxdi", "optimum-neuron", "slim-host-embedding", "published"]
    tp_degree: Annotated[int | None, bounded(MAX_TP_DEGREE, "ranks")] = Field(default=None, gt=0)
    batch_size: Annotated[int | None, bounded(MAX_BATCH, "sequences")] = Field(default=None, gt=0)
    seq_len: Tokens | None = Field(default=None, gt=0)
    context_buckets: list[Tokens] = Field(default_factory=list, max_length=MAX_BUCKETS)
    torch_dtype: str | None = None
    quantized: bool | None = None
    quantization_type: str | None = None
    quantization_dtype: str | None = None
    modules: list[NeuronModule] = Field(default_factory=list)
    compiler_version: str | None = None  # neuronx-cc
    nxd_version: str | None = None
    sdk_version: str | None = None
    optimum_neuron_version: str | None = None
    compiled_on: str | None = None
    neff_bytes: ByteCount | None = Field(default=None, ge=0)
    host_embedding: HostEmbedding | None = None
    serve: ServeEntry | None = None  # the bundle's own server, when its manifest declares it
    pt_archives: dict[str, list[str]] = Field(default_factory=dict)  # .pt file -> neff entries
    compile_host: HostRun | None = None
    deploy_host: HostRun | None = None
    variants: list[NeuronVariant] = Field(default_factory=list)
    # Fact -> where it was read when it did not come from a neuron_config (published bundles:
    # "Dockerfile: FROM …", "server.py: TP = 2").
    derived_from: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _legacy_host_peak(cls, data: object) -> object:
        # Records made before deploy_host kept the deploy peak RSS in host_peak_rss_bytes.
        if isinstance(data, dict) and "host_peak_rss_bytes" in data:
            data = dict(data)
            peak = data.pop("host_peak_rss_bytes")
            if peak is not None and data.get("deploy_host") is None:
                data["deploy_host"] = {"peak_rss_bytes": peak}
        return data
