"""Run a validator's runtime in a child process, so a crash or hang is an outcome, not ours.

The child reads one JSON request on stdin and writes one JSON response on its original stdout;
anything a native library prints goes to stderr. A child killed by a signal (SIGILL on a CPU
without the instructions the build uses, SIGSEGV, SIGKILL from the OOM killer) or still running
at the timeout is reported with the signal's name. A child never outlives the verify that
started it, however that verify ends (``kill -9`` included).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from modelreg.jsonio import parse_json

STDERR_TAIL_CHARS = 4000


@dataclass(frozen=True)
class ChildRun:
    status: Literal["ok", "crashed", "timeout", "no_response"]
    response: dict[str, Any] | None
    exit_code: int | None
    signal: str | None
    wall_ms: float
    stderr_tail: str

    def describe(self) -> str:
        if self.status == "timeout":
            return f"no answer within the timeout; killed after {self.wall_ms / 1000:.1f} s"
        if self.signal:
            return f"child killed by {self.signal}"
        if self.status == "no_response":
            last = self.stderr_tail.strip().splitlines()[-1:] or [""]
            detail = f": {last[0][:200]}" if last[0] else ""
            return f"child exited with status {self.exit_code} without a response{detail}"
        return "ok"

    def evidence(self) -> dict[str, Any]:
        return {
            "child_status": self.status,
            "exit_code": self.exit_code,
            "signal": self.signal,
            "child_wall_ms": round(self.wall_ms, 1),
            "stderr_tail": self.stderr_tail,
        }


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, looked up in the parent so the child only has to call it."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return prctl


def _child_setup(
    memory_limit_bytes: int | None, death_signal: int = signal.SIGKILL
) -> Callable[[], None]:
    """What the child does between fork and exec: die with its parent (``death_signal`` is
    what the kernel sends it then; a child that must clean up asks for SIGTERM), limit its
    memory."""
    prctl = _prctl()
    parent = os.getpid()

    def setup() -> None:
        # A verify killed with SIGKILL cannot kill its children itself: the kernel does,
        # when the thread that started them exits (so start children from the main thread).
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)
            if os.getppid() != parent:  # the parent died before prctl took effect
                os.kill(os.getpid(), signal.SIGKILL)
        if memory_limit_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))

    return setup


class RuntimeChild:
    """A runtime child started ahead of its request, so that its slow imports (llama_cpp,
    torch) overlap the parent's own start-up; answered once with ``exchange``.

    The child dies with the process that started it (``PR_SET_PDEATHSIG`` on Linux), even when
    that process is killed with SIGKILL, and keeps its memory limit and the exchange timeout.
    """

    def __init__(self, argv: Sequence[str], memory_limit_bytes: int | None = None) -> None:
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own process group, so a timeout kills all of it
            preexec_fn=_child_setup(memory_limit_bytes),
        )
        self.answered = False

    def exchange(self, request: dict[str, Any], timeout: float) -> ChildRun:
        """Send ``request``; wait at most ``timeout`` seconds for the response."""
        proc = self.proc
        self.answered = True
        status: Literal["ok", "crashed", "timeout", "no_response"]
        try:
            out, err = proc.communicate(json.dumps(request).encode(), timeout=timeout)
            status = "ok"
        except subprocess.TimeoutExpired:
            self.discard()
            out, err = proc.communicate()
            status = "timeout"
        wall_ms = (time.perf_counter() - self.started) * 1000
        code = proc.returncode
        signame = _signal_name(-code) if code is not None and code < 0 else None
        response = None
        if status == "ok":
            try:
                lines = out.decode("utf-8", errors="replace").strip().splitlines()
                parsed = parse_json(lines[-1]) if lines else None
                response = parsed if isinstance(parsed, dict) else None
            except ValueError:  # not JSON, or nested deep enough to exhaust the parser
                response = None
            if signame:
                status = "crashed"
            elif response is None:
                status = "no_response"
        tail = err.decode("utf-8", errors="replace")[-STDERR_TAIL_CHARS:]
        return ChildRun(
            status, response, code, signame if status != "timeout" else None, wall_ms, tail
        )

    def discard(self) -> None:
        """Kill the child (and anything it started) if it is still running."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        if not self.answered:
            self.answered = True
            with contextlib.suppress(OSError, ValueError, subprocess.TimeoutExpired):
                self.proc.communicate(timeout=5)


def run_child(
    argv: Sequence[str],
    request: dict[str, Any],
    *,
    timeout: float,
    memory_limit_bytes: int | None = None,
) -> ChildRun:
    """Start ``argv``, send ``request``, wait at most ``timeout`` seconds."""
    return RuntimeChild(argv, memory_limit_bytes).exchange(request, timeout)


def respond(payload: dict[str, Any], stream: Any) -> None:
    """Write the child's one response line (used by child entry points)."""
    stream.write(json.dumps(payload, default=str) + "\n")
    stream.flush()


def reserve_stdout() -> Any:
    """Keep the real stdout for the response; send everything else printed to stderr."""
    response_stream = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return response_stream
