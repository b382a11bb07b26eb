"""The scans at inspect / add: hostile templates and pickles hold the record with their coded
reason, through the manifest's hold_reasons, and no later declaration drops a hold."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.numpy import save_file

from modelreg.manifests.build import build_manifest
from modelreg.reasons import ReasonCode, hold_code
from tests.safety import hostile

BASE = "org/base-model@" + "a" * 40


def _codes(reasons: list[str]) -> set[ReasonCode]:
    return {hold_code(r) for r in reasons}


def _checkpoint(directory: Path, *, template: object = None, extra_bin: bool = True) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    save_file(
        {"model.embed_tokens.weight": np.zeros((8, 4), np.float32)},
        str(directory / "model.safetensors"),
    )
    (directory / "config.json").write_text(
        json.dumps({"model_type": "llama", "torch_dtype": "float32"})
    )
    config: dict[str, object] = {"tokenizer_class": "PreTrainedTokenizerFast"}
    if template is not None:
        config["chat_template"] = template
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    if extra_bin:
        hostile.torch_save_hostile(directory / "pytorch_model.bin")
    return directory


def test_hostile_gguf_template_holds_unsafe_template(tmp_path: Path) -> None:
    path = hostile.hostile_template_gguf(tmp_path / "SmolLM2-hostile.gguf")
    manifest = build_manifest(
        [path], model_id="HuggingFaceTB/SmolLM2-135M-Instruct", digest=False
    ).manifest
    held = [r for r in manifest.hold_reasons if hold_code(r) is ReasonCode.UNSAFE_TEMPLATE]
    assert len(held) == 1, manifest.hold_reasons
    assert "tokenizer.chat_template" in held[0] and "__init__.__globals__" in held[0]
    assert "(line 6: " in held[0] and "cycler.__init__.__globals__.os.popen" in held[0]
    (finding,) = [f for f in manifest.findings if f.code == "unsafe_template"]
    assert finding.file == path.name and finding.line == 6


def test_bundled_smollm2_has_no_finding(smollm2: Path) -> None:
    manifest = build_manifest(
        [smollm2], model_id="HuggingFaceTB/SmolLM2-135M-Instruct", digest=False
    ).manifest
    assert manifest.findings == []
    assert not _codes(manifest.hold_reasons) & {
        ReasonCode.UNSAFE_TEMPLATE,
        ReasonCode.UNSAFE_PICKLE,
    }


def test_named_gguf_template_variant_is_audited(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "named.gguf"
    writer = gguf.GGUFWriter(path, arch="llama")
    writer.add_chat_template(hostile.SMOLLM2_TEMPLATE)
    writer.add_string(
        "tokenizer.chat_template.tool_use", hostile.hostile_template("joiner-globals-os-system")
    )
    writer.add_tensor("token_embd.weight", np.zeros((4, 32), np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    manifest = build_manifest([path], digest=False).manifest
    (reason,) = [r for r in manifest.hold_reasons if r.startswith("unsafe_template")]
    assert "tokenizer.chat_template.tool_use" in reason


def test_checkpoint_with_hostile_template_list_and_pickle(tmp_path: Path) -> None:
    template = [
        {"name": "default", "template": hostile.SMOLLM2_TEMPLATE},
        {"name": "tool_use", "template": hostile.hostile_template("content-gated-instruction")},
    ]
    directory = _checkpoint(tmp_path / "ckpt", template=template)
    manifest = build_manifest([directory], digest=False).manifest
    reasons = manifest.hold_reasons
    assert any(
        r.startswith(
            "unsafe_template: tokenizer_config.json chat_template[tool_use]: writes instructions"
        )
        for r in reasons
    ), reasons
    assert any(
        r.startswith(
            "unsafe_pickle: pytorch_model.bin pytorch_model/data.pkl: imports posix.system"
        )
        for r in reasons
    ), reasons
    assert any(
        r.startswith("files a runtime would load are not part of the record: pytorch_model.bin")
        for r in reasons
    )


def test_chat_template_jinja_is_audited(tmp_path: Path) -> None:
    directory = _checkpoint(tmp_path / "ckpt", extra_bin=False)
    (directory / "chat_template.jinja").write_text(hostile.hostile_template("lipsum-globals"))
    manifest = build_manifest([directory], digest=False).manifest
    assert any(
        r.startswith("unsafe_template: chat_template.jinja: reaches Python internals")
        for r in manifest.hold_reasons
    )


def test_neuron_bundle_pickles_hold_the_record(tmp_path: Path) -> None:
    bundle = hostile.hostile_neuron_bundle(tmp_path / "bundle")
    manifest = build_manifest([bundle], digest=False).manifest
    pickles = [r for r in manifest.hold_reasons if hold_code(r) is ReasonCode.UNSAFE_PICKLE]
    assert any(
        r.startswith("unsafe_pickle: embed_tokens.pt ") and "posix.system" in r for r in pickles
    )
    assert any(r.startswith("unsafe_pickle: model.pt ") and "posix.system" in r for r in pickles)


@pytest.mark.parametrize(
    "options",
    [{"base_model": BASE}, {"total_params": 32, "params_source": "https://example.org/card"}],
    ids=["base-model", "total-params"],
)
def test_an_unrelated_option_keeps_the_unrecorded_file_hold(
    tmp_path: Path, options: dict[str, object]
) -> None:
    directory = _checkpoint(tmp_path / "ckpt")
    plain = build_manifest([directory], digest=False).manifest.hold_reasons
    declared = build_manifest([directory], digest=False, **options).manifest.hold_reasons  # type: ignore[arg-type]
    for reason in plain:
        if reason.startswith(("files a runtime would load", "unsafe_")):
            assert reason in declared


# Options and the holds each may settle: every other hold must survive it.
_OPTIONS = {
    "model_id": ({"model_id": "org/checkpoint"}, ("model id unknown",)),
    "source": ({"source": "sha256:" + "b" * 64}, ("source unknown",)),
    "license": ({"license_id": "apache-2.0"}, ("license unknown",)),
    "base_model": ({"base_model": BASE}, ("provenance_unknown",)),
    "total": ({"total_params": 32, "params_source": "https://example.org/card"}, ()),
    "prompts": ({"golden_prompts": []}, ()),
}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _checkpoint(
        tmp_path_factory.mktemp("prop") / "ckpt",
        template=hostile.hostile_template("str-mro-subclasses"),
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.sets(st.sampled_from(sorted(_OPTIONS))))
def test_no_combination_of_unrelated_options_drops_a_hold(
    checkpoint: Path, chosen: set[str]
) -> None:
    baseline = build_manifest([checkpoint], digest=False).manifest.hold_reasons
    options: dict[str, object] = {}
    settled: tuple[str, ...] = ()
    for name in sorted(chosen):
        given_options, settles = _OPTIONS[name]
        options |= given_options
        settled += settles
    held = build_manifest([checkpoint], digest=False, **options).manifest.hold_reasons  # type: ignore[arg-type]
    for reason in baseline:
        if not reason.startswith(settled) if settled else True:
            assert reason in held, (sorted(chosen), reason)


def test_verify_loads_nothing_from_a_record_held_for_its_template(tmp_path: Path) -> None:
    """Not for a run that counts, not to investigate: a record held for what its template
    would run is refused before any runtime renders it, and no run is written."""
    import modelreg
    from modelreg.errors import NotDeployable

    path = hostile.hostile_template_gguf(tmp_path / "SmolLM2-hostile.gguf")
    registry = modelreg.open(f"sqlite:///{tmp_path / 'r.db'}")
    record = registry.add(
        [path], model_id="HuggingFaceTB/SmolLM2-135M-Instruct", license_id="apache-2.0"
    ).record.record_id
    for investigate in (False, True):
        with pytest.raises(NotDeployable) as refused:
            registry.verify(record, "cpu", investigate=investigate)
        assert "verify loads nothing from a record held" in refused.value.message
        assert "unsafe_template" in refused.value.message
        assert refused.value.step is not None and refused.value.step.action == "records"
    assert registry.show(record).runs == []
