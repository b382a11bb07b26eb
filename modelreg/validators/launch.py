"""Launching the runtime a target serves with, and reading what it says about itself.

``LaunchedRuntime`` starts a target's ``launch`` command (placeholders filled in) under
``runtime_guard`` on 127.0.0.1, writes everything it prints to a log file, waits until it
answers HTTP, and stops it — the whole process group, also when verify itself is killed (see
``runtime_guard``). ``runtime_facts`` reads the runtime's version, system info and compiled
features from that log (llama.cpp's ``system_info`` line, llama-server's ``build:`` line,
ik_llama.cpp's ``build info`` / ``system info`` lines); ``cmake_cache_flags`` reads the build
options of a self-built runtime from the CMake cache beside its binary; ``check_build_flags``
compares them with what the target requires.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from modelreg.validators.child import _child_setup
from modelreg.validators.resources import peak_rss_bytes

# The guard is standard library only: run as a file in isolated mode, it imports nothing from
# the working directory or the environment (a stray ``modelreg`` there cannot replace it).
GUARD_ARGV = (sys.executable, "-I", str(Path(__file__).with_name("runtime_guard.py")), "--")
LOG_TAIL_LINES = 40
LOG_MAX_READ = 4 << 20  # the end of the log is what matters; llama.cpp prints ~2,000 lines
STOP_GRACE_SECONDS = 3.0
POLL_FIRST_SECONDS = 0.05
POLL_MAX_SECONDS = 0.25
CMAKE_CACHE_MAX_BYTES = 4 << 20

# Names a target may require under which the build reports the flag differently: ik_llama.cpp's
# CMake option GGML_IQK_MUL_MAT is what defines GGML_USE_IQK_MULMAT (ggml/src/CMakeLists.txt),
# the name seed 004 uses.
BUILD_FLAG_ALIASES = {"GGML_USE_IQK_MULMAT": ("GGML_IQK_MUL_MAT",)}
_TRUE = {"1", "ON", "TRUE", "YES", "Y"}
_FALSE = {"0", "OFF", "FALSE", "NO", "N", "", "NOTFOUND"}

_FEATURE = re.compile(r"\b([A-Z][A-Z0-9_]*) = ([0-9]+)\b")
_MAINLINE_BUILD = re.compile(r"\bbuild: (\d+) \(([0-9a-f]+)\)(?: with (.+?) for (\S+))?")
_FORK_BUILD = re.compile(r"\bbuild[ =]+\"?(\d+)\"?.*?\bcommit[ =]+\"?([0-9a-fA-F]+)")
_VERSION = re.compile(r"\bversion: (\d+) \(([0-9a-f]+)\)")
_BUILT_WITH = re.compile(r"\bbuilt with (.+?) for (\S+)")
_GUARD_RUNTIME_END = re.compile(r"modelreg-guard: runtime pid (\d+) (.+)$")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def fill_placeholders(argv: Sequence[str], values: dict[str, str]) -> list[str]:
    """``argv`` with ``{model}``, ``{port}`` (and ``{image}``) filled in; ``{{`` / ``}}`` are
    literal braces (the targets file was validated: no other placeholder is left)."""
    return [arg.format_map(values) for arg in argv]


def forbidden_in(argv: Sequence[str], forbidden: Sequence[str]) -> list[str]:
    """The forbidden flags ``argv`` passes (``--flag`` or ``--flag=value``), in its order."""
    found = []
    for arg in argv:
        for flag in forbidden:
            if (arg == flag or arg.startswith(flag + "=")) and flag not in found:
                found.append(flag)
    return found


@dataclass(frozen=True)
class GroupProcess:
    pid: int
    argv: list[str]
    peak_rss_bytes: int | None


def group_processes(pgid: int) -> list[GroupProcess]:
    """The processes of process group ``pgid`` (Linux /proc), with their command lines."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            # pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pgid:
                continue
            raw = (entry / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        argv = [a.decode("utf-8", errors="replace") for a in raw.split(b"\0") if a]
        found.append(GroupProcess(int(entry.name), argv, peak_rss_bytes(entry / "status")))
    return found


@dataclass
class Readiness:
    status: Literal["ready", "exited", "timeout"]
    ms: float
    probe: str | None = None  # the request that answered


@dataclass
class LaunchedRuntime:
    """A runtime started from a target's launch command, under the guard."""

    argv: list[str]
    port: int
    memory_limit_bytes: int | None = None
    log_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="modelreg-run-")))
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0

    @property
    def log_path(self) -> Path:
        return self.log_dir / "runtime.log"

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        with self.log_path.open("wb") as log:
            self.started = time.perf_counter()
            self.proc = subprocess.Popen(
                [*GUARD_ARGV, *self.argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_child_setup(self.memory_limit_bytes, signal.SIGTERM),
                # llama-server reads LLAMA_ARG_CTX_SIZE and the like as flags: the launch
                # command alone says what is served (the flags verify read).
                env={k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_")},
            )

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, client: Any, deadline: float) -> Readiness:
        """Poll until the runtime answers HTTP (``/health`` 200, else ``/v1/models`` with any
        status but 5xx), exits, or ``deadline`` (a ``time.monotonic()``) passes."""
        import httpx

        pause = POLL_FIRST_SECONDS
        while True:
            if not self.running():
                return Readiness("exited", self._elapsed_ms())
            for path in ("/health", "/v1/models"):
                try:
                    response = client.get(
                        path, timeout=max(0.1, min(2.0, deadline - time.monotonic()))
                    )
                except httpx.TransportError:
                    break  # not listening yet
                if response.status_code == 200 or (
                    path == "/v1/models" and response.status_code < 500
                ):
                    return Readiness("ready", self._elapsed_ms(), path)
                if response.status_code == 503:
                    break  # loading
            if time.monotonic() + pause > deadline:
                return Readiness("timeout", self._elapsed_ms())
            time.sleep(pause)
            pause = min(POLL_MAX_SECONDS, pause * 1.5)

    def _elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 1)

    def exit_status(self) -> str:
        """How the runtime ended, from the guard's last line (``exited with status 1``,
        ``killed by SIGSEGV``), else from the guard's own exit code."""
        for line in reversed(self.log_lines()):
            match = _GUARD_RUNTIME_END.match(line)
            if match:
                return f"(pid {match.group(1)}) {match.group(2)}"
            if line.startswith("modelreg-guard: cannot start"):
                return line.removeprefix("modelreg-guard: ")
        code = self.proc.returncode if self.proc is not None else None
        return f"exited with status {code}"

    def log_lines(self) -> list[str]:
        try:
            with self.log_path.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                log.seek(max(0, size - LOG_MAX_READ))
                data = log.read()
        except OSError:
            return []
        return data.decode("utf-8", errors="replace").splitlines()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> list[str]:
        from modelreg.urls import redact_text

        return [redact_text(line)[:500] for line in self.log_lines()[-lines:]]

    def processes(self) -> list[GroupProcess]:
        """The runtime's processes (its process group, without the guard)."""
        if self.proc is None:
            return []
        return [p for p in group_processes(self.proc.pid) if p.pid != self.proc.pid]

    def stop(self) -> str:
        """Stop the runtime and everything it started; says how it ended."""
        proc = self.proc
        if proc is None:
            return "never started"
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)  # the guard SIGKILLs the group
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=STOP_GRACE_SECONDS)
            how = "stopped"
        else:
            how = f"had already ended ({self.exit_status()})"
        # Whatever is left in the group (the guard itself, if it did not answer) goes now.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_SECONDS)
        return how

    def cleanup(self) -> None:
        shutil.rmtree(self.log_dir, ignore_errors=True)


def runtime_facts(lines: Sequence[str]) -> dict[str, Any]:
    """What a llama.cpp-family runtime printed about itself: version/build, compiler, system
    info and its compiled features (``{"AVX": "1", "AVX2": "0", …}``)."""
    facts: dict[str, Any] = {}
    for line in lines:
        features = _FEATURE.findall(line)
        if len(features) >= 3:  # a system-info line: "AVX = 1 | AVX2 = 0 | …"
            facts["system_info"] = line.strip()[:2000]
            facts["build_features"] = dict(features)
        for pattern in (_MAINLINE_BUILD, _VERSION):
            match = pattern.search(line)
            if match and "build" not in facts:
                facts["build"] = match.group(1)
                facts["commit"] = match.group(2)
        match = _FORK_BUILD.search(line)
        if match and "build" not in facts:
            facts["build"], facts["commit"] = match.group(1), match.group(2)
        match = _BUILT_WITH.search(line)
        if match:
            facts["compiler"], facts["build_target"] = match.group(1), match.group(2)
    return facts


def cmake_cache_flags(executable: str) -> tuple[dict[str, str], str | None]:
    """The CMake options a self-built runtime was configured with: ``CMakeCache.txt`` in the
    directory of ``executable`` or up to two levels above it (``build/bin/llama-server`` →
    ``build/CMakeCache.txt``). Empty when there is none."""
    from modelreg.boundedfile import read_bounded
    from modelreg.errors import InvalidArtifact

    found = shutil.which(executable)
    if found is None:
        return {}, None
    directory = Path(found).resolve().parent
    for candidate in (directory, directory.parent, directory.parent.parent):
        cache = candidate / "CMakeCache.txt"
        if not cache.is_file():
            continue
        try:
            text = read_bounded(cache, max_bytes=CMAKE_CACHE_MAX_BYTES, what="CMake cache")
        except InvalidArtifact:
            return {}, None
        flags = {}
        for line in text.decode("utf-8", errors="replace").splitlines():
            if not line or line.startswith(("#", "//")):
                continue
            key, sep, value = line.partition("=")
            name, _, kind = key.partition(":")
            if sep and kind not in ("INTERNAL", "STATIC"):
                flags[name.strip()] = value.strip()
        return flags, str(cache)
    return {}, None


def _normalised(value: str) -> str:
    upper = value.strip().upper()
    if upper in _TRUE:
        return "ON"
    if upper in _FALSE:
        return "OFF"
    return value.strip()


@dataclass(frozen=True)
class BuildFlagFinding:
    required: str
    status: Literal["confirmed", "mismatch", "unconfirmed"]
    message: str


def check_build_flags(required: Sequence[str], observed: dict[str, str]) -> list[BuildFlagFinding]:
    """Each required ``NAME`` (on) or ``NAME=VALUE`` against the flags the build reported."""
    findings = []
    for flag in required:
        name, sep, value = flag.partition("=")
        wanted = _normalised(value) if sep else "ON"
        names = (name, *BUILD_FLAG_ALIASES.get(name, ()))
        seen = [(n, observed[n]) for n in names if n in observed]
        if not seen:
            findings.append(
                BuildFlagFinding(flag, "unconfirmed", f"{flag}: the runtime does not report {name}")
            )
            continue
        reported, actual = seen[0]
        if _normalised(actual) == wanted:
            findings.append(BuildFlagFinding(flag, "confirmed", f"{flag}: {reported}={actual}"))
        else:
            findings.append(
                BuildFlagFinding(
                    flag, "mismatch", f"{flag} required, the build has {reported}={actual}"
                )
            )
    return findings
