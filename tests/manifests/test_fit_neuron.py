"""The Gemma-4 26B-A4B bundle on inf2: the write-up's three layouts, module-complete residency,
the compiled shape (what it serves, the KV cache it holds), host budgets at deploy and at
compile."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from modelreg.errors import InvalidInput
from modelreg.manifests.neuron_fit import (
    FitVerdict,
    NeuronFit,
    kv_heads_per_rank,
    neuron_fit,
    neuron_fit_for_target,
    recommended_verify_timeout,
)
from modelreg.manifests.neuron_host import compile_host_fit
from modelreg.schemas.manifest import Manifest, load_manifest
from modelreg.schemas.neuron import NeuronModule
from modelreg.serving import Serving
from modelreg.targets import Target, get_target
from tests.conftest import REPO

BUNDLE = REPO / "manifests" / "gemma-4-26b-a4b-inf2-xlarge.json"
GB, GiB = 10**9, 1 << 30


def _bundle() -> Manifest:
    return load_manifest(json.loads(BUNDLE.read_text()), origin=str(BUNDLE))


def _fits(manifest: Manifest, target: str = "inf2.xlarge") -> list[NeuronFit]:
    return neuron_fit_for_target(manifest, get_target(target))


def _module(manifest: Manifest, group: str) -> NeuronModule:
    assert manifest.neuron is not None
    return next(m for m in manifest.neuron.modules if group in m.groups)


def test_fit_reproduces_the_three_layouts_of_the_write_up() -> None:
    squeeze, bf16_experts, bf16_head = _fits(_bundle())
    assert squeeze.layout == "recorded" and squeeze.verdict is FitVerdict.FITS
    # "Per-rank resident dropped to ~12–13 GB": 13.19 GB, i.e. 12.28 GiB per NeuronCore.
    assert squeeze.per_rank_bytes is not None
    assert 12 * GiB <= squeeze.per_rank_bytes <= 13 * GiB
    assert squeeze.complete and squeeze.missing_groups == []

    assert bf16_experts.layout == "all-bf16 experts"
    assert bf16_experts.verdict is FitVerdict.DOES_NOT_FIT
    experts = next(c for c in bf16_experts.contributors if c.name == "experts")
    # "the 128 experts are ~45.6 GB — ~22.8 GB per core"
    assert experts.per_rank_bytes == pytest.approx(22.8 * GB, rel=0.01)
    assert "experts bf16 sharded 22.84 GB" in bf16_experts.reasons[0]

    assert bf16_head.verdict is FitVerdict.DOES_NOT_FIT
    assert bf16_head.observed is not None and "Allocation Failure" in bf16_head.observed
    assert "lm_head" in bf16_head.reasons[0]
    # The squeeze saves what the write-up says: the head 1.48 -> ~0.37 GB/rank (1.11) and the
    # shared MLP ~0.27 GB/rank.
    assert bf16_head.per_rank_bytes is not None
    saved = bf16_head.per_rank_bytes - squeeze.per_rank_bytes
    assert saved == pytest.approx((1.11 + 0.27) * GB, rel=0.01)


def test_the_known_neff_size_is_shown_beside_the_computed_weights() -> None:
    squeeze = _fits(_bundle())[0]
    assert squeeze.neff_bytes == 26_800_000_000
    assert squeeze.weights_all_ranks_bytes == pytest.approx(26.4 * GB, rel=0.01)
    assert any("neff 26.8 GB" in note and "26.4 GB" in note for note in squeeze.notes)


def test_a_bundle_that_declares_only_its_experts_is_incomplete_never_fits() -> None:
    manifest = _bundle()
    assert manifest.neuron is not None
    manifest.neuron.modules = [_module(manifest, "experts")]
    fit = _fits(manifest)[0]
    assert fit.verdict is FitVerdict.INCOMPLETE and fit.fits is None
    assert fit.missing_groups == ["output", "attention", "router", "ffn", "norms", "other"]
    assert any("not accounted for: output, attention" in r for r in fit.reasons)
    # What it does declare would fit: the verdict must not say so.
    assert fit.per_rank_bytes is not None and fit.per_rank_bytes < 12 * GiB


def test_a_module_declaring_fewer_bytes_than_its_group_needs_is_incomplete() -> None:
    manifest = _bundle()
    head = _module(manifest, "output")
    head.bytes = 100_000_000  # int8 262,144 x 2816 is 738 MB: most of it is not accounted for
    fit = _fits(manifest)[0]
    assert fit.verdict is FitVerdict.INCOMPLETE
    assert any("declares 0.10 GB but its groups (output) need 0.74 GB" in r for r in fit.reasons)
    head.bytes = 740_000_000  # the write-up's rounding: within the stated tolerance
    assert _fits(manifest)[0].verdict is FitVerdict.FITS


def test_a_group_claimed_twice_or_an_unknown_dtype_is_incomplete() -> None:
    manifest = _bundle()
    assert manifest.neuron is not None
    manifest.neuron.modules.append(_module(manifest, "experts").model_copy())
    assert _fits(manifest)[0].verdict is FitVerdict.DOES_NOT_FIT  # 2× experts: over anyway
    manifest = _bundle()
    _module(manifest, "ffn").dtype = "int3"
    fit = _fits(manifest)[0]
    assert fit.verdict is FitVerdict.INCOMPLETE
    assert any("dtype 'int3' unknown" in r for r in fit.reasons)


def test_without_parameter_groups_the_fit_is_unknown() -> None:
    manifest = _bundle()
    manifest.parameters.groups = None
    fit = _fits(manifest)[0]
    assert fit.verdict is FitVerdict.UNKNOWN
    assert any("parameter groups unknown" in r for r in fit.reasons)


def test_tp_degree_beyond_the_instance_fails() -> None:
    manifest = _bundle()
    assert manifest.neuron is not None
    manifest.neuron.tp_degree = 32
    fit = _fits(manifest, "inf2.48xlarge")[0]
    assert fit.fits is False and "needs 32 NeuronCores" in fit.reasons[0]


def test_the_old_signature_still_answers() -> None:
    t = get_target("inf2.xlarge")
    fit = neuron_fit(_bundle(), t.neuron_cores, t.memory_bytes)
    assert fit.fits is True and fit.contributors[0].name == "experts"


def test_deploy_host_peak_is_checked_against_ram_plus_declared_swap() -> None:
    manifest = _bundle()
    assert manifest.neuron is not None and manifest.neuron.deploy_host is not None
    fit = _fits(manifest)[0]
    assert fit.host is not None and fit.host.needed_bytes == 11_000_000_000  # "~11 GB"
    assert fit.fits_host is True
    assert any("40.00 GB of swap" in n for n in fit.notes)  # the recipe's swapfile
    manifest.neuron.deploy_host.peak_rss_bytes = 20 * GiB  # more than 16 GiB of RAM
    assert _fits(manifest)[0].fits_host is False
    with_swap = Target(
        "inf2-swap",
        "neuron",
        "inf2.xlarge with a 40 GB swapfile",
        16 * GiB,
        None,
        False,
        neuron_cores=2,
        swap_bytes=40 * GB,
    )
    assert neuron_fit_for_target(manifest, with_swap)[0].fits_host is True


def test_compile_host_needs_ram_plus_swap_as_the_compile_did(monkeypatch) -> None:
    manifest = _bundle()
    plain = compile_host_fit(manifest, get_target("inf2.8xlarge"))
    assert plain.fits is False  # ~180 GB peak OOMs the 8xlarge's 128 GB
    assert "needs 167.64 GiB" in plain.reasons[0] and "0 GiB declared swap" in plain.reasons[0]
    reference = REPO / "manifests" / "targets.yaml"
    swapped = compile_host_fit(manifest, get_target("inf2-8xlarge-swap100", reference))
    assert swapped.fits is True and swapped.swap_bytes == pytest.approx(100 * GB, rel=0.001)
    assert compile_host_fit(manifest, get_target("inf2.48xlarge")).fits is True


def test_compile_host_unknown_is_not_a_fit() -> None:
    manifest = _bundle()
    assert manifest.neuron is not None
    manifest.neuron.compile_host = None
    fit = compile_host_fit(manifest, get_target("inf2.48xlarge"))
    assert fit.fits is None and "unknown" in fit.reasons[0]


def test_verify_timeout_covers_the_measured_cold_start() -> None:
    manifest = _bundle()
    timeout, why = recommended_verify_timeout(manifest, get_target("inf2.xlarge"))
    assert timeout == 900 and "491 s" in why  # READY in 490.9 s, inside the inf2 default
    assert manifest.neuron is not None and manifest.neuron.deploy_host is not None
    manifest.neuron.deploy_host.seconds = 1200
    assert recommended_verify_timeout(manifest, get_target("inf2.xlarge"))[0] == 1800


def test_a_cpu_target_is_refused_for_a_neuron_fit() -> None:
    with pytest.raises(InvalidInput, match="inf2 targets"):
        neuron_fit_for_target(_bundle(), get_target("cpu"))


def test_fit_cli_on_inf2(cli) -> None:
    code, out, _ = cli("fit", BUNDLE, "--target", "inf2.xlarge", "--json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "fits"
    assert report["detail"]["contributors"][0]["name"] == "experts"
    code, _, err = cli("fit", BUNDLE, "--target", "cpu")
    assert code == 2 and "inf2" in err


# The compiled shape: seq_len 512 (prompt bucket 128), batch 1, TP 2, bf16. Per rank at TP=2
# the 25 sliding layers hold 4 of their 8 KV heads (head_dim 256), the 5 global layers 1 of
# their 2 (head_dim 512); the window (1024) is longer than seq_len and caps nothing.
SEED_KV_PER_RANK = 25 * 4 * (256 + 256) * 512 * 2 + 5 * 1 * (512 + 512) * 512 * 2


def _shape(manifest: Manifest, **facts: object) -> Manifest:
    assert manifest.neuron is not None
    for name, value in facts.items():
        setattr(manifest.neuron, name, value)
    return manifest


def test_the_kv_cache_per_rank_is_sized_from_the_compiled_shape() -> None:
    fit = _fits(_bundle())[0]
    assert fit.kv_per_rank_bytes == SEED_KV_PER_RANK == 57_671_680  # 55 MiB
    assert fit.kv is not None and (fit.kv.tokens, fit.kv.sequences) == (512, 1)
    assert fit.kv.kv_dtype == "bf16" and fit.kv.sliding_layers == 0
    assert fit.shape.describe() == "seq_len 512 (buckets 128), batch_size 1, TP 2, KV bf16"
    assert any("4 of 8 KV heads on 25 layers, 1 of 2 KV heads on 5 layers" in n for n in fit.notes)
    # The seed's squeeze loaded on inf2.xlarge at TP=2: weights + KV + reserve still fit.
    assert fit.verdict is FitVerdict.FITS
    assert fit.per_rank_bytes is not None and fit.device_per_rank_bytes is not None
    assert fit.device_per_rank_bytes == fit.per_rank_bytes + SEED_KV_PER_RANK + 2 * GiB
    assert fit.device_per_rank_bytes <= fit.core_budget_bytes


def test_a_longer_or_wider_compile_pays_for_its_kv_cache() -> None:
    wider = _fits(_shape(_bundle(), seq_len=1024, batch_size=2))[0]
    assert wider.kv_per_rank_bytes == 4 * SEED_KV_PER_RANK
    # At 4096 tokens the sliding layers hold only their 1024-token window.
    longer = _fits(_shape(_bundle(), seq_len=4096))[0]
    assert longer.kv is not None and longer.kv.sliding_layers == 25
    assert longer.kv_per_rank_bytes == 25 * 4 * 512 * 1024 * 2 + 5 * 1 * 1024 * 4096 * 2
    # The trained context, compiled: 2.6 GiB of KV per rank no longer fits beside the weights.
    full = _fits(_shape(_bundle(), seq_len=262_144))[0]
    assert full.verdict is FitVerdict.DOES_NOT_FIT
    assert "(weights 12.28 + KV cache 2.60 + reserve 2.00)" in full.reasons[0]


@pytest.mark.parametrize(
    ("kv_heads", "heads", "tp", "per_rank"),
    [
        (8, 16, 2, 4),  # TP divides the KV heads: split evenly
        (2, 16, 2, 1),
        (1, 16, 2, 1),  # fewer KV heads than ranks: replicated, one on every rank
        (4, 32, 8, 1),
        (16, 16, 32, 1),  # MHA on more ranks than heads
        (3, 24, 2, 12),  # neither divides: NxD converts to MHA, 24 query heads over 2 ranks
        (3, 25, 2, 13),  # ... its query heads padded to a multiple of TP
        (3, None, 2, None),  # ... which needs the query heads
    ],
)
def test_kv_heads_per_rank_follow_nxd_gqa_sharding(
    kv_heads: int, heads: int | None, tp: int, per_rank: int | None
) -> None:
    assert kv_heads_per_rank(kv_heads, heads, tp) == per_rank


def test_the_issues_what_if_is_not_compiled_for_this() -> None:
    recorded, *variants = neuron_fit_for_target(
        _bundle(), get_target("inf2.xlarge"), context=100_000, sequences=4
    )
    assert recorded.verdict is FitVerdict.NOT_COMPILED and recorded.fits is False
    assert recorded.compiled_for is False
    assert recorded.reasons[:2] == [
        "compiled for seq_len 512 (buckets 128), asked 100000 tokens: recompile with "
        "seq_len ≥ 100000",
        "compiled for batch_size 1, asked 4 sequences: recompile with batch_size ≥ 4",
    ]
    # The KV cache stays the compiled one: a what-if does not resize a NEFF.
    assert recorded.kv_per_rank_bytes == SEED_KV_PER_RANK
    # The layouts that do not fit at all still say so first.
    for variant in variants:
        assert variant.verdict is FitVerdict.DOES_NOT_FIT
        assert "exceeds the 14.40 GiB budget" in variant.reasons[0]
        assert "recompile with seq_len ≥ 100000" in variant.reasons[1]


@pytest.mark.parametrize(
    ("context", "sequences", "verdict"),
    [
        (None, None, FitVerdict.FITS),  # nothing asked: the compiled shape is served
        (512, None, FitVerdict.FITS),
        (513, None, FitVerdict.NOT_COMPILED),
        (128, 1, FitVerdict.FITS),
        (None, 2, FitVerdict.NOT_COMPILED),
    ],
)
def test_the_compiled_shape_bounds_what_is_served(
    context: int | None, sequences: int | None, verdict: FitVerdict
) -> None:
    fit = neuron_fit_for_target(
        _bundle(), get_target("inf2.xlarge"), context=context, sequences=sequences
    )[0]
    assert fit.verdict is verdict, fit.reasons
    assert (fit.context, fit.sequences) == (context, sequences)


def test_a_context_beyond_the_largest_bucket_is_noted() -> None:
    fit = neuron_fit_for_target(_bundle(), get_target("inf2.xlarge"), context=512)[0]
    assert any("a prompt may be at most 128 tokens" in n for n in fit.notes)


def test_a_context_beyond_the_trained_one_is_not_a_recompile() -> None:
    fit = neuron_fit_for_target(_bundle(), get_target("inf2.xlarge"), context=300_000)[0]
    assert fit.verdict is FitVerdict.NOT_COMPILED
    assert "beyond the model's trained context 262144 too" in fit.reasons[0]


def test_without_seq_len_the_largest_bucket_bounds_and_the_kv_is_unknown() -> None:
    manifest = _shape(_bundle(), seq_len=None)
    over = neuron_fit_for_target(manifest, get_target("inf2.xlarge"), context=200)[0]
    assert over.verdict is FitVerdict.NOT_COMPILED
    assert over.reasons[0] == (
        "compiled for context buckets up to 128 (seq_len not recorded), asked 200 tokens: "
        "recompile with seq_len ≥ 200"
    )
    within = neuron_fit_for_target(manifest, get_target("inf2.xlarge"), context=100)[0]
    assert within.compiled_for is True
    # The cache is allocated for seq_len, which is not recorded: never "fits".
    assert within.verdict is FitVerdict.UNKNOWN and within.fits is None
    assert within.kv is None and "KV cache per rank unknown: seq_len not recorded" in within.reasons


def test_unknown_compiled_facts_asked_for_are_unknown_never_fits() -> None:
    manifest = _shape(_bundle(), seq_len=None, context_buckets=[])
    fit = neuron_fit_for_target(manifest, get_target("inf2.xlarge"), context=100)[0]
    assert fit.compiled_for is None and fit.verdict is FitVerdict.UNKNOWN and fit.fits is None
    assert fit.reasons[0] == (
        "seq_len and context buckets unknown: cannot tell whether the bundle serves 100 tokens "
        "(record seq_len)"
    )
    assert _fits(manifest)[0].fits is None  # nothing asked: the KV cache is still unknown
    manifest = _shape(_bundle(), batch_size=None)
    fit = neuron_fit_for_target(manifest, get_target("inf2.xlarge"), sequences=2)[0]
    assert fit.verdict is FitVerdict.UNKNOWN
    assert fit.reasons[0].startswith("batch_size unknown: cannot tell whether the bundle serves 2")


def test_the_kv_dtype_is_the_bundles_compute_dtype() -> None:
    assert _fits(_shape(_bundle(), torch_dtype="float32"))[0].kv_per_rank_bytes == (
        2 * SEED_KV_PER_RANK
    )
    for dtype in (None, "int8"):  # not a float dtype the cache could be held in
        fit = _fits(_shape(_bundle(), torch_dtype=dtype))[0]
        assert fit.kv is None and fit.verdict is FitVerdict.UNKNOWN
        assert any("KV dtype (a float torch_dtype) not recorded" in r for r in fit.reasons)


def test_host_compat_checks_what_an_inf2_target_serves() -> None:
    from types import SimpleNamespace

    from modelreg.schemas.verification import Outcome
    from modelreg.validators.base import CheckContext, VerifyOptions
    from modelreg.validators.host_compat import HostCompatCheck

    def check(serving: Serving | None) -> tuple[Outcome, str | None, str]:
        target = dataclasses.replace(get_target("inf2.xlarge"), serving=serving)
        record: Any = SimpleNamespace(manifest=_bundle())
        result = HostCompatCheck().run(CheckContext(record, target, {}, VerifyOptions()))
        return result.outcome, result.classification, result.summary

    outcome, _, summary = check(Serving(context=512, parallel=1))
    assert outcome is Outcome.PASS and "0.05 GiB KV cache for 512 tokens × 1 seq" in summary
    outcome, classification, summary = check(Serving(context=4096, parallel=2))
    assert outcome is Outcome.FAIL and classification == "not_compiled_for_this"
    assert "recompile with seq_len ≥ 4096" in summary and "batch_size ≥ 2" in summary
    assert check(None)[0] is Outcome.PASS  # no serving declared: the compiled shape
