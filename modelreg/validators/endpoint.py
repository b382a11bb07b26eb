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

import hashlib
import ipaddress
import os
import re
import statistics
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from modelreg import host, units
from modelreg.clock import utcnow
from modelreg.costs import describe_cost, run_cost
from modelreg.deployed_unit import deployed_unit, serves_own_runtime
from modelreg.schemas.suite import (
    Case,
    Classification,
    FinishReason,
    Generation,
    Resources,
    Suite,
    SuiteResult,
)
from modelreg.schemas.verification import CheckResult, Outcome
from modelreg.validators.base import CheckContext, finish
from modelreg.validators.exercised import ReportedRuntime, unconfirmed, versions_of
from modelreg.validators.identity import (
    IdentityVerdict,
    ServedModel,
    as_remote,
    bind_identity,
    bind_process,
    first_strings,
    model_ids,
    on_this_host,
    required_files,
)
from modelreg.validators.judge import evaluate_suite
from modelreg.validators.launch import (
    LaunchedRuntime,
    check_build_flags,
    cmake_cache_flags,
    fill_placeholders,
    forbidden_in,
    free_port,
    runtime_facts,
)
from modelreg.validators.llama_runtime import declared_or_host_flags, probe_deadline
from modelreg.validators.neuron_host import neuron_host_problem
from modelreg.validators.neuron_host import this_host as neuron_this_host
from modelreg.validators.openai_client import (
    Answer,
    EndpointRejected,
    EndpointTimeout,
    EndpointUnavailable,
    OpenAIClient,
)
from modelreg.validators.resources import percentile, with_traffic
from modelreg.validators.smoke import (
    GOLDEN_SUITE_NAME,
    describe_result,
    failure_class,
    smoke_memory_problem,
    smoke_suite,
)

# /props fields worth keeping (the chat template is kept as its digest).
PROPS_KEPT = ("model_path", "model_alias", "model_name", "build_info", "total_slots", "n_ctx")
# Greedy decoding as the bundled check does it: temperature 0 and, for the llama.cpp family
# (llama-server, ik_llama.cpp, llama-cpp-python — whose server defaults to a 1.1 repetition
# penalty), no repetition penalty. A server that refuses the extension is asked again without.
GREEDY = {"temperature": 0}
LLAMA_CPP_GREEDY = {"repeat_penalty": 1.0}
FINISH_REASONS = {"stop": FinishReason.STOP, "length": FinishReason.LENGTH}

# Decode tokens/s no runtime reaches on a target's hardware; a figure above it is not believed.
# Decoding one stream reads every weight once per token, so tokens/s is at most memory
# bandwidth / weight bytes. The bandwidths are above the fastest hardware of each kind:
# - cpu: 1.25 TB/s. A dual-socket server with 12 channels of DDR5-6400 per socket peaks at
#   2 x 12 x 51.2 GB/s = 1.23 TB/s; a desktop has about 0.1 TB/s.
# - neuron: 50 TB/s. trn2.48xlarge: 16 Trainium2 chips x 2.9 TB/s = 46 TB/s (inf2.48xlarge:
#   12 Inferentia2 chips x 0.82 TB/s = 9.8 TB/s).
# DECODE_HEADROOM: speculative decoding (several tokens accepted per pass), a mixture of experts
# (only the active experts are read: Qwen3-30B-A3B reads a tenth of its weights per token) and
# weights held in cache each let a runtime beat one full read per token; 16x covers them.
# DECODE_TOKENS_PER_S_MAX: whatever the size, a stream cannot go faster than one forward pass
# per token, every layer in turn. On a cpu host 5,000 tok/s is 0.2 ms per pass: about 100x
# what llama.cpp does with the 135M SmolLM2 of the tests on one core of the test machine
# (45 tok/s), the smallest model this registry has seen; neuron gets 4x that. The fake server
# of issue 22 streamed its canned "Paris" at 33,333 tok/s.
MEMORY_BANDWIDTH_MAX = {"cpu": 1.25e12, "neuron": 50e12}
# The served-context probe of a launched runtime leaves this many tokens of the context for
# the template and the one new token (its time bound is the bundled probe's: probe_deadline).
PROBE_MARGIN_TOKENS = 16
# CMake options only ik_llama.cpp's build has (ggml/CMakeLists.txt: GGML_IQK_MUL_MAT,
# GGML_IQK_FLASH_ATTENTION, …).
IK_LLAMA_CMAKE_OPTIONS = ("GGML_IQK_",)
DECODE_HEADROOM = 16
DECODE_TOKENS_PER_S_MAX = {"cpu": 5_000.0, "neuron": 20_000.0}


@dataclass(frozen=True)
class _Verdict:
    outcome: Outcome
    summary: str
    classification: str | None = None


@dataclass
class _Finding:
    """One reason the check did not pass, in the order of how much it says."""

    rank: int
    classification: str
    message: str


def _loopback(url: str) -> bool:
    """Does ``url`` reach a server on this host? By what the host resolves to, not how it is
    spelt: ``localhost.``, ``127.1``, ``0.0.0.0``, ``[::ffff:127.0.0.1]`` and this machine's
    own name or addresses all do — so a server there is judged by /proc, never by its word."""
    import socket

    hostname = (urlsplit(url).hostname or "").rstrip(".")
    if hostname in ("localhost", socket.gethostname()):
        return True
    try:
        infos = socket.getaddrinfo(hostname, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    local = _local_addresses()
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        mapped = getattr(address, "ipv4_mapped", None)
        for candidate in (address, mapped) if mapped is not None else (address,):
            if candidate.is_loopback or candidate.is_unspecified or str(candidate) in local:
                return True
    return False


def _local_addresses() -> set[str]:
    """The addresses of this host's interfaces (best effort, from its own name)."""
    import socket

    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return set()


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
    findings: list[_Finding] = field(default_factory=list)
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
        client = OpenAIClient(base_url, token, self.deadline, trust_env=not _loopback(base_url))
        try:
            return self.exchange(client, _host_port(base_url), resources=Resources())
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

    def _build_findings(self, facts: dict[str, Any]) -> None:
        """The launched build against the target: required build flags, and the CPU features
        it was compiled for against the target's CPU flags."""
        from modelreg.validators.cpu_features import missing_flags

        target = self.ctx.target
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
                    self.findings.append(_Finding(1, "build_flag_mismatch", r.message))
                elif r.status == "unconfirmed":
                    self.findings.append(
                        _Finding(
                            6,
                            "build_flag_unconfirmed",
                            f"{r.message} (looked at its startup log"
                            + (f" and {cache_path}" if cache_path else ", no CMakeCache.txt")
                            + ")",
                        )
                    )
        features = [
            name for name, value in (facts.get("build_features") or {}).items() if value == "1"
        ]
        flags = declared_or_host_flags(target)
        if features and flags is not None:
            missing = missing_flags(features, flags)
            if missing:
                self.findings.append(
                    _Finding(
                        2,
                        "incompatible",
                        f"the runtime was built for {', '.join(missing)}, which "
                        f"{target.name} lacks",
                    )
                )

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
            kept = {k: props[k] for k in PROPS_KEPT if isinstance(props.get(k), str | int)}
            # llama-server reports its context per slot under default_generation_settings.
            settings = props.get("default_generation_settings")
            if isinstance(settings, dict) and isinstance(settings.get("n_ctx"), int):
                kept["n_ctx"] = settings["n_ctx"]
            template = props.get("chat_template")
            if isinstance(template, str) and template:
                digest = hashlib.sha256(template.encode()).hexdigest()
                kept["chat_template_sha256"] = digest
                kept["chat_template_is_the_records"] = (
                    digest == self.ctx.record.manifest.architecture.chat_template_sha256
                )
            server["props"] = kept
            if isinstance(kept.get("model_path"), str):
                served.model_path = str(kept["model_path"])
        self.evidence["server"] = server
        if self.runtime is not None:
            facts = self.evidence.setdefault("runtime", {})
            if isinstance(server.get("props", {}).get("build_info"), str):
                facts.setdefault("build", server["props"]["build_info"])
            self._build_findings(facts)

        self._started_context(server.get("props") or {})
        answers = self._ask(client, ids[0] if ids else None)
        if self.suite.latency is not None:
            self.traffic = self._traffic(client, ids[0] if ids else None)
        if self.runtime is not None and self.ctx.target.serving is not None:
            self._served_context_probe(ids[0] if ids else None)
        served.answered_as = first_strings(a.model for _, a in answers)
        identity = self._identity(served, on_host)
        self.identity = identity
        self.evidence["identity"] = {"status": identity.status, "message": identity.message}
        self.evidence["identity"] |= identity.evidence
        if identity.status == "mismatch":
            self.findings.append(_Finding(0, "identity_mismatch", identity.message))
        elif identity.status == "unconfirmed" and self.ctx.target.require_identity:
            self.findings.append(
                _Finding(
                    5,
                    "identity_unconfirmed",
                    identity.message + f" (target {self.ctx.target.name} requires identity; set "
                    "require_identity: false to accept)",
                )
            )
        return self._judge(answers, resources)

    def _started_context(self, props: dict[str, Any]) -> None:
        """A server that reports its context (llama-server's ``/props`` ``n_ctx``) must hold
        what the target serves: a runtime started with less truncates or refuses."""
        serving = self.ctx.target.serving
        reported = props.get("n_ctx")
        if serving is None or not isinstance(reported, int) or reported <= 0:
            return
        wanted = serving.per_sequence(self.ctx.record.manifest.architecture.context_length)
        if wanted and reported < wanted:
            self.findings.append(
                _Finding(
                    2,
                    "does_not_fit",
                    f"the server was started with a {reported}-token context, below the {wanted} "
                    f"tokens target {self.ctx.target.name} serves",
                )
            )

    def _served_context_probe(self, model_id: str | None) -> None:
        """Fill the launched runtime's cache to the served context: one long prompt, one new
        token, within ``probe_deadline`` (and half the time left); the runtime's peak RSS
        and prompt tokens/s afterwards are the measurement host-compat judges by."""
        assert self.runtime is not None and self.ctx.target.serving is not None
        tokens = self.ctx.target.serving.per_sequence(
            self.ctx.record.manifest.architecture.context_length
        )
        probe: dict[str, Any] = {"status": "not_run", "tokens_requested": tokens}
        self.evidence["served_context_probe"] = probe
        if not tokens:
            probe["reason"] = "the served context is the trained one, which is not declared"
            return
        if unconfirmed(self.ctx.target.runtime, self._reported_runtime()):
            probe["reason"] = "the declared runtime is not the one launched: nothing to measure"
            return
        bound = min(probe_deadline(self.ctx), max(0.0, self.deadline - time.monotonic()) / 2)
        probe["deadline_s"] = round(bound, 1)
        # " the" is one token in the tokenizers this runtime family serves; a margin for the
        # template's and the answer's tokens keeps it inside the context.
        words = max(1, tokens - PROBE_MARGIN_TOKENS)
        body: dict[str, Any] = {"prompt": "the" + " the" * (words - 1), "max_tokens": 1}
        body |= GREEDY | {"stream": False}  # one answer carrying usage: the token count
        if model_id is not None:
            body["model"] = model_id
        client = OpenAIClient(
            self.runtime.base_url, None, time.monotonic() + bound, trust_env=False
        )
        try:
            answer = client.generate("/v1/completions", body, chat=False)
        except EndpointTimeout:
            probe |= {"status": "timeout", "reason": f"no answer within {bound:.0f} s"}
            return
        except EndpointUnavailable as exc:
            probe |= {"status": "error", "reason": str(exc)[:300]}
            return
        finally:
            client.close()
        timings = answer.server_timings or {}
        evaluated = answer.prompt_tokens or _int_or_none(timings.get("prompt_n"))
        # The server's own prompt timing, else the request's wall time (prompt + one token).
        prompt_ms = _float_or_none(timings.get("prompt_ms")) or answer.ttft_ms or answer.wall_ms
        peaks = [p.peak_rss_bytes for p in self.runtime.processes() if p.peak_rss_bytes]
        if evaluated is None:
            # Words are not tokens, and a server may truncate: only its count is a measurement.
            probe |= {
                "status": "error",
                "reason": "the server did not report how many prompt tokens it evaluated",
            }
            return
        probe |= {
            "status": "ok",
            "tokens_evaluated": evaluated,
            "prompt_ms": prompt_ms,
            "prompt_tokens_per_s": round(evaluated / (prompt_ms / 1000), 1) if prompt_ms else None,
            "resources": {"peak_rss_bytes": sum(peaks) if peaks else None},
        }

    def _identity(self, served: ServedModel, on_host: tuple[str, int] | None) -> IdentityVerdict:
        """A remote server by its own report; one on this host by /proc (for a launch: only a
        process of the runtime verify started counts)."""
        record, files = self.ctx.record, self.ctx.files
        claimed = bind_identity(record, files, served, remote=on_host is None)
        if on_host is None:
            return as_remote(claimed)
        launched = None
        if self.runtime is not None:
            launched = {p.pid for p in self.runtime.processes()}
        return on_this_host(claimed, bind_process(record, files, *on_host, launched=launched))

    def _ask(self, client: OpenAIClient, model_id: str | None) -> list[tuple[str, Answer]]:
        has_template = self.ctx.record.manifest.architecture.chat_template_sha256 is not None
        extensions: dict[str, Any] = dict(LLAMA_CPP_GREEDY)
        sampling = self.evidence.setdefault("sampling", GREEDY | {"seed": self.ctx.options.seed})
        sampling |= extensions
        answers = []
        cases = self.suite.cases
        for k, case in enumerate(cases, 1):
            path, body, chat = self._case_request(case, model_id, has_template)
            try:
                answer = client.generate(path, body | extensions, chat)
            except EndpointRejected as exc:
                if not extensions:
                    raise
                sampling["extensions_refused"] = str(exc)
                for key in extensions:
                    sampling.pop(key, None)
                extensions = {}
                answer = client.generate(path, body, chat)
            answers.append((case.id, answer))
            self.ctx.progress.case_answered(EndpointSmoke.name, k, len(cases), case.id)
        return answers

    def _case_request(
        self, case: Case, model_id: str | None, has_template: bool
    ) -> tuple[str, dict[str, Any], bool]:
        """(path, body, chat) of the streamed greedy request that asks ``case``."""
        chat = has_template if case.chat is None else case.chat
        body: dict[str, Any] = {
            "max_tokens": case.max_tokens,
            **GREEDY,
            "seed": self.ctx.options.seed,
            "stream": True,
        }
        if model_id is not None:
            body["model"] = model_id
        asked = case.prompt_for(self.ctx.record.manifest.architecture.context_length)
        if chat:
            body["messages"] = [{"role": "user", "content": asked}]
            return "/v1/chat/completions", body, True
        body["prompt"] = asked
        return "/v1/completions", body, False

    def _traffic(self, client: OpenAIClient, model_id: str | None) -> dict[str, Any]:
        """The suite's latency plan against the server: ``warmup`` requests, then each case
        ``repeat`` times, ``concurrency`` clients each sending its next request when its last
        one ended (a closed loop), every request streamed on its own connection."""
        import threading
        from concurrent.futures import ThreadPoolExecutor

        plan = self.suite.latency
        assert plan is not None
        serving = self.ctx.target.serving
        server = f"; the target serves {serving.parallel} in parallel" if serving else ""
        result: dict[str, Any] = {
            "batching": f"{plan.concurrency} concurrent streamed HTTP requests (a closed loop "
            f"of {plan.concurrency} clients); how the server batches them is its own{server}"
        }
        has_template = self.ctx.record.manifest.architecture.chat_template_sha256 is not None
        cases = [c for c in self.suite.cases if not plan.cases or c.id in plan.cases]
        if not cases:
            return result | {"status": "not_run", "message": "no case to ask"}
        local = threading.local()
        clients: list[OpenAIClient] = []

        def ask(case: Case) -> dict[str, Any]:
            if not hasattr(local, "client"):
                local.client = OpenAIClient(
                    client.base_url, client.token, self.deadline, trust_env=client.trust_env
                )
                clients.append(local.client)
            path, body, chat = self._case_request(case, model_id, has_template)
            answer = local.client.generate(path, body, chat)
            tokens = answer.completion_tokens or 0
            return {
                "id": case.id,
                "completion_tokens": tokens,
                "finish_reason": answer.finish_reason,
                "ttft_ms": answer.ttft_ms,
                "decode_tokens": max(0, tokens - 1),
                "decode_ms": answer.decode_ms,
            }

        warm = [cases[i % len(cases)] for i in range(plan.warmup)]
        measured = [case for _ in range(plan.repeat) for case in cases]
        try:
            with ThreadPoolExecutor(plan.concurrency, "traffic") as pool:
                list(pool.map(ask, warm))
                started = time.perf_counter()
                requests = list(pool.map(ask, measured))
                wall_ms = round((time.perf_counter() - started) * 1000, 2)
        except (EndpointUnavailable, EndpointTimeout) as exc:
            return result | {"status": "error", "message": str(exc)[:500]}
        finally:
            for opened in clients:
                opened.close()
        return result | {
            "status": "ok",
            "requests": requests,
            "wall_ms": wall_ms,
            "max_in_flight": min(plan.concurrency, len(measured)),
        }

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
        figures = _speed(answers)
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
            self.findings.append(_Finding(3, *self._suite_failure(result)))
        return self._verdict(result, kept, resources)

    def _plausibility(self, resources: Resources) -> None:
        """Flag figures no runtime on the target's hardware reaches (see DECODE_HEADROOM)."""
        kind = self.ctx.target.kind
        weights = weight_bytes(self.ctx)
        ceiling = decode_ceiling(kind, weights)
        self.evidence["plausible_max"] = {
            "decode_tokens_per_s": ceiling,
            "target_kind": kind,
            "weight_bytes": weights,
        }
        measured = resources.decode_tokens_per_s
        if measured is None or measured <= ceiling:
            return
        size = f" for {weights / 1e6:.0f} MB of weights" if weights else ""
        flagged = [
            f"decode {units.rate(measured)}, above the {units.rate(ceiling)} no {kind} host "
            f"reaches{size}"
        ]
        self.evidence["implausible"] = flagged
        self.findings.append(
            _Finding(
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

    def _reported_runtime(self) -> ReportedRuntime:
        """What the runtime that answered said about itself: its startup log's build and
        system info (a launch), ``/props`` ``build_info``, and its build's CMake cache."""
        facts = self.evidence.get("runtime") or {}
        props = (self.evidence.get("server") or {}).get("props") or {}
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

    def _serving_pids(self) -> list[int]:
        """The processes that served this run: the launched runtime's, else the loopback
        endpoint's listener found in /proc."""
        if self.runtime is not None:
            return [p.pid for p in self.runtime.processes()]
        found = ((self.evidence.get("identity") or {}).get("process") or {}).get("processes")
        return [
            p["pid"] for p in found or [] if isinstance(p, dict) and isinstance(p.get("pid"), int)
        ]

    def _not_exercised(self) -> list[tuple[str, str]]:
        """Why this run, whatever it answered, cannot decide the target: a declared runtime
        the runtime that answered did not confirm, or a Neuron target asked from a host that
        is not a Neuron host."""
        target = self.ctx.target
        pending = []
        reported = self._reported_runtime()
        self.evidence["exercised_runtime"] = reported.describe()
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
            remote = self.runtime is None and not (target.endpoint and _loopback(target.endpoint))
            found = neuron_this_host()
            self.evidence["neuron_host"] = found.evidence()
            problem: str | None
            if remote:
                problem = (
                    f"{target.endpoint} was asked from {host.hostname()}: an answer over HTTP "
                    "says nothing about the hardware behind it — verify on the Neuron host "
                    "itself (its endpoint on 127.0.0.1, or launch)"
                )
            else:
                problem = neuron_host_problem(target.neuron_cores, found, self._serving_pids())
            if problem:
                pending.append(
                    (
                        "not_a_neuron_host",
                        f"a pass on Neuron target {target.name} needs a run "
                        f"on a Neuron host: {problem}",
                    )
                )
        return pending

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
        pending = self._not_exercised()
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


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


def _host_port(url: str) -> tuple[str, int] | None:
    """(host, port) of a loopback URL, None for any other."""
    if not _loopback(url):
        return None
    import socket

    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    hostname = (parts.hostname or "").rstrip(".")
    if hostname == "localhost":
        return hostname, port  # /proc is searched for both of its addresses
    try:  # the address the connection goes to, as /proc lists listeners by address
        address = ipaddress.ip_address(
            str(socket.getaddrinfo(hostname, port, proto=socket.IPPROTO_TCP)[0][4][0])
        )
    except (OSError, UnicodeError, ValueError, IndexError):
        return hostname, port
    mapped = getattr(address, "ipv4_mapped", None)
    return str(mapped or address), port


def weight_bytes(ctx: CheckContext) -> int | None:
    """The bytes of the record's weights (None when a size is unknown)."""
    sizes = [f.bytes for f in required_files(ctx.record)]
    return sum(s for s in sizes if s is not None) if None not in sizes else None


def decode_ceiling(kind: str, weights: int | None) -> float:
    """The decode tokens/s above which one stream's figure is not believed on a ``kind``
    target serving ``weights`` bytes (see DECODE_HEADROOM)."""
    ceiling = DECODE_TOKENS_PER_S_MAX.get(kind, max(DECODE_TOKENS_PER_S_MAX.values()))
    bandwidth = MEMORY_BANDWIDTH_MAX.get(kind)
    if weights and bandwidth:
        ceiling = min(ceiling, bandwidth * DECODE_HEADROOM / weights)
    return round(ceiling, 1)


def _speed(answers: list[tuple[str, Answer]]) -> dict[str, Any]:
    """Run-level figures measured on the stream: TTFT, decode tokens/s (tokens after the
    first over the time from the first to the last)."""
    ttfts = [a.ttft_ms for _, a in answers if a.ttft_ms is not None]
    tokens = sum(
        (a.completion_tokens or 0) - 1
        for _, a in answers
        if a.decode_ms and (a.completion_tokens or 0) > 1
    )
    ms = sum(
        a.decode_ms or 0.0 for _, a in answers if a.decode_ms and (a.completion_tokens or 0) > 1
    )
    return {
        "ttft_ms_max": max(ttfts) if ttfts else None,
        "ttft_ms_median": round(statistics.median(ttfts), 2) if ttfts else None,
        "ttft_ms_p95": percentile(ttfts, 95),
        "decode_tokens_per_s": round(tokens / (ms / 1000), 2) if tokens > 0 and ms > 0 else None,
    }


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
