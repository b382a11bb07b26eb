"""``endpoint-smoke``: the suite through the runtime that will serve, over HTTP.

A target that declares ``launch`` gets its runtime started here (``launch.LaunchedRuntime``:
127.0.0.1, a free port, the record's file — the bytes the digest check hashes), checked, and
stopped. A target that declares ``endpoint`` gets its running server asked. Either way:

1. what the server is: its model ids (``/v1/models``), what it reports about its build and
   model (llama-server's ``/props``), and for a launch what the runtime printed about itself
   (version, system info, compiled features) and the build flags it was configured with;
2. **identity**: the server must serve the record's model. A remote server is judged by what
   it reports (``identity.bind_identity``, ``as_remote``); a server on this host — a loopback
   endpoint, or the runtime verify launched — by ``/proc`` (``identity.bind_process``): the
   process listening on its port must have the record's weights open or mapped (for a launch,
   that process must be one verify started); what it says about itself can then only make it
   a mismatch (``identity.on_this_host``);
3. the suite's prompts (``smoke.smoke_suite``: the golden prompts or the suite asked for),
   streamed with greedy settings; time to first token and tokens/s from the stream; each
   answer judged by ``judge`` (degenerate → stop → answer), OpenAI's ``finish_reason``
   ``stop`` / ``length`` mapped onto ``FinishReason``;
4. the figures: decode tokens/s above what the target's hardware can reach for the record's
   weights (``decode_ceiling``) is ``implausible`` — a canned answer, not a model.

Outcomes: a forbidden flag in the launch is refused before anything starts (``fail``,
``forbidden_flag``); a runtime that dies is ``crashed`` with its last log lines; a server
that cannot be reached is ``unavailable`` with the error (never a pass); a model that is not
the record's is ``identity_mismatch``, and one that cannot be told apart is
``identity_unconfirmed`` (blocking unless the target sets ``require_identity: false``);
implausible figures are ``implausible_figures`` (always blocking).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from modelreg import host, units
from modelreg.clock import utcnow
from modelreg.costs import describe_cost, run_cost
from modelreg.deployed_unit import deployed_unit, serves_own_runtime
from modelreg.schemas.suite import (
    Classification,
    FinishReason,
    Generation,
    Resources,
    Suite,
    SuiteResult,
)
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import CheckContext, finish
from modelreg.validators.endpoint_facts import (
    Finding,
    build_findings,
    kept_props,
    not_exercised,
    reported_runtime,
    served_identity,
    started_context,
)
from modelreg.validators.endpoint_requests import ask_suite, latency_traffic, served_context_probe
from modelreg.validators.identity import IdentityVerdict, ServedModel, first_strings, model_ids
from modelreg.validators.judge import evaluate_suite
from modelreg.validators.launch import (
    LaunchedRuntime,
    fill_placeholders,
    forbidden_in,
    free_port,
    runtime_facts,
)
from modelreg.validators.loopback import host_port, is_loopback
from modelreg.validators.openai_client import (
    Answer,
    EndpointTimeout,
    EndpointUnavailable,
    OpenAIClient,
)
from modelreg.validators.plausible import (
    decode_ceiling,
    implausible_figures,
    stream_figures,
    weight_bytes,
)
from modelreg.validators.resources import with_traffic
from modelreg.validators.smoke import (
    GOLDEN_SUITE_NAME,
    describe_result,
    failure_class,
    smoke_memory_problem,
    smoke_suite,
)

FINISH_REASONS = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH}


@dataclass(frozen=True)
class _Verdict:
    outcome: Outcome
    summary: str
    classification: str | None = None


def model_argument(ctx: CheckContext) -> str:
    """What ``{model}`` stands for: a GGUF's (first) weights file, else the directory that
    holds the record's files (a transformers or Neuron checkpoint)."""
    weights = sorted(f.path for f in ctx.record.manifest.files if f.role == "weights")
    first = weights[0] if weights else ctx.record.manifest.files[0].path
    path = ctx.files[first]
    return str(path if ctx.record.format == "gguf" else path.parent)


@dataclass
class _EndpointRun:
    """One endpoint-smoke run: the state its steps share."""

    ctx: CheckContext
    suite: Suite
    started: datetime
    evidence: dict[str, Any]
    deadline: float
    findings: list[Finding] = field(default_factory=list)
    identity: IdentityVerdict | None = None
    runtime: LaunchedRuntime | None = None  # the launched runtime, when there is one
    traffic: dict[str, Any] | None = None  # the suite's latency plan, as the server answered

    def done(self, verdict: _Verdict) -> CheckResult:
        return finish(
            EndpointSmoke.name,
            self.started,
            verdict.outcome,
            verdict.summary,
            self.evidence,
            verdict.classification,
        )

    # -- a server that is already running -------------------------------------------------

    def served(self, base_url: str) -> _Verdict:
        target = self.ctx.target
        token = None
        if target.token_env is not None:
            token = os.environ.get(target.token_env) or None
            if token is None:
                return _Verdict(
                    Outcome.UNAVAILABLE,
                    f"not run: the bearer token variable {target.token_env} (token_env of "
                    f"target {target.name}) is not set here",
                )
        self.evidence["mode"] = "endpoint"
        self.evidence["endpoint"] = base_url
        client = OpenAIClient(base_url, token, self.deadline, trust_env=not is_loopback(base_url))
        try:
            return self.exchange(client, host_port(base_url), resources=Resources())
        except EndpointUnavailable as exc:
            return _Verdict(Outcome.UNAVAILABLE, f"not run: {exc}")
        except EndpointTimeout as exc:
            return _Verdict(Outcome.FAIL, f"{base_url}: {exc}", Classification.TIMEOUT)
        finally:
            self.evidence["requests"] = client.log
            client.close()

    # -- a runtime verify launches --------------------------------------------------------

    def launched(self) -> _Verdict:
        ctx, target = self.ctx, self.ctx.target
        self.evidence["mode"] = "launch"
        port = free_port()
        values = {"model": model_argument(ctx), "port": str(port), "image": target.image or ""}
        argv = fill_placeholders(target.launch, values)
        launch: dict[str, Any] = {"argv": argv, "port": port}
        self.evidence["launch"] = launch
        forbidden = forbidden_in(argv, target.forbidden_flags)
        if forbidden:
            return _Verdict(
                Outcome.FAIL,
                f"refused to start {argv[0]}: the launch passes {', '.join(forbidden)}, which "
                f"target {target.name} forbids (forbidden_flags)",
                "forbidden_flag",
            )
        if not target.is_local:
            return _Verdict(
                Outcome.UNAVAILABLE,
                f"not run: this host ({host.hostname()}) is not target {target.name}; its launch "
                f"runs on its hosts ({', '.join(target.hosts) or 'none declared'})",
            )
        memory = smoke_memory_problem(ctx)
        if memory is not None:
            return _Verdict(Outcome.UNAVAILABLE, f"not run: {memory}")
        runtime = LaunchedRuntime(argv, port, ctx.options.memory_limit_bytes)
        self.runtime = runtime
        client = OpenAIClient(runtime.base_url, None, self.deadline, trust_env=False)
        try:
            runtime.start()
            return self._launched_run(runtime, client, launch)
        except (EndpointUnavailable, EndpointTimeout) as exc:
            if not runtime.running():
                return self._crashed(runtime, "while it was being asked")
            if isinstance(exc, EndpointTimeout):
                return _Verdict(Outcome.FAIL, f"{argv[0]}: {exc}", Classification.TIMEOUT)
            return _Verdict(Outcome.UNAVAILABLE, f"not run: {exc}")
        finally:
            launch["stopped"] = runtime.stop()
            launch["log_tail"] = runtime.log_tail()
            self.evidence["requests"] = client.log
            client.close()
            runtime.cleanup()

    def _crashed(self, runtime: LaunchedRuntime, when: str) -> _Verdict:
        tail = runtime.log_tail()
        last = next((line for line in reversed(tail) if not line.startswith("modelreg-guard")), "")
        detail = f"; last log line: {last[:200]}" if last else ""
        return _Verdict(
            Outcome.FAIL,
            f"{runtime.argv[0]} {runtime.exit_status()} {when}{detail}",
            Classification.CRASHED,
        )

    def _launched_run(
        self, runtime: LaunchedRuntime, client: OpenAIClient, launch: dict[str, Any]
    ) -> _Verdict:
        target = self.ctx.target
        ready = runtime.wait_ready(client.http, self.deadline)
        launch["ready_ms"] = ready.ms
        launch["ready_probe"] = ready.probe
        if ready.status == "exited":
            return self._crashed(runtime, "before it answered HTTP")
        if ready.status == "timeout":
            return _Verdict(
                Outcome.FAIL,
                f"{runtime.argv[0]} did not answer HTTP on 127.0.0.1:{runtime.port} within "
                f"{self.ctx.timeout:g} s (last log line: {(runtime.log_tail(1) or [''])[0][:200]})",
                Classification.TIMEOUT,
            )
        processes = runtime.processes()
        launch["processes"] = [{"pid": p.pid, "argv": p.argv[:64]} for p in processes]
        for process in processes:
            forbidden = forbidden_in(process.argv, target.forbidden_flags)
            if forbidden:
                return _Verdict(
                    Outcome.FAIL,
                    f"process {process.pid} of the launch runs with {', '.join(forbidden)}, "
                    f"which target {target.name} forbids: {' '.join(process.argv)[:300]}",
                    "forbidden_flag",
                )
        facts = runtime_facts(runtime.log_lines())
        self.evidence["runtime"] = facts
        resources = Resources(load_ms=ready.ms)
        verdict = self.exchange(client, ("127.0.0.1", runtime.port), resources=resources)
        if not runtime.running():
            return self._crashed(runtime, "while it was being asked")
        return verdict

    # -- what both share ------------------------------------------------------------------

    def exchange(
        self, client: OpenAIClient, on_host: tuple[str, int] | None, *, resources: Resources
    ) -> _Verdict:
        """Ask the server what it serves, bind its identity, run the suite, judge.

        ``on_host``: (host, port) of a server on this host (its process is checked in /proc),
        None for a remote one."""
        status, models = client.get_json("/v1/models")
        ids, sizes, params = model_ids(models) if status == 200 else ([], [], [])
        props_status, props = client.get_json("/props")
        served = ServedModel(model_ids=ids, sizes=sizes, n_params=params)
        server: dict[str, Any] = {"models_status": status, "served_models": ids}
        if props_status == 200 and isinstance(props, dict):
            kept = kept_props(props, self.ctx.record.manifest.architecture.chat_template_sha256)
            server["props"] = kept
            if isinstance(kept.get("model_path"), str):
                served.model_path = str(kept["model_path"])
        self.evidence["server"] = server
        if self.runtime is not None:
            facts = self.evidence.setdefault("runtime", {})
            if isinstance(server.get("props", {}).get("build_info"), str):
                facts.setdefault("build", server["props"]["build_info"])
            self.findings += build_findings(self.ctx.target, facts)

        context = started_context(self.ctx, server.get("props") or {})
        if context is not None:
            self.findings.append(context)
        model_id = ids[0] if ids else None
        answers = ask_suite(
            self.ctx, self.suite, client, model_id, self.evidence, EndpointSmoke.name
        )
        if self.suite.latency is not None:
            self.traffic = latency_traffic(self.ctx, self.suite, client, model_id, self.deadline)
        if self.runtime is not None and self.ctx.target.serving is not None:
            self.evidence["served_context_probe"] = served_context_probe(
                self.ctx, self.runtime, model_id, self.deadline, reported_runtime(self.evidence)
            )
        served.answered_as = first_strings(a.model for _, a in answers)
        identity = served_identity(self.ctx, served, on_host, self.runtime)
        self.identity = identity
        self.evidence["identity"] = {"status": identity.status, "message": identity.message}
        self.evidence["identity"] |= identity.evidence
        if identity.status == "mismatch":
            self.findings.append(Finding(0, "identity_mismatch", identity.message))
        elif identity.status == "unconfirmed" and self.ctx.target.require_identity:
            self.findings.append(
                Finding(
                    5,
                    "identity_unconfirmed",
                    identity.message + f" (target {self.ctx.target.name} requires identity; set "
                    "require_identity: false to accept)",
                )
            )
        return self._judge(answers, resources)

    def _judge(self, answers: list[tuple[str, Answer]], resources: Resources) -> _Verdict:
        suite = self.suite
        cases = {c.id: c for c in suite.cases}
        has_template = self.ctx.record.manifest.architecture.chat_template_sha256 is not None
        generations: dict[str, Generation] = {}
        kept: list[dict[str, Any]] = []
        for case_id, answer in answers:
            case = cases[case_id]
            chat = has_template if case.chat is None else case.chat
            generations[case_id] = Generation(
                case_id=case_id,
                prompt=case.prompt,
                output=answer.text,
                chat=chat,
                finish_reason=FINISH_REASONS.get(answer.finish_reason or ""),
                prompt_tokens=answer.prompt_tokens,
                completion_tokens=answer.completion_tokens,
                max_tokens=case.max_tokens,
                ttft_ms=answer.ttft_ms,
                decode_ms=answer.decode_ms,
            )
            kept.append(
                {
                    "id": case_id,
                    "prompt": case.prompt,
                    "expect": case.expect.describe(),
                    "mode": "chat" if chat else "completion",
                    "output": answer.text,
                    "finish_reason": answer.finish_reason,
                    "max_tokens": case.max_tokens,
                    "prompt_tokens": answer.prompt_tokens,
                    "completion_tokens": answer.completion_tokens,
                    "tokens_from": answer.tokens_from,
                    "ttft_ms": answer.ttft_ms,
                    "decode_ms": answer.decode_ms,
                    "wall_ms": answer.wall_ms,
                    "streamed": answer.streamed,
                    "truncated": answer.truncated,
                    "served_as": answer.model,
                }
                | ({"server_timings": answer.server_timings} if answer.server_timings else {})
            )
        figures = stream_figures(answers)
        resources = resources.model_copy(update=figures)
        if suite.latency is not None:
            resources = with_traffic(resources, self.traffic, suite.latency)
            self.evidence["traffic_requests"] = (self.traffic or {}).get("requests")
        if self.runtime is not None:
            # The runtime's processes (its process group, without the guard): VmHWM summed.
            peaks = [p.peak_rss_bytes for p in self.runtime.processes() if p.peak_rss_bytes]
            if peaks:
                resources = resources.model_copy(update={"peak_rss_bytes": sum(peaks)})
        result = evaluate_suite(suite, generations, resources)
        verdicts = {c.case_id: c for c in result.cases}
        for generation in kept:
            verdict = verdicts.get(generation["id"])
            if verdict is not None:
                generation["classification"] = verdict.classification
                generation["reason"] = verdict.reason
        self._plausibility(resources)
        self.evidence["generations"] = kept
        self.evidence["resources"] = resources.model_dump(mode="json")
        cost = run_cost(self.ctx.target, resources)
        if cost is not None:
            self.evidence["cost"] = cost
        self.evidence["suite_result"] = result.model_dump(mode="json")
        if not result.passed:
            self.findings.append(Finding(3, *self._suite_failure(result)))
        return self._verdict(result, kept, resources)

    def _plausibility(self, resources: Resources) -> None:
        """Flag figures no runtime on the target's hardware reaches (``decode_ceiling``)."""
        kind = self.ctx.target.kind
        weights = weight_bytes(self.ctx)
        self.evidence["plausible_max"] = {
            "decode_tokens_per_s": decode_ceiling(kind, weights),
            "target_kind": kind,
            "weight_bytes": weights,
        }
        flagged = implausible_figures(kind, weights, resources)
        if not flagged:
            return
        self.evidence["implausible"] = flagged
        self.findings.append(
            Finding(
                4,
                "implausible_figures",
                f"implausible: [{'; '.join(flagged)}] (a canned answer, not a model: the run is "
                "not believed)",
            )
        )

    def _suite_failure(self, result: SuiteResult) -> tuple[str, str]:
        if self.suite.name == GOLDEN_SUITE_NAME and result.failing_cases:
            first = result.failing_cases[0]
            return first.classification, (
                f"{first.classification}: {first.prompt!r} -> {first.output!r} "
                f"({first.reason}; expected {first.expect.describe()})"
            )
        return failure_class(result), describe_result(result) + " — " + "; ".join(result.reasons)

    def _verdict(
        self, result: SuiteResult, generations: list[dict[str, Any]], resources: Resources
    ) -> _Verdict:
        speed = []
        if resources.ttft_ms_max is not None:
            speed.append(f"TTFT max {units.duration_ms(resources.ttft_ms_max)}")
        if resources.decode_tokens_per_s is not None:
            speed.append(units.rate(resources.decode_tokens_per_s))
        costs = describe_cost(self.evidence.get("cost"))
        if costs:
            speed.append(costs)
        pending = not_exercised(self.ctx.target, self.runtime, self.evidence)
        if self.findings:
            ordered = sorted(self.findings, key=lambda f: f.rank)
            # What could not be judged is said too: a fix for the failure would not pass.
            return _Verdict(
                Outcome.FAIL,
                "; ".join([*(f.message for f in ordered), *(m for _, m in pending)]),
                ordered[0].classification,
            )
        if pending:
            # Recorded with everything it answered, and decides nothing: never a pass.
            return _Verdict(Outcome.UNAVAILABLE, "; ".join(m for _, m in pending), pending[0][0])
        if self.suite.name == GOLDEN_SUITE_NAME:
            answered = "answered " + " | ".join(repr(g["output"]) for g in generations)
        else:
            answered = describe_result(result)
        assert self.identity is not None
        identity = (
            f"model confirmed {self.identity.how}"
            if self.identity.status == "confirmed"
            else f"model NOT confirmed (require_identity: false): {self.identity.message}"
        )
        return _Verdict(
            Outcome.PASS, f"{answered}; {identity}" + (f"; {', '.join(speed)}" if speed else "")
        )


class EndpointSmoke:
    name = "endpoint-smoke"

    def run(self, ctx: CheckContext) -> CheckResult:
        started = utcnow()
        target = ctx.target
        evidence: dict[str, Any] = {"deployed_unit": deployed_unit(target)}
        suite = smoke_suite(ctx)
        evidence["suite"] = {"name": suite.name, "digest": suite.digest()}
        run = _EndpointRun(ctx, suite, started, evidence, time.monotonic() + ctx.timeout)
        if not serves_own_runtime(target):
            return run.done(
                _Verdict(Outcome.SKIPPED, f"target {target.name} declares no launch or endpoint")
            )
        try:
            import httpx  # noqa: F401
        except ImportError:
            return run.done(
                _Verdict(
                    Outcome.UNAVAILABLE,
                    "not run: httpx is not installed (pip install 'modelreg[server]')",
                )
            )
        if target.launch:
            return run.done(run.launched())
        assert target.endpoint is not None
        return run.done(run.served(target.endpoint))
