"""Crash isolation with real signals: the child really dies; the parent records it."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from modelreg.validators.child import run_child


def _child(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "child.py"
    script.write_text("import os, signal, sys, time, json\nsys.stdin.read()\n" + body)
    return [sys.executable, str(script)]


@pytest.mark.parametrize("sig", [signal.SIGILL, signal.SIGSEGV, signal.SIGKILL, signal.SIGABRT])
def test_child_killed_by_a_signal_is_named(tmp_path: Path, sig: signal.Signals) -> None:
    run = run_child(_child(tmp_path, f"os.kill(os.getpid(), {int(sig)})"), {}, timeout=30)
    assert run.status == "crashed"
    assert run.signal == sig.name
    assert sig.name in run.describe()


def test_hanging_child_is_killed_at_the_timeout(tmp_path: Path) -> None:
    run = run_child(_child(tmp_path, "time.sleep(60)"), {}, timeout=1)
    assert run.status == "timeout"
    assert 900 < run.wall_ms < 30_000


def test_child_without_a_response_is_reported(tmp_path: Path) -> None:
    run = run_child(_child(tmp_path, "print('noise'); sys.exit(7)"), {}, timeout=30)
    assert run.status == "no_response" and run.exit_code == 7


def test_response_is_the_last_stdout_line(tmp_path: Path) -> None:
    run = run_child(_child(tmp_path, "print(json.dumps({'status': 'ok', 'x': 1}))"), {}, timeout=30)
    assert run.status == "ok" and run.response == {"status": "ok", "x": 1}


def test_child_over_its_memory_limit_is_recorded(tmp_path: Path) -> None:
    body = "blob = bytearray(2 * 1024**3)\nprint('unreachable')"
    run = run_child(_child(tmp_path, body), {}, timeout=60, memory_limit_bytes=512 * 1024**2)
    assert run.status == "no_response" and run.exit_code == 1
    assert "MemoryError" in run.describe()
