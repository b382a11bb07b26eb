"""Weight dtypes per Neuron stack version: the packaged table and the holds it causes."""

from __future__ import annotations

from typing import Any

import pytest

from modelreg.manifests.neuron_dtypes import (
    canonical_dtype,
    dtype_bytes,
    dtype_support_problems,
    lookup,
    support_table,
)
from modelreg.schemas.neuron import NeuronFacts


def _facts(**overrides: Any) -> NeuronFacts:
    base: dict[str, Any] = {
        "layout": "slim-host-embedding",
        "tp_degree": 2,
        "nxd_version": "0.19.0",
        "modules": [
            {"name": "experts", "dtype": "int8", "placement": "sharded"},
            {"name": "attention", "dtype": "bf16", "placement": "sharded"},
        ],
    }
    return NeuronFacts.model_validate(base | overrides)


def test_the_table_is_packaged_and_every_entry_has_a_source() -> None:
    table = support_table()
    assert table.base_dtypes == {"bf16", "fp16", "fp32"} and table.base_sources
    assert {entry.stack for entry in table.stacks} == {"nxd", "optimum-neuron"}
    for entry in table.stacks:
        assert entry.sources and all(s.strip() for s in entry.sources)
    nxd = lookup("nxd", "0.19.0")
    assert nxd is not None and nxd.quantized_weight_dtypes == {"int8", "f8e4m3", "f8e5m2"}
    assert "fp4" in nxd.not_supported


def test_int8_and_bf16_on_nxd_019_are_supported() -> None:
    assert dtype_support_problems(_facts()) == []


@pytest.mark.parametrize("spelling", ["fp4", "F4E2M1FN_X4", "mxfp4"])
def test_fp4_experts_on_the_seed_stack_are_held_as_unsupported(spelling: str) -> None:
    facts = _facts()
    facts.modules[0].dtype = spelling
    (problem,) = dtype_support_problems(facts)
    assert problem.startswith("weight dtype fp4 (module experts) is not supported by NxD")
    assert "0.19.0" in problem and "INT8 and FP8 only" in problem and "source:" in problem


def test_a_quantized_dtype_on_a_version_the_table_lacks_is_held_as_unknown() -> None:
    (problem,) = dtype_support_problems(_facts(nxd_version="0.18.0"))
    assert "weight dtype int8 (module experts): support on nxd 0.18.0 is unknown" in problem
    (problem,) = dtype_support_problems(_facts(nxd_version=None))
    assert "support on nxd (version unknown) is unknown" in problem


def test_float_weights_need_no_table_entry() -> None:
    facts = _facts(nxd_version=None, modules=[], torch_dtype="bfloat16")
    assert dtype_support_problems(facts) == []


def test_an_unknown_dtype_name_and_an_unsupported_scheme_are_held() -> None:
    facts = _facts()
    facts.modules[1].dtype = "int3"
    assert any(
        "'int3'" in p and "not one modelreg knows" in p for p in dtype_support_problems(facts)
    )
    facts = _facts(quantized=True, quantization_dtype="int8", quantization_type="blockwise")
    (problem,) = dtype_support_problems(facts)
    assert problem.startswith("quantization type 'blockwise' is not supported by NxD")


def test_optimum_neuron_exports_have_no_quantized_weights() -> None:
    facts = NeuronFacts(
        layout="optimum-neuron",
        tp_degree=2,
        optimum_neuron_version="0.3.0",
        quantized=True,
        quantization_dtype="int8",
    )
    (problem,) = dtype_support_problems(facts)
    assert "not supported by optimum-neuron (NxD backend) 0.3.0" in problem


def test_dtype_names_and_widths() -> None:
    assert canonical_dtype("bfloat16") == "bf16" and canonical_dtype("float8_e4m3fn") == "f8e4m3"
    assert canonical_dtype("int3") is None and canonical_dtype(None) is None
    assert (dtype_bytes("bf16"), dtype_bytes("int8"), dtype_bytes("fp4")) == (2, 1, 0.5)
