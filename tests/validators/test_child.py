"""Crash isolation with real signals: the child really dies; the parent records it."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
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


def _alive(pid: int) -> bool:
    """Running (not gone, not a zombie that nobody has reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux")
def test_child_dies_when_its_parent_is_killed_with_sigkill() -> None:
    parent_code = (
        "import sys, time\n"
        "from modelreg.validators.child import RuntimeChild\n"
        "child = RuntimeChild([sys.executable, '-c', 'import time; time.sleep(120)'],"
        " memory_limit_bytes=1 << 30)\n"
        "print(child.proc.pid, flush=True)\n"
        "time.sleep(120)\n"
    )
    repo = Path(__file__).resolve().parents[2]
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code],
        stdout=subprocess.PIPE,
        text=True,
        cwd=repo,  # this checkout's modelreg, not whichever one is installed
        env={**os.environ, "PYTHONPATH": str(repo)},
    )
    assert parent.stdout is not None
    child_pid = int(parent.stdout.readline())
    try:
        assert _alive(child_pid)
        limits = Path(f"/proc/{child_pid}/limits").read_text()
        assert re.search(r"Max address space\s+1073741824\s+1073741824", limits), limits
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 2
        while _alive(child_pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(child_pid), "the runtime child outlived its killed parent"
    finally:
        parent.kill()
        with contextlib.suppress(ProcessLookupError):
            os.kill(child_pid, signal.SIGKILL)


def test_deeply_nested_answer_is_no_response_not_a_crash(tmp_path: Path) -> None:
    run = run_child(_child(tmp_path, "print('[' * 100000 + ']' * 100000)"), {}, timeout=30)
    assert run.status == "no_response" and run.exit_code == 0
