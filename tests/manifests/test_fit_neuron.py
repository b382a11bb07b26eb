"""The Gemma-4 26B-A4B bundle on inf2: the write-up's three layouts, module-complete residency,
host budgets at deploy and at compile."""

from __future__ import annotations

import json

import pytest

from modelreg.errors import InvalidInput
from modelreg.manifests.neuron_fit import (
    FitVerdict,
    NeuronFit,
    compile_host_fit,
    neuron_fit,
    neuron_fit_for_target,
    recommended_verify_timeout,
)
from modelreg.schemas.manifest import Manifest, NeuronModule, load_manifest
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
    monkeypatch.setenv("MODELREG_TARGETS", str(REPO / "manifests" / "targets.yaml"))
    swapped = compile_host_fit(manifest, get_target("inf2-8xlarge-swap100"))
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
