"""The Gemma-4 26B-A4B all-int8 bundle on inf2.xlarge, with the write-up's numbers."""

from __future__ import annotations

import json

from modelreg.manifests.fit import neuron_fit
from modelreg.schemas.manifest import Manifest, load_manifest
from modelreg.targets import get_target
from tests.conftest import REPO

BUNDLE = REPO / "manifests" / "gemma-4-26b-a4b-inf2-xlarge.json"


def _bundle() -> Manifest:
    return load_manifest(json.loads(BUNDLE.read_text()), origin=str(BUNDLE))


def _fit(manifest: Manifest, target: str = "inf2.xlarge"):  # type: ignore[no-untyped-def]
    t = get_target(target)
    return neuron_fit(manifest, t.neuron_cores, t.memory_bytes)


def test_all_int8_squeeze_fits_inf2_xlarge() -> None:
    fit = _fit(_bundle())
    assert fit.fits is True
    assert 12e9 <= (fit.per_rank_bytes or 0) <= 13e9  # "~12–13 GB resident per rank"
    assert fit.contributors[0].name == "experts"


def test_bf16_experts_do_not_fit_and_the_report_names_them() -> None:
    manifest = _bundle()
    assert manifest.neuron is not None
    experts = manifest.neuron.modules[0]
    experts.dtype, experts.bytes = "bf16", 45_600_000_000
    fit = _fit(manifest)
    assert fit.fits is False
    assert (fit.per_rank_bytes or 0) > 22.8e9  # ~22.8 GB of experts per rank alone
    assert "experts bf16 sharded 22.80 GB" in fit.reasons[0]


def test_replicated_bf16_lm_head_does_not_fit() -> None:
    manifest = _bundle()
    assert manifest.neuron is not None
    head = manifest.neuron.modules[1]
    head.dtype, head.placement, head.bytes = "bf16", "replicated", 1_480_000_000
    fit = _fit(manifest)
    assert fit.fits is False and "lm_head" in fit.reasons[0]


def test_tp_degree_beyond_the_instance_fails() -> None:
    manifest = _bundle()
    assert manifest.neuron is not None
    manifest.neuron.tp_degree = 32
    fit = _fit(manifest, "inf2.48xlarge")
    assert fit.fits is False and "needs 32 NeuronCores" in fit.reasons[0]


def test_unknown_module_bytes_mean_unknown_fit() -> None:
    manifest = _bundle()
    assert manifest.neuron is not None
    manifest.neuron.modules[2].bytes = None
    assert _fit(manifest).fits is None


def test_fit_cli_on_inf2(cli) -> None:
    code, out, _ = cli("fit", BUNDLE, "--target", "inf2.xlarge", "--json")
    report = json.loads(out)
    assert code == 0 and report["verdict"] == "fits"
    assert report["detail"]["contributors"][0]["name"] == "experts"
    code, _, err = cli("fit", BUNDLE, "--target", "cpu")
    assert code == 2 and "inf2" in err
