"""The guard between verify and a runtime it launches: ``python -I runtime_guard.py -- COMMAND
ARGS…`` (standard library only).

verify starts the guard in a new session (its own process group) with ``PR_SET_PDEATHSIG``
set to SIGTERM, so the kernel tells the guard when verify dies — however it dies, ``kill -9``
included. The guard then SIGKILLs everything it started: the whole process group, and any
descendant that left the group (it is a child subreaper, so descendants of a launcher script
that exited stay its children). A runtime started directly by verify would die with verify
too (PDEATHSIG), but the server a launcher script starts would not.

The guard's own output is a few ``modelreg-guard:`` lines on stderr (the runtime's log): how
each process it reaped ended. It exits when no child is left, with the status of the last one
(128 + N for a signal N, named on its last line).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
PREFIX = "modelreg-guard:"


def _prctl(option: int, value: int) -> None:
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` (Linux: /proc/PID/task/*/children), children first."""
    found: list[int] = []
    pending = [pid]
    while pending:
        parent = pending.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            found.extend(children)
            pending.extend(children)
    return found


def _kill_everything(_signum: int = 0, _frame: object = None) -> None:
    for pid in _descendants(os.getpid()):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.killpg(0, signal.SIGKILL)  # the guard too: nothing is left to guard
    os._exit(128 + signal.SIGKILL)


def _describe(status: int) -> tuple[str, int]:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"killed by {name}", 128 + number
    code = os.waitstatus_to_exitcode(status)
    return f"exited with status {code}", code


def _runtime_setup() -> None:
    # The runtime dies with the guard, should the guard itself be killed (the OOM killer).
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or argv[0] != "--":
        sys.stderr.write(f"{PREFIX} usage: python -I runtime_guard.py -- COMMAND [ARGS…]\n")
        return 2
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, _kill_everything)
    _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    command = argv[1:]
    try:
        runtime = subprocess.Popen(command, preexec_fn=_runtime_setup)
    except OSError as exc:
        sys.stderr.write(f"{PREFIX} cannot start {command[0]!r}: {exc.strerror or exc}\n")
        return 127
    sys.stderr.write(f"{PREFIX} started pid {runtime.pid}\n")
    sys.stderr.flush()
    last = 0
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        what, last = _describe(status)
        role = "runtime" if pid == runtime.pid else "process"
        sys.stderr.write(f"{PREFIX} {role} pid {pid} {what}\n")
        sys.stderr.flush()
    return last


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
