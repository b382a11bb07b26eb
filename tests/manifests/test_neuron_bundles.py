"""Gemma-4 26B-A4B bundles built here with the seed's dimensions (hidden 2816, 262,144-token
vocabulary, 128 experts / top-8) and small weight files: holds, residency, published layouts,
file references that try to leave the bundle, declared parameter counts."""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.manifests.build import build_manifest
from modelreg.manifests.neuron_fit import FitVerdict, neuron_fit_for_target
from modelreg.schemas.manifest import Manifest
from modelreg.targets import get_target

DATA = Path(__file__).resolve().parents[1] / "data"
MODEL_ID = "xbill9/gemma-4-26B-A4B-it-inferentia2-xlarge"
SOURCE = f"hf://{MODEL_ID}@{'a1' * 20}"
# What the int8 bundles were quantized from (a quantized record without it is held).
BASE_MODEL = f"google/gemma-4-26B-A4B-it@{'b2' * 20}"
SEED = "../shared/seeds/001_f0b27c556ce7a172.txt"


def _gemma4_config() -> dict[str, Any]:
    config = json.loads((DATA / "gemma-4-26b-a4b-it.config.json").read_text())
    config.pop("_source")
    # The released config is multimodal; a text-only neff carries the language model.
    config["vision_config"] = {"model_type": "gemma4_vision"}
    return config


def _neff_pt(path: Path) -> Path:
    """A model.pt the way torch.jit saves it: a zip, here with one small embedded neff."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("model/data.pkl", b"\x80\x04N.")
        archive.writestr("model/neuron/graph.neff", b"\0" * 4096)
    path.write_bytes(buffer.getvalue())
    return path


def _module(name: str, dtype: str, placement: str, groups: list[str]) -> dict[str, Any]:
    return {"name": name, "dtype": dtype, "placement": placement, "groups": groups, "source": SEED}


SQUEEZE = [
    _module("experts", "int8", "sharded", ["experts"]),
    _module("lm_head", "int8", "sharded", ["output"]),
    _module("shared dense MLP", "int8", "sharded", ["ffn"]),
    _module("attention", "bf16", "sharded", ["attention"]),
    _module("router, norms", "bf16", "replicated", ["router", "norms", "other"]),
]


def _slim_bundle(directory: Path, **deploy: Any) -> Path:
    """The seed's slim deploy: neff in model.pt, host-side embed_tokens.pt, config, and the
    deploy manifest stating everything the write-up measured."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(_gemma4_config()))
    _neff_pt(directory / "model.pt")
    (directory / "embed_tokens.pt").write_bytes(b"\0" * 2816)
    manifest: dict[str, Any] = {
        "host_embedding": {
            "file": "embed_tokens.pt",
            "bytes": 1_476_395_008,
            "hidden_size": 2816,
            "scale": math.sqrt(2816),
            "source": SEED,
        },
        "tp_degree": 2,
        "batch_size": 1,
        "seq_len": 512,
        "context_buckets": [128],
        "torch_dtype": "bfloat16",
        "quantized": True,
        "quantization_type": "per_channel_symmetric",
        "quantization_dtype": "int8",
        "modules": SQUEEZE,
        "compiler_version": "2.26.0",
        "nxd_version": "0.19.0",
        "sdk_version": "2.31.0",
        "deploy_host": {"peak_rss_bytes": 11_000_000_000, "swap_bytes": 40_000_000_000},
        "compile_host": {"peak_rss_bytes": 180_000_000_000, "instance": "inf2.8xlarge"},
    }
    manifest |= deploy
    (directory / "modelreg-deploy.json").write_text(json.dumps(manifest))
    return directory


def _build(bundle: Path, **kwargs: Any) -> Manifest:
    return build_manifest(
        [bundle],
        model_id=MODEL_ID,
        source=SOURCE,
        license_id="gemma",
        base_model=BASE_MODEL,
        **kwargs,
    ).manifest


def test_a_fully_pinned_26b_a4b_bundle_with_its_license_is_not_held(tmp_path: Path) -> None:
    manifest = _build(_slim_bundle(tmp_path / "bundle"))
    assert manifest.hold_reasons == []
    assert manifest.parameters.total.value == 25_233_141_790
    assert manifest.parameters.total.provenance == "config"
    assert manifest.parameters.active.value == 3_822_530_590
    assert manifest.label_check is not None and manifest.label_check.problems == []
    assert any("language model only" in n for n in manifest.notes)
    assert manifest.neuron is not None and manifest.neuron.neff_bytes == 4096


def test_add_keeps_the_bundles_stated_host_peaks(tmp_path: Path) -> None:
    manifest = _build(_slim_bundle(tmp_path / "bundle"))
    assert manifest.neuron is not None and manifest.neuron.deploy_host is not None
    assert manifest.neuron.deploy_host.peak_rss_bytes == 11_000_000_000
    assert manifest.neuron.deploy_host.swap_bytes == 40_000_000_000
    assert manifest.neuron.compile_host is not None
    assert manifest.neuron.compile_host.peak_rss_bytes == 180_000_000_000
    # The older spelling of the deploy peak is read too.
    legacy = _slim_bundle(tmp_path / "legacy", deploy_host=None, host_peak_rss_bytes=10**10)
    facts = _build(legacy).neuron
    assert facts is not None and facts.deploy_host is not None
    assert facts.deploy_host.peak_rss_bytes == 10**10


def test_the_squeeze_bundle_fits_inf2_xlarge(tmp_path: Path) -> None:
    manifest = _build(_slim_bundle(tmp_path / "bundle"))
    fit = neuron_fit_for_target(manifest, get_target("inf2.xlarge"))[0]
    assert fit.verdict is FitVerdict.FITS, fit.reasons
    embeddings = next(g for g in fit.groups if g.group == "embeddings")
    assert embeddings.held_by == "host embedding table embed_tokens.pt"


def test_an_experts_only_bundle_is_incomplete(tmp_path: Path) -> None:
    bundle = _slim_bundle(tmp_path / "bundle", modules=[SQUEEZE[0]])
    fit = neuron_fit_for_target(_build(bundle), get_target("inf2.xlarge"))[0]
    assert fit.verdict is FitVerdict.INCOMPLETE
    assert "output" in fit.missing_groups and "attention" in fit.missing_groups


def test_an_fp4_bundle_is_held_as_unsupported(tmp_path: Path) -> None:
    fp4_experts = dict(SQUEEZE[0], dtype="fp4")
    bundle = _slim_bundle(tmp_path / "bundle", modules=[fp4_experts, *SQUEEZE[1:]])
    holds = _build(bundle).hold_reasons
    assert len(holds) == 1
    assert holds[0].startswith("weight dtype fp4 (module experts) is not supported by NxD")


def test_an_nxdi_bundle_quantized_to_fp4_is_held(tmp_path: Path) -> None:
    bundle = tmp_path / "nxdi"
    bundle.mkdir()
    config = _gemma4_config() | {
        "neuron_config": {
            "tp_degree": 2,
            "seq_len": 512,
            "torch_dtype": "bfloat16",
            "quantized": True,
            "quantization_dtype": "f4e2m1fn_x4",
            "quantization_type": "per_channel_symmetric",
        }
    }
    (bundle / "neuron_config.json").write_text(json.dumps(config))
    holds = _build(bundle).hold_reasons
    assert any(h.startswith("weight dtype fp4 (quantization_dtype)") for h in holds)


SERVER = """\
import os

TP = 2
MAX = 512
BUCKET = 128
WORKERS = int(os.environ.get("WORKERS", "1"))
open(os.path.join(os.path.dirname(__file__), "ran"), "w").write("server code ran")
"""
DOCKERFILE = """\
FROM public.ecr.aws/neuron/pytorch-inference-neuronx:2.7.0-neuronx-py310-sdk2.31.0-ubuntu22.04
RUN pip install neuronx-cc==2.26.0 neuronx-distributed==0.19.0
COPY optb_server_sqz.py /app/
CMD ["python", "/app/optb_server_sqz.py"]
"""


def _published(directory: Path) -> Path:
    """The bundle as the seed published it: config, neff, embedding table, server, Dockerfile."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text(json.dumps(_gemma4_config()))
    _neff_pt(directory / "model.pt")
    (directory / "embed_tokens.pt").write_bytes(b"\0" * 2816)
    (directory / "optb_server_sqz.py").write_text(SERVER)
    (directory / "Dockerfile").write_text(DOCKERFILE)
    return directory


def test_a_published_bundle_is_read_without_a_modelreg_file(tmp_path: Path) -> None:
    bundle = _published(tmp_path / "published")
    manifest = _build(bundle)
    facts = manifest.neuron
    assert facts is not None and facts.layout == "published"
    assert not (bundle / "ran").exists(), "reading the bundle ran its server"
    assert (facts.tp_degree, facts.seq_len, facts.context_buckets) == (2, 512, [128])
    assert (facts.sdk_version, facts.compiler_version, facts.nxd_version) == (
        "2.31.0",
        "2.26.0",
        "0.19.0",
    )
    assert facts.derived_from["tp_degree"] == "optb_server_sqz.py"
    assert facts.derived_from["sdk_version"].startswith("Dockerfile: FROM")
    assert facts.neff_bytes == 4096 and facts.pt_archives == {
        "model.pt": ["model/neuron/graph.neff"]
    }
    assert facts.host_embedding is not None and facts.host_embedding.hidden_size == 2816
    roles = {f.path: f.role for f in manifest.files}
    assert roles["optb_server_sqz.py"] == "server" and roles["Dockerfile"] == "container"
    assert all(f.sha256 for f in manifest.files)
    # What the published files do not state stays unknown and holds the record.
    holds = " | ".join(manifest.hold_reasons)
    assert "quantization unknown" in holds and "host embedding scale unknown" in holds
    assert "tensor-parallel degree unknown" not in holds and "neuronx-cc" not in holds
    assert "size label" not in holds  # parameters come from the config


def test_a_published_bundle_that_states_nothing_is_held_for_each_unknown(tmp_path: Path) -> None:
    bundle = tmp_path / "bare"
    bundle.mkdir()
    (bundle / "config.json").write_text(json.dumps(_gemma4_config()))
    (bundle / "graph.neff").write_bytes(b"\0" * 1024)
    manifest = _build(bundle)
    assert manifest.neuron is not None and manifest.neuron.neff_bytes == 1024
    holds = " | ".join(manifest.hold_reasons)
    for unknown in (
        "tensor-parallel degree",
        "sequence length and context buckets",
        "neuronx-cc version",
    ):
        assert f"{unknown} unknown" in holds


def test_a_server_that_assigns_tp_twice_differently_states_nothing(tmp_path: Path) -> None:
    bundle = _published(tmp_path / "published")
    (bundle / "optb_server_sqz.py").write_text("TP = 2\nTP = 4\n")
    facts = _build(bundle).neuron
    assert facts is not None and facts.tp_degree is None and "tp_degree" not in facts.derived_from


def test_files_in_bundle_subdirectories_are_digested(tmp_path: Path) -> None:
    bundle = _slim_bundle(tmp_path / "bundle")
    (bundle / "weights").mkdir()
    (bundle / "weights" / "tp0_sharded_checkpoint.safetensors").write_bytes(b"x" * 64)
    paths = {f.path for f in _build(bundle).files}
    assert "weights/tp0_sharded_checkpoint.safetensors" in paths


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("../outside.pt", "must be a relative path inside the bundle"),
        ("/etc/hostname", "must be a relative path inside the bundle"),
        ("sub/../../outside.pt", "must be a relative path inside the bundle"),
        ("escape.pt", "leads outside the bundle through a symlink"),
    ],
)
def test_a_file_reference_cannot_leave_the_bundle(
    tmp_path: Path, reference: str, message: str
) -> None:
    outside = tmp_path / "outside.pt"
    outside.write_bytes(b"secret")
    bundle = _slim_bundle(tmp_path / "bundle")
    os.symlink(outside, bundle / "escape.pt")
    deploy = json.loads((bundle / "modelreg-deploy.json").read_text())
    deploy["host_embedding"]["file"] = reference
    (bundle / "modelreg-deploy.json").write_text(json.dumps(deploy))
    with pytest.raises(InvalidArtifact, match=message) as caught:
        _build(bundle)
    assert "\n" not in str(caught.value) and reference in str(caught.value)


def test_a_symlink_leading_out_of_the_bundle_is_refused(cli, tmp_path: Path) -> None:
    bundle = _slim_bundle(tmp_path / "bundle")
    (tmp_path / "secret").write_text("not part of the bundle")
    os.symlink(tmp_path / "secret", bundle / "Dockerfile")
    with pytest.raises(InvalidArtifact, match="'Dockerfile' leads outside the bundle"):
        _build(bundle)
    code, _, err = cli("add", bundle, "--model-id", MODEL_ID)
    assert code == 2 and "leads outside the bundle" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


def test_a_symlink_inside_the_bundle_is_the_file_it_names(tmp_path: Path) -> None:
    bundle = _slim_bundle(tmp_path / "bundle")
    os.symlink(bundle / "config.json", bundle / "config-link.json")
    paths = {f.path for f in _build(bundle).files}
    assert {"config.json", "config-link.json"} <= paths


def _unknown_family_bundle(directory: Path) -> Path:
    bundle = _slim_bundle(directory)
    (bundle / "config.json").write_text(json.dumps({"model_type": "gemma4_custom"}))
    return bundle


def test_declared_totals_settle_the_parameter_holds(tmp_path: Path) -> None:
    bundle = _unknown_family_bundle(tmp_path / "bundle")
    held = _build(bundle).hold_reasons
    assert any("total parameters are unknown" in h for h in held)
    card = "https://huggingface.co/google/gemma-4-26B-A4B-it"
    manifest = _build(
        bundle, total_params=25_200_000_000, active_params=3_800_000_000, params_source=card
    )
    assert manifest.parameters.total.value == 25_200_000_000
    assert manifest.parameters.total.provenance == f"declared:{card}"
    assert manifest.parameters.active.provenance == f"declared:{card}"
    assert manifest.hold_reasons == []


def test_a_declared_total_agreeing_with_the_config_is_noted_not_used(tmp_path: Path) -> None:
    manifest = _build(
        _slim_bundle(tmp_path / "bundle"),
        total_params=25_200_000_000,
        params_source="https://example.org/card",
    )
    assert manifest.parameters.total.provenance == "config"
    assert any("agree with the config count" in n for n in manifest.notes)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"total_params": 30_000_000_000, "params_source": "u"}, "contradicts the artifact's"),
        ({"total_params": 25_000_000_000}, "need `params_source`"),
        ({"params_source": "https://x"}, "without `total_params`"),
        ({"total_params": 0, "params_source": "u"}, "must be a positive"),
        ({"params_source": "a\nb", "total_params": 1}, "one line"),
    ],
)
def test_bad_declarations_are_bad_input(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        _build(_slim_bundle(tmp_path / "bundle"), **kwargs)


def test_declared_active_above_declared_total_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="exceed total"):
        _build(
            _unknown_family_bundle(tmp_path / "bundle"),
            total_params=4_000_000_000,
            active_params=25_000_000_000,
            params_source="https://example.org/card",
        )


def test_a_published_bundle_takes_declared_host_runs(tmp_path: Path) -> None:
    from modelreg.schemas.neuron import HostRun

    bundle = _published(tmp_path / "published")
    compile_run = HostRun(peak_rss_bytes=180 * 10**9, swap_bytes=100 * 10**9, source=SEED)
    deploy_run = HostRun(peak_rss_bytes=11 * 10**9, seconds=490.9, source=SEED)
    facts = _build(bundle, compile_host=compile_run, deploy_host=deploy_run).neuron
    assert facts is not None
    assert facts.compile_host == compile_run and facts.deploy_host == deploy_run
    with pytest.raises(InvalidInput, match="needs a source"):
        _build(bundle, deploy_host=HostRun(peak_rss_bytes=1))


def test_a_declared_host_run_may_not_contradict_the_bundle(tmp_path: Path) -> None:
    from modelreg.schemas.neuron import HostRun

    bundle = _slim_bundle(tmp_path / "bundle")  # states an 11 GB deploy peak
    with pytest.raises(InvalidInput, match="contradicts the bundle's own"):
        _build(bundle, deploy_host=HostRun(peak_rss_bytes=5 * 10**9, source="me"))


def test_host_runs_on_a_gguf_are_bad_input(smollm2: Path) -> None:
    from modelreg.schemas.neuron import HostRun

    with pytest.raises(InvalidInput, match="not one"):
        build_manifest([smollm2], deploy_host=HostRun(peak_rss_bytes=1, source="me"))
