"""Facts about the machine modelreg is running on, read from the OS (not from a runtime)."""

from __future__ import annotations

import platform
import socket
from functools import cache
from pathlib import Path


@cache
def cpu_flags() -> frozenset[str]:
    """CPU feature flags as /proc/cpuinfo names them (``avx2``, ``fma``, ``avx512f``…)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@cache
def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _meminfo(field: str) -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key == field:
                return int(value.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_total_bytes() -> int | None:
    return _meminfo("MemTotal")


def hostname() -> str:
    return socket.gethostname()
