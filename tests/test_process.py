"""The process settings of the command line and the server — never of ``import modelreg``."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

from modelreg.cli.main import main
from modelreg.process import YOUNG_THRESHOLD, tune_collector


@pytest.fixture
def default_collector() -> Iterator[None]:
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)
    gc.unfreeze()


def test_importing_the_library_leaves_the_collector_alone() -> None:
    probe = "import gc, modelreg, modelreg.api; print(gc.get_threshold()[0], gc.get_freeze_count())"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["700", "0"]  # CPython's default, nothing frozen


def test_the_command_line_raises_the_young_threshold(default_collector: None) -> None:
    assert main(["--help"]) == 0
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)


def test_freeze_moves_what_exists_out_of_sight(default_collector: None) -> None:
    tune_collector(freeze=True)
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert gc.get_freeze_count() > 0
