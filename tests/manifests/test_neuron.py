"""Neuron bundle reading: compile facts, .pt files inspected as zips and never unpickled."""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from pathlib import Path

import pytest

from modelreg.errors import InvalidArtifact, InvalidInput
from modelreg.manifests.build import build_manifest


class _Payload:
    """Unpickling this creates a file: proof of code execution."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (open, (str(self.marker), "w"))


def _evil_pt(path: Path, marker: Path) -> Path:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("model/data.pkl", pickle.dumps(_Payload(marker)))
        archive.writestr("model/neuron/graph.neff", b"\0" * 4096)
    path.write_bytes(buffer.getvalue())
    return path


def _nxdi(directory: Path, neuron_config: dict[str, object]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "neuron_config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 64,
                "num_attention_heads": 4,
                "num_hidden_layers": 2,
                "vocab_size": 100,
                "intermediate_size": 128,
                "tie_word_embeddings": True,
                "neuron_config": neuron_config,
            }
        )
    )
    return directory


def test_adding_a_bundle_never_unpickles_its_pt_files(cli, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    bundle = _nxdi(
        tmp_path / "bundle",
        {"tp_degree": 2, "batch_size": 1, "seq_len": 512, "torch_dtype": "bfloat16"},
    )
    _evil_pt(bundle / "model.pt", marker)
    code, out, err = cli("add", bundle, "--model-id", "t/evil", "--license", "mit", "--json")
    assert code == 0, err
    assert not marker.exists(), "inspecting the bundle ran code from it"
    neuron = json.loads(out)["manifest"]["neuron"]
    assert neuron["layout"] == "nxdi" and neuron["tp_degree"] == 2
    assert neuron["pt_archives"] == {"model.pt": ["model/neuron/graph.neff"]}
    assert neuron["neff_bytes"] == 4096
    # the payload is real: unpickling it does create the file
    with zipfile.ZipFile(bundle / "model.pt") as archive:
        pickle.loads(archive.read("model/data.pkl"))
    assert marker.exists()


def test_slim_bundle_facts(slim_bundle: Path) -> None:
    m = build_manifest([slim_bundle], model_id="google/gemma-3-270m").manifest
    assert m.format == "neuron" and m.runtime.runtime == "neuron"
    assert m.neuron is not None and m.neuron.layout == "slim-host-embedding"
    assert m.neuron.host_embedding is not None
    assert m.neuron.host_embedding.hidden_size == 640
    assert m.architecture.architecture == "gemma3_text"
    assert m.parameters.total.value == 268_098_176  # from config.json
    roles = {f.path: f.role for f in m.files}
    assert roles["model.pt"] == roles["embed_tokens.pt"] == "weights"


def test_optimum_neuron_export(tmp_path: Path) -> None:
    bundle = tmp_path / "optimum"
    bundle.mkdir()
    (bundle / "neuron_config.json").write_text(
        json.dumps(
            {
                "num_cores": 2,
                "batch_size": 1,
                "sequence_length": 4096,
                "auto_cast_type": "bf16",
                "neuronxcc_version": "2.26.0",
                "optimum_neuron_version": "0.4.0",
            }
        )
    )
    m = build_manifest([bundle], model_id="t/o", license_id="mit").manifest
    assert m.neuron is not None and m.neuron.layout == "optimum-neuron"
    assert (m.neuron.tp_degree, m.neuron.compiler_version) == (2, "2.26.0")


@pytest.mark.parametrize(
    ("neuron_config", "error", "message"),
    [
        ({"batch_size": 1}, InvalidArtifact, "tp_degree missing"),
        ({"tp_degree": 32}, InvalidInput, "larger than any inf2 instance"),
    ],
)
def test_bad_neuron_config(
    tmp_path: Path, neuron_config: dict[str, object], error: type[Exception], message: str
) -> None:
    bundle = _nxdi(tmp_path / "b", neuron_config)
    with pytest.raises(error, match=message):
        build_manifest([bundle], model_id="t/x")


def test_model_pt_that_is_not_a_zip(cli, tmp_path: Path) -> None:
    bundle = _nxdi(tmp_path / "b", {"tp_degree": 2})
    (bundle / "model.pt").write_bytes(b"\x80\x04not a zip")
    code, _, err = cli("add", bundle, "--model-id", "t/x")
    assert code == 2 and "not a zip archive" in err and "Traceback" not in err
