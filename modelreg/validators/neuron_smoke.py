"""``neuron-smoke``: the Paris check on an Inferentia2 host, through torch-neuronx.

Runs only where a Neuron device is visible; everywhere else it is ``unavailable`` — never
``pass`` — so a record is never deployable on an inf2 target without a passing run from a
Neuron host. What runs is the bundle's own server when its manifest declares one (``serve:``,
``bundle_server``: seed 001's bug lived in the server script); a bundle that ships a server
script and declares no entry point is ``unavailable`` naming the script as not exercised;
a slim bundle without a server runs modelreg's host path (embedding lookup × declared scale →
traced decoder → greedy decode, through torch-neuronx), shared with the CPU path the tests run.
Every ``unavailable`` names the serving code it did not exercise (``not_exercised``).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from modelreg import host
from modelreg.clock import utcnow
from modelreg.schemas.manifest import Manifest
from modelreg.schemas.suite import Suite
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.targets import neuron_device_visible
from modelreg.validators.base import CheckContext, finish
from modelreg.validators.bundle_server import ask_bundle_server, bundle_root
from modelreg.validators.child import ChildRun, run_child
from modelreg.validators.neuron_child import CHILD_ARGV
from modelreg.validators.smoke import judge_run, request_prompts, smoke_suite


def run_host_path(
    manifest: Manifest,
    bundle: Path,
    suite: Suite,
    *,
    require_neuron: bool,
    timeout: float,
    max_tokens: int = 16,
) -> ChildRun:
    """Run the slim bundle's host path in a child process (on CPU unless ``require_neuron``)."""
    facts = manifest.neuron
    assert facts is not None and facts.host_embedding is not None
    bucket = (facts.context_buckets or [facts.seq_len or 128])[-1]
    request = {
        "bundle": str(bundle),
        "model_file": "model.pt",
        "embedding_file": facts.host_embedding.file,
        "scale": facts.host_embedding.scale or 1.0,
        # Sized to the largest bucket it was compiled for, never the trained context.
        "prompts": request_prompts(suite, bucket),
        "max_tokens": max_tokens,
        "bucket": bucket,
        "require_neuron": require_neuron,
    }
    return run_child(CHILD_ARGV, request, timeout=timeout)


def not_exercised(manifest: Manifest) -> list[str]:
    """The bundle's serving code a run here would not exercise: its declared entry point's
    script, else every server script it ships (role ``server``)."""
    facts = manifest.neuron
    if facts is not None and facts.serve is not None:
        return [facts.serve.script]
    return [f.path for f in manifest.files if f.role == "server" and f.path.endswith(".py")]


class NeuronSmoke:
    name = "neuron-smoke"

    def run(self, ctx: CheckContext) -> CheckResult:
        started = utcnow()
        manifest = ctx.record.manifest
        facts = manifest.neuron
        entry = facts.serve if facts is not None else None
        scripts = not_exercised(manifest)
        evidence: dict[str, Any] = {
            "host": host.hostname(),
            "neuron_device_visible": neuron_device_visible(),
            "neuron_ls": shutil.which("neuron-ls"),
            "serve": entry.model_dump(mode="json") if entry is not None else None,
        }

        def unavailable(summary: str) -> CheckResult:
            if scripts:
                evidence["not_exercised"] = scripts
                summary += f"; not exercised: {', '.join(scripts)}"
            return finish(self.name, started, Outcome.UNAVAILABLE, summary, evidence)

        if not (ctx.target.is_local and evidence["neuron_device_visible"]):
            return unavailable(
                f"no Neuron device on this host ({host.hostname()}: /dev/neuron0 "
                f"absent): run verify --target {ctx.target.name} on the inf2 host"
            )
        suite = smoke_suite(ctx)
        if entry is not None:
            script = ctx.files.get(entry.script)
            if script is None:
                return unavailable(f"the bundle's serving script {entry.script} is not staged")
            child, served = ask_bundle_server(
                entry,
                bundle_root(script, entry),
                suite,
                timeout=ctx.timeout,
                seed=ctx.options.seed,
                has_template=manifest.architecture.chat_template_sha256 is not None,
                context_length=manifest.architecture.context_length,
                require_neuron=True,
            )
            evidence["bundle_server"] = served
            return judge_run(
                self.name, started, child, evidence, f"{entry.script}", suite, ctx.target
            )
        if scripts:
            # Its own server is what serves; modelreg's host path passing says nothing of it.
            return unavailable(
                f"the bundle ships {', '.join(scripts)} and declares no serving entry point: "
                "what serves it cannot be run here — declare serve: {argv, script} in its "
                "modelreg-deploy.json"
            )
        if facts is None or facts.host_embedding is None:
            return unavailable(
                f"a {facts.layout if facts else 'Neuron'} bundle without a serving entry point: "
                "modelreg runs a slim host-embedding bundle's own path, or a bundle's declared "
                "server (serve: in modelreg-deploy.json); this one has neither"
            )
        weights = [f.path for f in manifest.files if f.path == "model.pt"]
        if not weights:
            return finish(
                self.name,
                started,
                Outcome.FAIL,
                "the bundle has no model.pt",
                evidence,
                classification="load_error",
            )
        child = run_host_path(
            manifest,
            ctx.files["model.pt"].parent,
            suite,
            require_neuron=True,
            timeout=ctx.timeout,
            max_tokens=ctx.options.max_new_tokens,
        )
        evidence["neuron_versions"] = (child.response or {}).get("neuron_versions")
        return judge_run(self.name, started, child, evidence, "torch-neuronx", suite, ctx.target)
