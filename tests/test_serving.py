"""What a target serves (issue 23 item 2): the ``serving`` block, the launch flags read for
the same facts, their disagreement refused, and memory sized for exactly that."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelreg.errors import InvalidInput
from modelreg.manifests.fit import kv_cache_bytes, memory_fit
from modelreg.schemas.manifest import ArchitectureFacts
from modelreg.serving import launch_serving
from modelreg.targets import targets_in_file
from tests.conftest import REPO

SERVER = "/opt/llama.cpp/build/bin/llama-server"


def _targets(tmp_path: Path, body: str) -> Path:
    spec = tmp_path / "targets.yaml"
    spec.write_text("targets:\n" + body)
    return spec


def _launch(*flags: str | int) -> str:
    return json.dumps([SERVER, "-m", "{model}", "--port", "{port}", *map(str, flags)])


def test_serving_block_is_read(tmp_path: Path) -> None:
    spec = _targets(
        tmp_path,
        "  box:\n    serving: {context: 32768, parallel: 4, max_output_tokens: 1024,"
        " kv_dtype: q8_0}\n",
    )
    serving = targets_in_file(spec)["box"].serving
    assert serving is not None
    assert (serving.context, serving.parallel, serving.max_output_tokens) == (32768, 4, 1024)
    assert (serving.kv_dtype_k, serving.kv_dtype_v, serving.source) == ("q8_0", "q8_0", "serving")
    assert targets_in_file(_targets(tmp_path, "  plain: {}\n"))["plain"].serving is None


def test_launch_flags_give_what_is_served(tmp_path: Path) -> None:
    # llama-server's -c is the whole cache, split over -np slots.
    launch = _launch("-c", 16384, "-np", 2, "-ctk", "q8_0", "--n-predict", 256)
    serving = targets_in_file(_targets(tmp_path, f"  box:\n    launch: {launch}\n"))["box"].serving
    assert serving is not None
    assert (serving.context, serving.parallel, serving.kv_sequences) == (8192, 2, 2)
    assert (serving.kv_dtype_k, serving.kv_dtype_v) == ("q8_0", "f16")  # -ctv stays f16
    assert serving.max_output_tokens == 256 and serving.source == "launch"
    assert serving.kv_dtype == "q8_0/f16"
    unified = launch_serving([SERVER, "--ctx-size=16384", "--parallel", "4", "--kv-unified"])
    assert unified == {"context": 16384, "parallel": 4, "unified": True}
    assert launch_serving([SERVER, "-c", "0"]) == {"context": 0}
    # llama-cpp-python's server: --n_ctx for its one sequence.
    assert launch_serving(["python", "-m", "llama_cpp.server", "--n_ctx", "2048"]) == {
        "context": 2048
    }
    # Another program's -c is not a context size.
    assert launch_serving(["python", "-c", "print(1)", "{model}", "{port}"]) == {}


def test_serving_and_launch_must_agree(tmp_path: Path) -> None:
    agree = _targets(
        tmp_path,
        f"  box:\n    launch: {_launch('-c', 8192)}\n    serving: {{context: 8192, parallel: 1}}\n",
    )
    serving = targets_in_file(agree)["box"].serving
    assert serving is not None and serving.source == "serving and launch"
    disagree = _targets(
        tmp_path, f"  box:\n    launch: {_launch('-c', 4096)}\n    serving: {{context: 8192}}\n"
    )
    with pytest.raises(InvalidInput) as caught:
        targets_in_file(disagree)
    assert "targets.box.serving.context: 8192 declared, the launch gives 4096" in str(caught.value)
    launch = _launch("-ctk", "q4_0")
    types = _targets(tmp_path, f"  box:\n    launch: {launch}\n    serving: {{kv_dtype: q8_0}}\n")
    with pytest.raises(InvalidInput, match="kv_dtype: q8_0 declared, the launch gives q4_0"):
        targets_in_file(types)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("serving: {context: 0}", "serving.context"),
        ("serving: {context: -5}", "serving.context"),
        ("serving: {context: 100000000}", "serving.context"),
        ("serving: {parallel: 0}", "serving.parallel"),
        ("serving: {parallel: 100000}", "serving.parallel"),
        ("serving: {max_output_tokens: 0}", "serving.max_output_tokens"),
        ("serving: {kv_dtype: q3_k}", "serving.kv_dtype"),
        ("serving: {context: many}", "serving.context"),
        ("serving: {ctx: 4096}", "serving.ctx"),
        (f"launch: {_launch('-c', 'lots')}", "launch: -c 'lots' is not a whole number"),
        (f"launch: {_launch('-c')}", "launch: -c ends the command"),
        (f"launch: {_launch('-c', 1, '--ctx-size', 2)}", "launch: -c/--ctx-size"),
        (f"launch: {_launch('-np', 0)}", "launch: --parallel 0 is out of range"),
        (f"launch: {_launch('-ctv', 'q2')}", "launch: --cache-type-v 'q2' is not one of"),
    ],
)
def test_bad_serving_is_one_line_naming_the_field(tmp_path: Path, body: str, field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        targets_in_file(_targets(tmp_path, f"  box:\n    {body}\n"))
    message = str(caught.value)
    assert "\n" not in message and f"box.{field}" in message, message


def test_serving_is_part_of_the_target_definition_only_when_declared(tmp_path: Path) -> None:
    from modelreg.fingerprint import target_definition

    plain = targets_in_file(_targets(tmp_path, "  box: {}\n"))["box"]
    assert not any("serving" in key for key in target_definition(plain))
    served = targets_in_file(_targets(tmp_path, "  box:\n    serving: {context: 4096}\n"))["box"]
    wider = targets_in_file(_targets(tmp_path, "  box:\n    serving: {context: 8192}\n"))["box"]
    assert target_definition(served) != target_definition(wider)


GQA = ArchitectureFacts(
    architecture="llama",
    context_length=8192,
    block_count=30,
    embedding_length=576,
    head_count=9,
    head_count_kv=3,
)


def test_kv_for_separate_key_and_value_types() -> None:
    # SmolLM2-135M: 30 layers × 3 KV heads × 64 dims; K in q8_0 (34/32 B), V in f16 (2 B).
    kv = kv_cache_bytes(GQA, 8192, 2, "q8_0", "f16")
    assert kv.bytes == round(30 * 3 * 64 * 8192 * 2 * (34 / 32 + 2))
    assert kv.kv_dtype == "q8_0/f16"
    assert kv_cache_bytes(GQA, 8192, 1, "q4_1").bytes == round(30 * 3 * 128 * 8192 * 20 / 32)


def test_a_context_beyond_the_trained_one_does_not_fit() -> None:
    from modelreg.schemas.manifest import Manifest

    manifest = Manifest.model_validate(
        json.loads((REPO / "manifests" / "gemma-4-26b-a4b-q8_0-avx1-xeon.json").read_text())
    )
    arch = manifest.architecture.model_copy(update={"context_length": 8192})
    manifest = manifest.model_copy(update={"architecture": arch})
    fit = memory_fit(manifest, 64 << 30, context=100_000)
    assert fit.fits is False
    assert "context 100000 exceeds the model's trained context 8192" in fit.reasons
    # Whatever else is unknown (this reference manifest has no tensor bytes), a context past
    # the trained one is a "does not fit", and within it the answer stays unknown.
    assert memory_fit(manifest, 64 << 30, context=8192).fits is None
