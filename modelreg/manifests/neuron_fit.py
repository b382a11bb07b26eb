"""Will a Neuron bundle fit: every parameter group resident per NeuronCore, host RAM at
deploy, host RAM at compile — and how long a verify must wait for it to load.

A fit is only as good as its inventory. The residency a bundle declares (its ``modules``) is
checked against the parameter groups its config implies (embeddings, lm_head, attention,
router, experts, dense / shared MLP, norms): a group that no module holds, or holds with fewer
bytes than its parameters need at the declared dtype (beyond a stated tolerance), makes the
verdict ``incomplete`` — never ``fits``. Forgetting the tied 262k-row lm_head is exactly how
the Gemma-4 inf2 port came out 1.5 GB per core short of what it thought it had.

A NEFF serves the shape it was compiled for and no other: at most ``seq_len`` tokens per
sequence (prompts up to the largest context bucket), ``batch_size`` sequences at once, on
``tp_degree`` NeuronCores. A context or concurrency asked beyond it is ``not compiled for
this`` — whatever the memory, only a recompile serves it. Its KV cache is allocated whole
at load for that shape, so it is sized from the compiled shape, not from what is asked.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from modelreg.errors import InvalidInput
from modelreg.manifests.fit import KVEstimate, kv_cache_bytes
from modelreg.manifests.neuron_dtypes import FLOAT_DTYPES, canonical_dtype, dtype_bytes
from modelreg.manifests.neuron_host import HostFit, _bytes, deploy_host_fit
from modelreg.schemas.manifest import ArchitectureFacts, Manifest
from modelreg.schemas.neuron import NeuronFacts, NeuronModule
from modelreg.schemas.sizes import PARAMETER_GROUPS

if TYPE_CHECKING:
    from modelreg.targets import Target

GB, GiB = 10**9, 1 << 30
NEURON_CORE_HBM_BYTES = 16 * GiB
# Device memory a loaded NEFF needs beyond its weights and its KV cache (a line of its own,
# sized from the compiled shape): runtime scratch, I/O tensors, collectives buffers. Stated
# in every report, configurable. It is kept at 2 GiB, the figure the fit had when it also
# covered the KV cache, because nothing measured says less: the seed's squeeze loaded with
# 13.19 GB of weights and 0.06 GB of KV per core in 16 GiB, which bounds the rest by ~4 GB,
# not by 2 GiB. The KV cache of that build (512 tokens × 1 sequence) is 55 MiB per rank.
DEFAULT_NEURON_RESERVE_BYTES = 2 * GiB
# How far a module's declared bytes may fall short of its groups' parameters × dtype width
# before the groups count as not accounted for. Covers rounding in declared sizes ("1.48 GB")
# and per-channel scales; a missing group is 100% short.
DEFAULT_RESIDENCY_TOLERANCE = 0.03
# A verify waits this many times the bundle's measured cold start (cold EBS reads vary).
COLD_START_MARGIN = 1.5


class FitVerdict(StrEnum):
    FITS = "fits"
    DOES_NOT_FIT = "does not fit"
    # What is asked (context, sequences) is beyond the compiled shape: only a recompile serves it.
    NOT_COMPILED = "not compiled for this"
    INCOMPLETE = "incomplete"  # a parameter group is not accounted for: the sum proves nothing
    UNKNOWN = "unknown"  # an input is unknown


# The KV cache is held in the compute dtype (torch_dtype), named as fit.kv_cache_bytes names
# cache types. An fp8 cache (NxD Inference kv_cache_quant) is not recorded: a bf16-sized
# estimate of it is an upper bound.
_KV_DTYPE_NAMES = {"bf16": "bf16", "fp16": "f16", "fp32": "f32"}


@dataclass(frozen=True)
class CompiledShape:
    """What a bundle was compiled for, and so the most it serves (None: not recorded)."""

    tp_degree: int | None
    batch_size: int | None
    seq_len: int | None
    context_buckets: tuple[int, ...] = ()
    kv_dtype: str | None = None  # the KV cache's element type: the compute dtype

    @classmethod
    def of(cls, facts: NeuronFacts) -> CompiledShape:
        canonical = canonical_dtype(facts.torch_dtype)
        kv_dtype = _KV_DTYPE_NAMES.get(canonical) if canonical in FLOAT_DTYPES else None
        return cls(
            facts.tp_degree,
            facts.batch_size,
            facts.seq_len,
            tuple(sorted(facts.context_buckets)),
            kv_dtype,
        )

    @property
    def max_context(self) -> int | None:
        """Tokens one sequence may hold: ``seq_len``, else the largest context bucket."""
        if self.seq_len is not None:
            return self.seq_len
        return self.context_buckets[-1] if self.context_buckets else None

    def as_dict(self) -> dict[str, Any]:
        """The shape as evidence and ``--json`` show it."""
        return {
            "tp_degree": self.tp_degree,
            "batch_size": self.batch_size,
            "seq_len": self.seq_len,
            "context_buckets": list(self.context_buckets),
            "kv_dtype": self.kv_dtype,
            "max_context": self.max_context,
        }

    def describe(self) -> str:
        """``seq_len 512 (buckets 128), batch_size 1, TP 2, KV bf16``."""

        def known(value: object) -> str:
            return "unknown" if value is None else str(value)

        return (
            f"seq_len {known(self.seq_len)}{self._buckets()}, batch_size "
            f"{known(self.batch_size)}, TP {known(self.tp_degree)}, KV {known(self.kv_dtype)}"
        )

    def _buckets(self) -> str:
        return (
            f" (buckets {', '.join(map(str, self.context_buckets))})"
            if self.context_buckets
            else ""
        )

    def check(
        self,
        context: int | None,
        sequences: int | None,
        trained_context: int | None,
        max_output_tokens: int | None = None,
    ) -> tuple[bool | None, list[str], list[str]]:
        """Does the compiled shape serve ``context`` tokens × ``sequences`` with answers of
        up to ``max_output_tokens`` after the largest prompt bucket (None: not asked)? True,
        False (reasons name what to recompile) or None (a fact it needs is not recorded);
        then the reasons and the notes."""
        reasons: list[str] = []
        notes: list[str] = []
        verdicts: list[bool | None] = []
        if max_output_tokens is not None:
            prompt = self.context_buckets[-1] if self.context_buckets else None
            if prompt is None or self.seq_len is None:
                verdicts.append(None)
                reasons.append(
                    f"seq_len or the prompt bucket unknown: cannot tell whether answers of "
                    f"{max_output_tokens} tokens fit (record seq_len and buckets)"
                )
            elif prompt + max_output_tokens > self.seq_len:
                verdicts.append(False)
                reasons.append(
                    f"compiled for seq_len {self.seq_len} with a {prompt}-token prompt bucket: "
                    f"at most {self.seq_len - prompt} new tokens, asked {max_output_tokens} — "
                    f"recompile with seq_len ≥ {prompt + max_output_tokens}"
                )
            else:
                verdicts.append(True)
        if context is not None:
            bound = self.max_context
            if bound is None:
                verdicts.append(None)
                reasons.append(
                    f"seq_len and context buckets unknown: cannot tell whether the bundle "
                    f"serves {context} tokens (record seq_len)"
                )
            elif context > bound:
                verdicts.append(False)
                compiled = (
                    f"seq_len {self.seq_len}{self._buckets()}"
                    if self.seq_len is not None
                    else f"context buckets up to {bound} (seq_len not recorded)"
                )
                if trained_context and context > trained_context:
                    advice = f"beyond the model's trained context {trained_context} too"
                else:
                    advice = f"recompile with seq_len ≥ {context}"
                reasons.append(f"compiled for {compiled}, asked {context} tokens: {advice}")
            else:
                verdicts.append(True)
                largest = self.context_buckets[-1] if self.context_buckets else None
                if largest is not None and context > largest:
                    notes.append(
                        f"{context} tokens is beyond the largest context bucket ({largest}): "
                        f"a prompt may be at most {largest} tokens, the rest of the "
                        f"{context} are generated"
                    )
        if sequences is not None and sequences > 1:
            if self.batch_size is None:
                verdicts.append(None)
                reasons.append(
                    f"batch_size unknown: cannot tell whether the bundle serves {sequences} "
                    "sequences at once (record batch_size)"
                )
            elif sequences > self.batch_size:
                verdicts.append(False)
                reasons.append(
                    f"compiled for batch_size {self.batch_size}, asked {sequences} sequences: "
                    f"recompile with batch_size ≥ {sequences}"
                )
            else:
                verdicts.append(True)
        if False in verdicts:
            return False, reasons, notes
        return (None if None in verdicts else True), reasons, notes


def kv_heads_per_rank(kv_heads: int, heads: int | None, tp: int) -> int | None:
    """KV heads one NeuronCore holds under NxD's GQA sharding (``get_shardable_head_counts``
    in neuronx-distributed-inference's ``modules/attention/gqa.py``): split evenly when TP
    divides them; replicated to one per rank when they divide TP (fewer heads than ranks);
    otherwise converted to MHA, one K/V head per query head, the query heads padded to a
    multiple of TP. None when that needs the query heads and they are unknown."""
    if kv_heads % tp == 0:
        return kv_heads // tp
    if tp % kv_heads == 0:
        return 1
    return -(-heads // tp) if heads else None


def kv_cache_per_rank(
    arch: ArchitectureFacts, shape: CompiledShape
) -> tuple[KVEstimate | None, list[str]]:
    """The KV cache one NeuronCore holds for the compiled shape — ``seq_len`` tokens ×
    ``batch_size`` sequences of the compute dtype, each layer's K and V for its KV heads per
    rank (``kv_heads_per_rank``) — as ``fit.kv_cache_bytes`` counts it (per-layer heads and
    head sizes, sliding-window layers capped at the window, KV-shared layers holding none).
    Then its notes — or None and why, when a fact it needs is not recorded."""
    # At call time: fit.py imports this module.
    from modelreg.manifests.layers import layer_groups

    missing = [
        name
        for name, value in (
            ("seq_len", shape.seq_len),
            ("batch_size", shape.batch_size),
            ("tp_degree", shape.tp_degree),
            ("the KV dtype (a float torch_dtype)", shape.kv_dtype),
        )
        if value is None
    ]
    if missing:
        return None, [f"KV cache per rank unknown: {', '.join(missing)} not recorded"]
    assert shape.seq_len and shape.batch_size and shape.tp_degree and shape.kv_dtype
    tp = shape.tp_degree
    per_rank_arch = arch
    split: Counter[tuple[int, int]] = Counter()
    # One step per kind of layer, in the order kinds first occur (manifests/layers.py).
    for group in layer_groups(arch) if arch.head_count_kv is not None else []:
        kv_heads = group.kind.head_count_kv
        if kv_heads is None:
            break  # kv_cache_bytes names the layer whose heads are unknown
        held = kv_heads_per_rank(kv_heads, group.kind.head_count, tp)
        if held is None:
            return None, [
                f"KV cache per rank unknown: layer {group.first}'s {kv_heads} KV heads neither "
                f"divide nor are divided by TP {tp}, and its query heads are unknown"
            ]
        if not group.kind.kv_shared:
            split[(held, kv_heads)] += group.count
    if arch.sliding_window and arch.sliding_window >= shape.seq_len:
        # A window as long as the compiled sequence caps nothing: every layer holds seq_len.
        per_rank_arch = per_rank_arch.model_copy(update={"sliding_window": None})
    kv = kv_cache_bytes(
        per_rank_arch,
        shape.seq_len,
        shape.batch_size,
        shape.kv_dtype,
        kv_heads_held=lambda kv_heads, heads: kv_heads_per_rank(kv_heads, heads, tp),
    )
    if kv.bytes is None:
        return None, [f"KV cache per rank unknown: missing {', '.join(kv.unknown)}"]
    heads = ", ".join(
        f"{held} of {total} KV heads on {n} layer{'s' if n > 1 else ''}"
        for (held, total), n in split.items()
    )
    notes = [*kv.notes, f"KV cache per rank at TP={tp}: {heads}"] if heads else list(kv.notes)
    return kv, notes


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
    shape: CompiledShape = field(default_factory=lambda: CompiledShape(None, None, None))
    # What was asked (None: the compiled shape), and whether the compiled shape serves it.
    context: int | None = None
    sequences: int | None = None
    compiled_for: bool | None = True
    kv: KVEstimate | None = None  # per rank, for the compiled shape (None: unknown)
    kv_unknown: list[str] = field(default_factory=list)  # why it is unknown

    @property
    def kv_per_rank_bytes(self) -> int | None:
        return self.kv.bytes if self.kv is not None else None

    @property
    def device_per_rank_bytes(self) -> int | None:
        """Weights + KV cache + reserve on one NeuronCore (None: a part is unknown)."""
        kv = self.kv_per_rank_bytes
        if self.per_rank_bytes is None or kv is None:
            return None
        return self.per_rank_bytes + kv + self.reserve_bytes

    @property
    def verdict(self) -> FitVerdict:
        if self.fits_device is False or self.fits_host is False:
            return FitVerdict.DOES_NOT_FIT
        if self.compiled_for is False:
            return FitVerdict.NOT_COMPILED
        if not self.complete:
            return FitVerdict.INCOMPLETE if self.groups else FitVerdict.UNKNOWN
        if self.fits_device is None or self.fits_host is None or self.compiled_for is None:
            return FitVerdict.UNKNOWN
        return FitVerdict.FITS

    @property
    def fits(self) -> bool | None:
        """True only when every group is resident, the compiled shape serves what was asked
        and it fits; False when it cannot fit or was not compiled for what was asked."""
        return {
            FitVerdict.FITS: True,
            FitVerdict.DOES_NOT_FIT: False,
            FitVerdict.NOT_COMPILED: False,
        }.get(self.verdict)


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
    context: int | None = None,
    max_output_tokens: int | None = None,
    sequences: int | None = None,
) -> NeuronFit:
    """Per-NeuronCore residency under the bundle's tensor-parallel degree — every parameter
    group's module, checked against the parameters the config implies, plus the KV cache of
    the compiled shape and the runtime reserve — and host RAM at deploy.

    ``context`` (tokens per sequence) and ``sequences`` are what-ifs: beyond the compiled
    ``seq_len`` / ``batch_size`` the verdict is ``not compiled for this``; left out, what is
    served is the compiled shape. ``modules`` evaluates another residency layout of the same
    bundle (a variant).
    """
    facts = manifest.neuron
    if facts is None:
        raise InvalidInput("not a Neuron bundle: it has no compile facts (neuron section)")
    if not 0 <= tolerance < 1:
        raise InvalidInput(f"tolerance {tolerance} must be in [0, 1)")
    if not 0 <= headroom_fraction < 1:
        raise InvalidInput(f"headroom {headroom_fraction} must be in [0, 1)")
    if context is not None and context < 1:
        raise InvalidInput(f"context {context} must be at least 1 token")
    if sequences is not None and sequences < 1:
        raise InvalidInput(f"concurrency {sequences} must be at least 1 sequence")
    reasons: list[str] = []
    shape = CompiledShape.of(facts)
    compiled_for, shape_reasons, shape_notes = shape.check(
        context, sequences, manifest.architecture.context_length, max_output_tokens
    )
    kv, kv_notes = kv_cache_per_rank(manifest.architecture, shape)
    kv_bytes = kv.bytes if kv is not None else None
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
    if kv_bytes is None:
        reasons.extend(kv_notes)
    complete = need is not None and not missing and not short and bool(contributors)
    per_rank = (
        None if unknown or not contributors else sum(c.per_rank_bytes or 0 for c in contributors)
    )
    budget = round(NEURON_CORE_HBM_BYTES * (1 - headroom_fraction))
    # Known shares alone may already be too much: then it cannot fit, whatever is unknown.
    counted = sum(c.per_rank_bytes or 0 for c in contributors) + (kv_bytes or 0)
    fits_device: bool | None
    if tp is not None and tp > neuron_cores:
        fits_device = False
    elif per_rank is None or kv_bytes is None:
        fits_device = False if counted + reserve_bytes > budget and tp is not None else None
    else:
        fits_device = counted + reserve_bytes <= budget
    if fits_device is False and tp is not None and tp <= neuron_cores:
        weights = counted - (kv_bytes or 0)
        kv_part = "unknown" if kv_bytes is None else f"{kv_bytes / GiB:.2f}"
        top = ", ".join(
            f"{c.name} {c.dtype} {c.placement} {(c.per_rank_bytes or 0) / GB:.2f} GB"
            for c in contributors[:3]
        )
        reasons.insert(
            0,
            f"{(counted + reserve_bytes) / GiB:.2f} GiB per NeuronCore (weights "
            f"{weights / GiB:.2f} + KV cache {kv_part} + reserve {reserve_bytes / GiB:.2f}) "
            f"exceeds the {budget / GiB:.2f} GiB budget by "
            f"{(counted + reserve_bytes - budget) / GiB:.2f} GiB; biggest: {top}",
        )
    # What was asked beyond the compiled shape leads, unless the bundle cannot fit at all.
    at = 1 if fits_device is False else 0
    reasons[at:at] = shape_reasons

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
    if modules is None:
        notes += shape_notes
        if kv_bytes is not None:
            notes += kv_notes
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
        shape=shape,
        context=context,
        sequences=sequences,
        compiled_for=compiled_for,
        kv=kv,
        kv_unknown=kv_notes if kv is None else [],
    )


def neuron_fit_for_target(
    manifest: Manifest,
    target: Target,
    *,
    reserve_bytes: int = DEFAULT_NEURON_RESERVE_BYTES,
    headroom_fraction: float = 0.10,
    tolerance: float = DEFAULT_RESIDENCY_TOLERANCE,
    context: int | None = None,
    max_output_tokens: int | None = None,
    sequences: int | None = None,
) -> list[NeuronFit]:
    """The recorded layout's fit on ``target``, then each tried variant's (``fit`` prints them
    all; its exit code follows the first), each at ``context`` tokens × ``sequences`` when
    asked (what a target serves: its ``serving.context`` / ``serving.parallel``), else at the
    compiled shape."""
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
            context=context,
            sequences=sequences,
            max_output_tokens=max_output_tokens,
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
