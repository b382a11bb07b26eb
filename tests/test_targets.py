"""Targets: verify timeouts per kind, declared swap, and the reference targets file."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelreg.errors import InvalidInput
from modelreg.targets import GiB, get_target, targets_in_file
from tests.conftest import REPO

REFERENCE_TARGETS = REPO / "manifests" / "targets.yaml"


def test_inf2_verify_timeout_covers_a_cold_start() -> None:
    # The seed's slim deploy was READY after 490.9 s on a fresh inf2.xlarge.
    for name in ("inf2.xlarge", "inf2.8xlarge", "inf2.24xlarge", "inf2.48xlarge"):
        assert get_target(name).verify_timeout_seconds >= 900
    assert get_target("cpu").verify_timeout_seconds == 300
    assert get_target("inf2.xlarge").swap_bytes is None  # an instance type declares no swap


def test_user_targets_declare_swap_and_timeouts(tmp_path: Path) -> None:
    spec = tmp_path / "t.yaml"
    spec.write_text(
        "targets:\n"
        "  box:\n    kind: neuron\n    neuron_cores: 2\n    memory_gib: 16\n    swap_gib: 40\n"
        "  slow:\n    verify_timeout_seconds: 1200\n"
        "  plain:\n    kind: neuron\n    neuron_cores: 2\n"
    )
    targets = targets_in_file(spec)
    assert targets["box"].swap_bytes == 40 * GiB
    assert targets["slow"].verify_timeout_seconds == 1200
    assert targets["plain"].verify_timeout_seconds == 900 and targets["plain"].swap_bytes is None


@pytest.mark.parametrize("bad", ["swap_gib: -1", "verify_timeout_seconds: 0"])
def test_bad_swap_or_timeout_is_bad_input(tmp_path: Path, bad: str) -> None:
    spec = tmp_path / "t.yaml"
    spec.write_text(f"targets:\n  box:\n    {bad}\n")
    with pytest.raises(InvalidInput, match="box"):
        targets_in_file(spec)


def test_the_ivy_bridge_reference_target_has_its_real_flags() -> None:
    xeon = targets_in_file(REFERENCE_TARGETS)["xeon-e5-2690-v2"]
    assert xeon.cpu_flags is not None
    assert {"avx", "f16c", "sse4_2", "popcnt", "aes", "pclmulqdq", "rdrand"} <= xeon.cpu_flags
    assert not {"avx2", "fma", "bmi1", "bmi2", "movbe"} & xeon.cpu_flags
    assert not any(flag.startswith("avx512") for flag in xeon.cpu_flags)
    # The write-up does not say how much DDR3 it has: the definition states its assumption.
    assert xeon.memory_bytes == 128 * GiB
