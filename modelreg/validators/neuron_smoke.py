"""``neuron-smoke``: the Paris check on an Inferentia2 host, through torch-neuronx.

Runs only where torch_neuronx is installed and a Neuron device is visible; everywhere else it is
``unavailable`` — never ``pass`` — so a record is never deployable on an inf2 target without a
passing run from a Neuron host. The host side (embedding lookup × declared scale → traced
decoder → greedy decode → verdict) is shared with the CPU path the tests run.
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


class NeuronSmoke:
    name = "neuron-smoke"

    def run(self, ctx: CheckContext) -> CheckResult:
        started = utcnow()
        evidence: dict[str, Any] = {
            "host": host.hostname(),
            "neuron_device_visible": neuron_device_visible(),
            "neuron_ls": shutil.which("neuron-ls"),
        }
        if not (ctx.target.is_local and evidence["neuron_device_visible"]):
            return finish(
                self.name,
                started,
                Outcome.UNAVAILABLE,
                f"no Neuron device on this host ({host.hostname()}: /dev/neuron0 "
                f"absent): run verify --target {ctx.target.name} on the inf2 host",
                evidence,
            )
        facts = ctx.record.manifest.neuron
        if facts is None or facts.host_embedding is None:
            return finish(
                self.name,
                started,
                Outcome.UNAVAILABLE,
                "neuron-smoke runs slim host-embedding bundles; loading "
                f"{facts.layout if facts else 'this'} bundles is not implemented",
                evidence,
            )
        weights = [f.path for f in ctx.record.manifest.files if f.path == "model.pt"]
        if not weights:
            return finish(
                self.name,
                started,
                Outcome.FAIL,
                "the bundle has no model.pt",
                evidence,
                classification="load_error",
            )
        suite = smoke_suite(ctx)
        child = run_host_path(
            ctx.record.manifest,
            ctx.files["model.pt"].parent,
            suite,
            require_neuron=True,
            timeout=ctx.timeout,
            max_tokens=ctx.options.max_new_tokens,
        )
        evidence["neuron_versions"] = (child.response or {}).get("neuron_versions")
        return judge_run(self.name, started, child, evidence, "torch-neuronx", suite, ctx.target)
