"""What an endpoint run learns about the server that answered, and what it can decide.

The server's own report (``/props``), the runtime's build against the target (required build
flags, the CPU features it was compiled for, the context it was started with), whose process
served (identity: by its word for a remote server, by ``/proc`` on this host), and why a run
whatever it answered cannot decide the target: a declared runtime the runtime that answered
did not confirm, or a Neuron target asked from a host that is not a Neuron host.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from modelreg import host
from modelreg.targets import Target
from modelreg.validators.base import CheckContext
from modelreg.validators.cpu_features import missing_flags
from modelreg.validators.exercised import ReportedRuntime, unconfirmed, versions_of
from modelreg.validators.identity import (
    IdentityVerdict,
    ServedModel,
    as_remote,
    bind_identity,
    bind_process,
    on_this_host,
)
from modelreg.validators.launch import LaunchedRuntime, check_build_flags, cmake_cache_flags
from modelreg.validators.llama_runtime import declared_or_host_flags
from modelreg.validators.loopback import is_loopback
from modelreg.validators.neuron_host import neuron_host_problem
from modelreg.validators.neuron_host import this_host as neuron_this_host

# /props fields worth keeping (the chat template is kept as its digest).
PROPS_KEPT = ("model_path", "model_alias", "model_name", "build_info", "total_slots", "n_ctx")
# CMake options only ik_llama.cpp's build has (ggml/CMakeLists.txt: GGML_IQK_MUL_MAT,
# GGML_IQK_FLASH_ATTENTION, …).
IK_LLAMA_CMAKE_OPTIONS = ("GGML_IQK_",)


@dataclass
class Finding:
    """One reason the check did not pass, in the order of how much it says."""

    rank: int
    classification: str
    message: str


def kept_props(props: dict[str, Any], record_template_sha256: str | None) -> dict[str, Any]:
    """What is worth keeping of a server's ``/props``: ``PROPS_KEPT``, its context, and its
    chat template as a digest compared with the record's."""
    kept = {k: props[k] for k in PROPS_KEPT if isinstance(props.get(k), str | int)}
    # llama-server reports its context per slot under default_generation_settings.
    settings = props.get("default_generation_settings")
    if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
        kept["n_ctx"] = settings["n_ctx"]
    template = props.get("chat_template")
    if isinstance(template, str) and template:
        digest = hashlib.sha256(template.encode()).hexdigest()
        kept["chat_template_sha256"] = digest
        kept["chat_template_is_the_records"] = digest == record_template_sha256
    return kept


def build_findings(target: Target, facts: dict[str, Any]) -> list[Finding]:
    """The launched build against the target: required build flags, and the CPU features
    it was compiled for against the target's CPU flags. What was read is added to
    ``facts`` (the runtime's evidence)."""
    findings = []
    observed = dict(facts.get("build_features") or {})
    cmake, cache_path = cmake_cache_flags(target.launch[0]) if target.launch else ({}, None)
    if cache_path is not None:
        facts["cmake_cache"] = cache_path
        facts["cmake_flags"] = {
            k: v for k, v in cmake.items() if k.startswith(("GGML_", "LLAMA_", "CMAKE_BUILD"))
        }
    observed |= cmake
    if target.required_build_flags:
        results = check_build_flags(target.required_build_flags, observed)
        facts["required_build_flags"] = {r.required: r.message for r in results}
        for r in results:
            if r.status == "mismatch":
                findings.append(Finding(1, "build_flag_mismatch", r.message))
            elif r.status == "unconfirmed":
                findings.append(
                    Finding(
                        6,
                        "build_flag_unconfirmed",
                        f"{r.message} (looked at its startup log"
                        + (f" and {cache_path}" if cache_path else ", no CMakeCache.txt")
                        + ")",
                    )
                )
    features = [name for name, value in (facts.get("build_features") or {}).items() if value == "1"]
    flags = declared_or_host_flags(target)
    if features and flags is not None:
        missing = missing_flags(features, flags)
        if missing:
            findings.append(
                Finding(
                    2,
                    "incompatible",
                    f"the runtime was built for {', '.join(missing)}, which {target.name} lacks",
                )
            )
    return findings


def started_context(ctx: CheckContext, props: dict[str, Any]) -> Finding | None:
    """A server that reports its context (llama-server's ``/props`` ``n_ctx``) must hold
    what the target serves: a runtime started with less truncates or refuses."""
    serving = ctx.target.serving
    reported = props.get("n_ctx")
    if serving is None or not isinstance(reported, int) or reported <= 0:
        return None
    wanted = serving.per_sequence(ctx.record.manifest.architecture.context_length)
    if wanted and reported < wanted:
        return Finding(
            2,
            "does_not_fit",
            f"the server was started with a {reported}-token context, below the {wanted} "
            f"tokens target {ctx.target.name} serves",
        )
    return None


def served_identity(
    ctx: CheckContext,
    served: ServedModel,
    on_host: tuple[str, int] | None,
    runtime: LaunchedRuntime | None,
) -> IdentityVerdict:
    """A remote server by its own report; one on this host by /proc (for a launch: only a
    process of the runtime verify started counts)."""
    record, files = ctx.record, ctx.files
    claimed = bind_identity(record, files, served, remote=on_host is None)
    if on_host is None:
        return as_remote(claimed)
    launched = None
    if runtime is not None:
        launched = {p.pid for p in runtime.processes()}
    return on_this_host(claimed, bind_process(record, files, *on_host, launched=launched))


def reported_runtime(evidence: dict[str, Any]) -> ReportedRuntime:
    """What the runtime that answered said about itself: its startup log's build and
    system info (a launch), ``/props`` ``build_info``, and its build's CMake cache."""
    facts = evidence.get("runtime") or {}
    props = (evidence.get("server") or {}).get("props") or {}
    # (Not its system info: a feature list names no runtime, and "AVX2 = 0" confirms
    # nothing about a declaration.)
    texts = [str(v) for v in (facts.get("build"), props.get("build_info")) if v]
    # ik_llama.cpp's build tree has CMake options mainline's has not: the configuration
    # of the binary started names the fork (its path, the target's own words, does not).
    cmake = facts.get("cmake_flags") or {}
    if any(name.startswith(IK_LLAMA_CMAKE_OPTIONS) for name in cmake):
        texts.append("ik_llama.cpp (its CMake cache has GGML_IQK_* options)")
    build = facts.get("build") if isinstance(facts.get("build"), str) else None
    if build is not None and not build.isdigit():
        match = re.match(r"b?(\d+)", build)
        build = match.group(1) if match else None
    return ReportedRuntime(
        build=build,
        commit=facts.get("commit") if isinstance(facts.get("commit"), str) else None,
        versions=versions_of([facts.get("version"), props.get("build_info")]),
        texts=tuple(texts),
    )


def serving_pids(runtime: LaunchedRuntime | None, evidence: dict[str, Any]) -> list[int]:
    """The processes that served this run: the launched runtime's, else the loopback
    endpoint's listener found in /proc."""
    if runtime is not None:
        return [p.pid for p in runtime.processes()]
    found = ((evidence.get("identity") or {}).get("process") or {}).get("processes")
    return [p["pid"] for p in found or [] if isinstance(p, dict) and isinstance(p.get("pid"), int)]


def not_exercised(
    target: Target, runtime: LaunchedRuntime | None, evidence: dict[str, Any]
) -> list[tuple[str, str]]:
    """Why this run, whatever it answered, cannot decide the target: a declared runtime
    the runtime that answered did not confirm, or a Neuron target asked from a host that
    is not a Neuron host. ``(classification, message)`` each; what was looked at is added to
    ``evidence``."""
    pending = []
    reported = reported_runtime(evidence)
    evidence["exercised_runtime"] = reported.describe()
    missing = unconfirmed(target.runtime, reported)
    if missing:
        pending.append(
            (
                "runtime_not_exercised",
                f"declared {'; '.join(missing)}, and the runtime that answered reported "
                f"{reported.describe()}: the declared runtime was not shown to be the one "
                "exercised",
            )
        )
    if target.kind == "neuron":
        remote = runtime is None and not (target.endpoint and is_loopback(target.endpoint))
        found = neuron_this_host()
        evidence["neuron_host"] = found.evidence()
        problem: str | None
        if remote:
            problem = (
                f"{target.endpoint} was asked from {host.hostname()}: an answer over HTTP "
                "says nothing about the hardware behind it — verify on the Neuron host "
                "itself (its endpoint on 127.0.0.1, or launch)"
            )
        else:
            problem = neuron_host_problem(
                target.neuron_cores, found, serving_pids(runtime, evidence)
            )
        if problem:
            pending.append(
                (
                    "not_a_neuron_host",
                    f"a pass on Neuron target {target.name} needs a run "
                    f"on a Neuron host: {problem}",
                )
            )
    return pending
