"""Is this host a Neuron host, and which one? Evidence for a ``kind: neuron`` target.

A verdict on an inf2 target needs a run on an inf2 host (README: "nothing is deployable on an
inf2 target without a run on an inf2 host"): Neuron devices present (``/dev/neuron*``), the
driver's identity (``/sys/module/neuron/version``, ``neuron-ls --json-output``) recorded, and
the NeuronCores the host has matching what the target declares. An OpenAI-compatible answer
from elsewhere says nothing about the hardware behind it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NEURON_LS_TIMEOUT_SECONDS = 20.0
NEURON_LS_MAX_BYTES = 1 << 20
DRIVER_VERSION = Path("/sys/module/neuron/version")
# Inferentia2 and Trainium devices have two NeuronCores each (v2), Trainium2 eight.
CORES_PER_DEVICE_DEFAULT = 2


@dataclass(frozen=True)
class NeuronHost:
    devices: tuple[str, ...]  # /dev/neuron0 …
    driver_version: str | None
    neuron_ls: list[dict[str, Any]] | None  # neuron-ls --json-output, when it ran
    cores: int | None  # NeuronCores on this host (neuron-ls, else 2 per device)
    problems: list[str] = field(default_factory=list)

    @property
    def is_neuron_host(self) -> bool:
        return bool(self.devices)

    def evidence(self) -> dict[str, Any]:
        return {
            "devices": list(self.devices),
            "driver_version": self.driver_version,
            "neuron_ls": self.neuron_ls,
            "neuron_cores": self.cores,
            "problems": self.problems,
        }


def _neuron_ls() -> tuple[list[dict[str, Any]] | None, str | None]:
    program = shutil.which("neuron-ls")
    if program is None:
        return None, "neuron-ls is not installed (aws-neuronx-tools)"
    try:
        done = subprocess.run(
            [program, "--json-output"],
            capture_output=True,
            timeout=NEURON_LS_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"neuron-ls did not answer: {exc}"
    if done.returncode != 0:
        return None, f"neuron-ls exited with status {done.returncode}"
    try:
        data = json.loads(done.stdout[:NEURON_LS_MAX_BYTES])
    except ValueError:
        return None, "neuron-ls printed no JSON"
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        return None, "neuron-ls printed JSON of another shape than a device list"
    return data, None


def this_host() -> NeuronHost:
    """This host's Neuron devices, driver and NeuronCores (no devices: not a Neuron host)."""
    devices = tuple(
        sorted(str(p) for p in Path("/dev").glob("neuron*") if re.fullmatch(r"neuron\d+", p.name))
    )
    if not devices:
        return NeuronHost((), None, None, None, ["no Neuron device (/dev/neuron*)"])
    problems = []
    driver = None
    try:
        driver = DRIVER_VERSION.read_text().strip()[:100] or None
    except OSError:
        problems.append(f"{DRIVER_VERSION} unreadable: the Neuron driver's version is unknown")
    listed, problem = _neuron_ls()
    if problem:
        problems.append(problem)
    cores = None
    if listed is not None:
        counts = [d.get("nc_count") for d in listed]
        if all(isinstance(c, int) for c in counts):
            cores = sum(c for c in counts if isinstance(c, int))
    if cores is None:
        cores = CORES_PER_DEVICE_DEFAULT * len(devices)
    return NeuronHost(devices, driver, listed, cores, problems)


def uses_neuron(pids: list[int]) -> bool:
    """Does one of these processes hold a Neuron device open or map the Neuron runtime
    (``libnrt``)? A CPU server on a Neuron host does neither."""
    for pid in pids:
        proc = Path(f"/proc/{pid}")
        try:
            for fd in (proc / "fd").iterdir():
                try:
                    if re.fullmatch(r"/dev/neuron\d+", os.readlink(fd)):
                        return True
                except OSError:
                    continue
            with (proc / "maps").open(errors="replace") as maps:
                if any("libnrt" in line for line in maps):
                    return True
        except OSError:
            continue
    return False


def neuron_host_problem(
    target_cores: int, found: NeuronHost, serving_pids: list[int] | None = None
) -> str | None:
    """Why evidence from ``found`` cannot decide a ``kind: neuron`` target of
    ``target_cores`` NeuronCores (None: it can). ``serving_pids``: the processes that served
    the run — one of them must use a Neuron device."""
    if not found.is_neuron_host:
        return "this host has no Neuron device (/dev/neuron*)"
    if found.neuron_ls is None:
        return "; ".join(found.problems) or "neuron-ls gave no device list"
    if found.driver_version is None:
        return "the Neuron driver's version is unknown (/sys/module/neuron/version unreadable)"
    if target_cores and found.cores != target_cores:
        return f"this host has {found.cores} NeuronCores, the target declares {target_cores}"
    if serving_pids is not None and not uses_neuron(serving_pids):
        return (
            "no process that served the run holds a Neuron device open or maps libnrt: it ran "
            "on the CPU"
        )
    return None
