"""Golden suites: prompts with expectations, and thresholds fixed in the file before any result.

A suite file (YAML, schema in ``schemas/suite.schema.json``)::

    schema_version: 1
    name: default-chat
    thresholds:
      min_pass_rate: 0.5            # overall share of cases that must pass
      subsets: {facts: 0.5}         # per-subset minimum pass rates
      max_peak_rss_gib: 1.0         # resource gates, measured in the runtime child
      min_decode_tokens_per_s: 20
      max_ttft_ms: 3000
      min_top1_agreement: 0.9       # agreement with a reference (verify --reference)
      max_mean_kl: 0.1
    cases:
      - id: capital-france
        subset: facts
        prompt: What is the capital of France? Answer in one word.
        max_tokens: 16
        expect: {mode: contains, value: Paris, reject: [Lyon, Marseille]}

The models that describe what a runtime produced (``Generation``, ``Resources``) and what the
judge made of it (``CaseResult``, ``SuiteResult``) live here too: they are stored as evidence.
"""

from __future__ import annotations

import hashlib
import json
import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from modelreg.limits import (
    MAX_CASE_TOKENS,
    MAX_DECODE_TOKENS_PER_S,
    MAX_EXPECT_CHARS,
    MAX_KL,
    MAX_LIST_ITEMS,
    MAX_PROMPT_CHARS,
    MAX_SUBSETS,
    MAX_SUITE_CASES,
    MAX_TTFT_MS,
)

SLUG = r"^[a-z0-9][a-z0-9._-]{0,63}$"
_Expected = Annotated[str, Field(max_length=MAX_EXPECT_CHARS)]


class Classification(StrEnum):
    """What the judge made of one generation (or of a run that produced none)."""

    PASS = "pass"
    WRONG_ANSWER = "wrong_answer"
    # Empty, repeated, near-constant, control characters or raw special tokens; word salad
    # from broken weights (stutter, few distinct words, glued fragments, non-words, walls of
    # line breaks or punctuation) — judged before the stop and answer checks.
    DEGENERATE = "degenerate"
    # A chat model that did not end its turn (no EOS / end-of-turn token within the budget,
    # or an end-of-turn marker written out as text).
    NO_STOP = "no_stop"
    LOAD_ERROR = "load_error"
    # The runtime's template sandbox refused the chat template (it reached Python internals).
    UNSAFE_TEMPLATE = "unsafe_template"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    NOT_RUN = "not_run"  # the run produced no output for this case


class ExpectMode(StrEnum):
    CONTAINS = "contains"  # word-bounded, not negated, no rejected alternative asserted
    EXACT = "exact"  # the whole answer, normalised (case, surrounding quotes, final period)
    REGEX = "regex"  # re.search over the answer
    ONE_OF = "one_of"  # the whole answer, normalised, is one of ``values``
    JSON = "json"  # the answer is JSON (optionally in a ``` fence), valid against json_schema
    NOT_CONTAINS = "not_contains"  # the word-bounded value does not occur


_NEEDS_VALUE = {ExpectMode.CONTAINS, ExpectMode.EXACT, ExpectMode.REGEX, ExpectMode.NOT_CONTAINS}
_TAKES_REJECT = {ExpectMode.CONTAINS, ExpectMode.REGEX, ExpectMode.ONE_OF}


class Expectation(BaseModel):
    """What an answer must be. ``reject`` lists alternatives the answer must not assert."""

    model_config = ConfigDict(extra="forbid")

    mode: ExpectMode = ExpectMode.CONTAINS
    value: str | None = Field(default=None, min_length=1, max_length=MAX_EXPECT_CHARS)
    values: list[_Expected] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    reject: list[_Expected] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
    json_schema: dict[str, Any] | None = None
    case_sensitive: bool = False

    @field_validator("values", "reject")
    @classmethod
    def _no_empty_strings(cls, value: list[str]) -> list[str]:
        if any(not item.strip() for item in value):
            raise ValueError("empty string in list")
        return value

    @field_validator("json_schema")
    @classmethod
    def _valid_json_schema(
        cls, value: dict[str, Any] | None, info: ValidationInfo
    ) -> dict[str, Any] | None:
        if value is None or info.data.get("mode") is not ExpectMode.JSON:
            return value  # the mode check below says what is wrong
        try:
            import jsonschema
        except ImportError:
            raise ValueError(
                "checking a JSON Schema needs the jsonschema package: pip install jsonschema"
            ) from None
        try:
            jsonschema.validators.validator_for(value).check_schema(value)
        except jsonschema.SchemaError as exc:
            where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
            raise ValueError(f"not a valid JSON Schema at {where}: {exc.message}") from None
        return value

    @model_validator(mode="after")
    def _fits_mode(self) -> Expectation:
        mode = self.mode
        if mode in _NEEDS_VALUE and self.value is None:
            raise ValueError(f"mode {mode} needs 'value'")
        if mode not in _NEEDS_VALUE and self.value is not None:
            raise ValueError(f"mode {mode} takes no 'value'")
        if mode is ExpectMode.ONE_OF and not self.values:
            raise ValueError("mode one_of needs a non-empty 'values' list")
        if mode is not ExpectMode.ONE_OF and self.values:
            raise ValueError(f"mode {mode} takes no 'values' (only one_of does)")
        if mode not in _TAKES_REJECT and self.reject:
            raise ValueError(f"mode {mode} takes no 'reject' list")
        if mode is not ExpectMode.JSON and self.json_schema is not None:
            raise ValueError(f"mode {mode} takes no 'json_schema' (only json does)")
        if mode is ExpectMode.REGEX:
            assert self.value is not None
            try:
                re.compile(self.value)
            except re.error as exc:
                raise ValueError(f"value is not a valid regular expression: {exc}") from None
        return self

    def describe(self) -> str:
        """One short phrase, e.g. ``contains 'Paris'`` or ``json``."""
        if self.mode is ExpectMode.ONE_OF:
            return "one of " + ", ".join(repr(v) for v in self.values)
        if self.mode is ExpectMode.JSON:
            return "json" + (" matching its schema" if self.json_schema else "")
        return f"{self.mode} {self.value!r}"


MAX_FILL_TOKENS = 8192
# The filler of a long-context case: plain sentences, numbered so no two are alike (a model
# cannot answer from a repeated pattern) and with nothing in them a question could be about.
_FILLER = (
    "Note {n}: the archive keeps this line only to take up room; it records no fact, no name "
    "and no number that matters to any question. "
)


class LongContext(BaseModel):
    """A case asked after a long input: ``needle`` (the fact the answer needs) first, then
    filler up to ``fill`` of the model's trained context — at most ``max_fill_tokens``, so the
    case costs a bounded time on any model — then the case's prompt."""

    model_config = ConfigDict(extra="forbid")

    needle: str = Field(min_length=1, max_length=2000)
    fill: float = Field(default=0.5, gt=0, le=0.95)
    max_fill_tokens: int = Field(default=1024, ge=16, le=MAX_FILL_TOKENS)

    def fill_tokens(self, context_length: int | None) -> int:
        """Tokens of filler for a model of ``context_length`` (unknown: the cap)."""
        if context_length is None or context_length <= 0:
            return self.max_fill_tokens
        return max(16, min(self.max_fill_tokens, int(context_length * self.fill)))


class Case(BaseModel):
    """One golden prompt: what to ask, how, and what the answer must be."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=SLUG)
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)
    expect: Expectation
    subset: str = Field(default="general", pattern=SLUG)
    max_tokens: int = Field(default=64, ge=1, le=MAX_CASE_TOKENS)
    # None: use the chat template when the artifact has one. A chat generation must end its
    # turn within max_tokens; a plain completion may run to the budget.
    chat: bool | None = None
    note: str | None = Field(default=None, max_length=4000)  # why the case is here
    long_context: LongContext | None = None

    def prompt_for(self, context_length: int | None) -> str:
        """What the runtime is asked: the prompt, after the long input of a long-context case
        sized to the model's trained context (about 3 characters a token: llama-family
        tokenizers average ~4 on English, so the input stays within its budget)."""
        if self.long_context is None:
            return self.prompt
        budget = self.long_context.fill_tokens(context_length) * 3
        filler: list[str] = []
        used = 0
        while used < budget:
            line = _FILLER.format(n=len(filler) + 1)
            filler.append(line)
            used += len(line)
        return f"{self.long_context.needle}\n\n{''.join(filler).strip()}\n\n{self.prompt}"


# The resource gates, one definition for a suite's thresholds and a target's ``gates:``.
PeakRssGiB = Annotated[float | None, Field(gt=0, le=4096)]
DecodeTokensPerS = Annotated[float | None, Field(gt=0, le=MAX_DECODE_TOKENS_PER_S)]
TtftMs = Annotated[float | None, Field(gt=0, le=MAX_TTFT_MS)]


class ResourceGates(BaseModel):
    """Gates on what the runtime used and how fast it answered, as a target states them
    (``gates:`` in its definition): speed measured on a host says something about that host,
    so a suite meant for every host leaves them to the targets."""

    model_config = ConfigDict(extra="forbid")

    max_peak_rss_gib: PeakRssGiB = None
    min_decode_tokens_per_s: DecodeTokensPerS = None
    min_prompt_tokens_per_s: DecodeTokensPerS = None
    max_ttft_ms: TtftMs = None
    max_ttft_ms_p50: TtftMs = None
    max_ttft_ms_p95: TtftMs = None

    @property
    def declared(self) -> bool:
        return any(v is not None for v in self.model_dump().values())


class Thresholds(BaseModel):
    """Acceptance gates, fixed in the suite file before any result is seen."""

    model_config = ConfigDict(extra="forbid")

    min_pass_rate: float = Field(ge=0, le=1)
    subsets: dict[str, float] = Field(default_factory=dict, max_length=MAX_SUBSETS)
    max_peak_rss_gib: PeakRssGiB = None
    min_decode_tokens_per_s: DecodeTokensPerS = None
    min_prompt_tokens_per_s: DecodeTokensPerS = None
    max_ttft_ms: TtftMs = None  # the slowest first token
    max_ttft_ms_p50: TtftMs = None  # percentiles over the run's generations (nearest rank)
    max_ttft_ms_p95: TtftMs = None
    # Relative to a baseline record (only ``production``: the record production on the
    # target being verified), from its own counting run on this suite version: at most this
    # drop of the pass rate (0.01: one point), overall and per subset.
    max_pass_rate_drop_vs: Literal["production"] | None = None
    max_pass_rate_drop: float | None = Field(default=None, ge=0, le=1)
    max_subset_pass_rate_drop: dict[str, float] = Field(
        default_factory=dict, max_length=MAX_SUBSETS
    )
    min_top1_agreement: float | None = Field(default=None, ge=0, le=1)
    max_mean_kl: float | None = Field(default=None, ge=0, le=MAX_KL)
    # The record (id or prefix) the agreement gates compare with. Named: every verify must
    # compare with a reference (else agreement is unmeasured, and the record not deployable).
    # Not named: the agreement gates judge a comparison asked for (verify --reference), and a
    # verify without one is not held back by them.
    reference: str | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("subsets", "max_subset_pass_rate_drop")
    @classmethod
    def _rates_in_range(cls, value: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        what = "min pass rate" if info.field_name == "subsets" else "pass-rate drop"
        for subset, rate in value.items():
            if not 0 <= rate <= 1:
                raise ValueError(f"{what} of subset {subset!r} must be in [0, 1]: {rate}")
        return value

    @model_validator(mode="after")
    def _baseline_complete(self) -> Thresholds:
        if (
            self.reference is not None
            and self.min_top1_agreement is None
            and self.max_mean_kl is None
        ):
            raise ValueError(
                "a reference needs a gate to judge the comparison by: min_top1_agreement or "
                "max_mean_kl"
            )
        drops = self.max_pass_rate_drop is not None or bool(self.max_subset_pass_rate_drop)
        if drops and self.max_pass_rate_drop_vs is None:
            raise ValueError("a pass-rate drop needs its baseline: max_pass_rate_drop_vs")
        if self.max_pass_rate_drop_vs is not None and not drops:
            raise ValueError(
                "max_pass_rate_drop_vs needs max_pass_rate_drop or max_subset_pass_rate_drop"
            )
        return self


MAX_LATENCY_REPEAT = 100
MAX_LATENCY_CONCURRENCY = 64
MAX_LATENCY_WARMUP = 100


class LatencyPlan(BaseModel):
    """How a run measures latency like traffic (``latency:`` in a suite): after the judged
    run, ``warmup`` requests that are not measured, then every case (or those of ``cases``)
    asked ``repeat`` times with ``concurrency`` requests in flight at once — a closed loop of
    that many clients. TTFT percentiles and per-sequence decode come from those requests, and
    the evidence says how the runtime batched them."""

    model_config = ConfigDict(extra="forbid")

    warmup: int = Field(default=1, ge=0, le=MAX_LATENCY_WARMUP)
    repeat: int = Field(default=3, ge=1, le=MAX_LATENCY_REPEAT)
    concurrency: int = Field(default=1, ge=1, le=MAX_LATENCY_CONCURRENCY)
    cases: list[Annotated[str, Field(pattern=SLUG)]] = Field(
        default_factory=list, max_length=MAX_SUITE_CASES
    )


# (block, …, key) of the fields ``Suite.canonical_json`` leaves out while they are None.
_DIGESTED_WHEN_SET: tuple[tuple[str, ...], ...] = (("thresholds", "reference"), ("latency",))


class Suite(BaseModel):
    """A versioned golden suite. Runs store its ``digest``: a changed suite makes them stale."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    name: str = Field(pattern=SLUG)
    description: str = Field(default="", max_length=8000)
    thresholds: Thresholds
    cases: list[Case] = Field(min_length=1, max_length=MAX_SUITE_CASES)
    latency: LatencyPlan | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Suite:
        seen: set[str] = set()
        for case in self.cases:
            if case.id in seen:
                raise ValueError(f"case id {case.id!r} is used twice")
            seen.add(case.id)
        for case_id in self.latency.cases if self.latency is not None else []:
            if case_id not in seen:
                raise ValueError(f"latency.cases names {case_id!r}, but no case has that id")
        subsets = {case.subset for case in self.cases}
        for subset in [*self.thresholds.subsets, *self.thresholds.max_subset_pass_rate_drop]:
            if subset not in subsets:
                raise ValueError(
                    f"thresholds.subsets names {subset!r}, but no case has that subset"
                )
        return self

    def canonical_json(self) -> str:
        data = self.model_dump(mode="json")
        # Fields added after suites were first stored count only when set: a suite that does
        # not use them keeps the digest its runs were judged under.
        for path in _DIGESTED_WHEN_SET:
            *parents, key = path
            block = data
            for parent in parents:
                block = block.get(parent) or {}
            if block.get(key, 0) is None:
                del block[key]
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """sha256 of the canonical content: layout, comments and key order do not count."""
        return hashlib.sha256(self.canonical_json().encode()).hexdigest()


class FinishReason(StrEnum):
    STOP = "stop"  # the model ended (EOS / end-of-turn token, or a stop sequence)
    LENGTH = "length"  # the token budget ran out


class Generation(BaseModel):
    """What a runtime produced for one prompt — however it was produced (a runtime child, an
    HTTP endpoint). The judge needs ``output``, ``chat`` and the finish facts."""

    model_config = ConfigDict(extra="forbid")

    case_id: str | None = None
    prompt: str
    output: str
    chat: bool
    finish_reason: FinishReason | None = None  # None: the runtime did not say
    stopped_by_eos: bool | None = None  # an EOS / end-of-turn token ended it
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    max_tokens: int | None = None
    ttft_ms: float | None = None
    prompt_ms: float | None = None
    decode_ms: float | None = None


class Verdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    classification: Classification
    reason: str  # one line

    @property
    def passed(self) -> bool:
        return self.classification is Classification.PASS


class Traffic(BaseModel):
    """Latency measured like traffic (a suite's ``latency:`` plan): ``requests`` measured
    after ``warmup``, ``concurrency`` in flight at once; TTFT from each request's own start to
    its first token; decode per sequence (its generated tokens after the first over the time
    from its first token to its last); ``batching`` says how the runtime served them."""

    model_config = ConfigDict(extra="forbid")

    status: Literal["ok", "not_run", "error"]
    reason: str | None = None  # why not run / what failed
    warmup: int
    repeat: int
    concurrency: int
    requests: int = 0  # measured
    batching: str | None = None
    ttft_ms_p50: float | None = None
    ttft_ms_p95: float | None = None
    ttft_ms_max: float | None = None
    decode_tokens_per_s_p50: float | None = None  # per sequence, the median request's
    decode_tokens_per_s_min: float | None = None  # per sequence, the slowest request's
    throughput_tokens_per_s: float | None = None  # tokens generated / the phase's wall time
    max_in_flight: int | None = None  # sequences the runtime held at once, at most
    wall_ms: float | None = None


class Resources(BaseModel):
    """What the runtime used, measured in its own process over one run."""

    model_config = ConfigDict(extra="forbid")

    peak_rss_bytes: int | None = None  # VmHWM of the runtime process
    load_ms: float | None = None
    ttft_ms_max: float | None = None
    ttft_ms_median: float | None = None  # the p50
    ttft_ms_p95: float | None = None  # nearest rank: a measured value
    prompt_tokens_per_s: float | None = None
    decode_tokens_per_s: float | None = None
    context_used_tokens: int | None = None  # the most any one generation used
    context_tokens: int | None = None  # what the runtime allocated
    # The suite's latency plan, measured: the TTFT and decode figures above are then these
    # requests' (None: the suite asks for no traffic).
    traffic: Traffic | None = None

    @property
    def peak_rss_gib(self) -> float | None:
        return None if self.peak_rss_bytes is None else self.peak_rss_bytes / (1 << 30)


class CaseResult(BaseModel):
    """One case's outcome, with everything needed to re-read it or turn it into a regression
    case (prompt, expectation, output)."""

    model_config = ConfigDict(extra="forbid")

    case_id: str
    subset: str
    prompt: str
    chat: bool | None  # as the case declares it (the generation says what ran)
    max_tokens: int
    expect: Expectation
    output: str | None
    finish_reason: FinishReason | None = None
    stopped_by_eos: bool | None = None
    completion_tokens: int | None = None
    classification: Classification
    reason: str

    @property
    def passed(self) -> bool:
        return self.classification is Classification.PASS


class SubsetResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    subset: str
    passed: int
    total: int
    pass_rate: float
    min_pass_rate: float | None  # None: no per-subset gate
    ok: bool


class GateOutcome(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNMEASURED = "unmeasured"  # the figure was not measured: blocks, never a pass
    SKIPPED = "skipped"  # not asked for in this run (agreement without a reference)


class GateSource(StrEnum):
    """Where a gate was stated."""

    SUITE = "suite"  # the suite's thresholds
    TARGET = "target"  # the ``gates:`` of the target the run was on
    BASELINE = "baseline"  # relative to a baseline record measured in the same run, same host


class GateResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gate: str  # the threshold's name, e.g. max_peak_rss_gib
    outcome: GateOutcome
    measured: float | None
    limit: float
    message: str
    source: GateSource = GateSource.SUITE
    target: str | None = None  # the target whose gates: stated it (source target)


class AgreementFigures(BaseModel):
    """Candidate vs reference next-token distributions over the same tokens."""

    model_config = ConfigDict(extra="forbid")

    tokens: int
    top1_agreement: float  # share of positions where the greedy next token is the same
    mean_kl: float  # mean KL(reference || candidate), nats
    max_kl: float
    candidate_runtime: str
    reference_runtime: str
    reference_dtype: str | None = None
    text_sha256: str
    wall_ms: float


class SuiteResult(BaseModel):
    """A run judged against a suite: per case, per subset, per gate, and the verdict."""

    model_config = ConfigDict(extra="forbid")

    suite_name: str
    suite_digest: str
    passed: bool
    pass_rate: float
    min_pass_rate: float | None = None  # the suite's, as judged (None: stored before it was)
    cases: list[CaseResult]
    subsets: list[SubsetResult]
    gates: list[GateResult]
    resources: Resources | None = None
    agreement: AgreementFigures | None = None
    reasons: list[str]  # one line per failed gate; empty when passed

    @property
    def failing_cases(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.passed]
