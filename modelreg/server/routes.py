"""The JSON API under ``/api/v1``: each endpoint parses its query or body, makes one
``Registry`` call (the registry is the application's: ``request.app.state.registry``) and
answers with the output model ``--json`` prints. Every endpoint authorizes its caller by one
path (``auth.authorize``), as the dashboard and the guard do."""

# No ``from __future__ import annotations``: FastAPI reads annotations at run time.

import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from modelreg import api
from modelreg.api.browse import SEARCH_MAX
from modelreg.errors import (
    NoRollbackCandidate,
)
from modelreg.schemas.output import (
    AddOutput,
    DiffOutput,
    ErrorOutput,
    FitOutput,
    GateOutput,
    HistoryOutput,
    ImportedRunsOutput,
    ListOutput,
    LocationsOutput,
    MatrixOutput,
    PromoteOutput,
    RollbackOutput,
    SearchOutput,
    ShowOutput,
    StateChangeOutput,
    StatusOutput,
    TargetsOutput,
    TrendOutput,
    UploadRunOutput,
    WebhookCreateOutput,
    WebhookRemoveOutput,
    WebhooksOutput,
)
from modelreg.server.auth import Caller, authorize, bearer_secret
from modelreg.server.http import API, json_response, record_or_handle, record_ref
from modelreg.server.inputs import (
    AddManifestInput,
    BitsQuery,
    ConcurrencyQuery,
    ContainsQuery,
    ContextQuery,
    KVType,
    LocationsInput,
    ModelQuery,
    PromoteInput,
    QuantQuery,
    ReasonInput,
    ReasonQuery,
    RecordPath,
    RecordQuery,
    RollbackInput,
    RunUpload,
    SearchQuery,
    Sha256Query,
    SinceQuery,
    TargetQuery,
    WebhookId,
    WebhookInput,
)
from modelreg.tokens import Permission

log = logging.getLogger("modelreg.server")

router = APIRouter()


def _registry(request: Request) -> api.Registry:
    registry: api.Registry = request.app.state.registry
    return registry


RegistryDep = Annotated[api.Registry, Depends(_registry)]


def caller(permission: Permission) -> Callable[[Request], Caller]:
    """The dependency that authorizes an endpoint's caller for ``permission``."""

    def dependency(request: Request) -> Caller:
        secret = bearer_secret(request.headers.get("authorization"))
        public_read = request.app.state.settings.public_read
        return authorize(request.app.state.registry, secret, permission, public_read=public_read)

    return dependency


Reader = Annotated[Caller, Depends(caller(Permission.READ))]
Adder = Annotated[Caller, Depends(caller(Permission.ADD))]
Verifier = Annotated[Caller, Depends(caller(Permission.UPLOAD_RUN))]
Releaser = Annotated[Caller, Depends(caller(Permission.DECIDE))]
errors: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOutput} for status in (401, 403, 404, 409, 422, 503)
}
errors |= {
    413: {
        "model": ErrorOutput,
        "description": "A body over the server's limit (`--max-body-bytes`, 16 MiB unless set), "
        "refused from its Content-Length.",
    },
    400: {
        "model": ErrorOutput,
        "description": "A body that is not JSON, or framed both by Content-Length and "
        "Transfer-Encoding.",
    },
    408: {"model": ErrorOutput, "description": "The body did not arrive in time."},
    411: {"model": ErrorOutput, "description": "A body without a Content-Length."},
}
RecordId = RecordPath
State = Annotated[
    Literal["active", "held", "retired"] | None,
    Query(description="Only records in this state (held: held, or a hold applies)."),
]


@router.get(f"{API}/status", response_model=StatusOutput, responses=errors, tags=["read"])
def status(
    registry: RegistryDep,
    _: Reader,
    model: ModelQuery | None = None,
    target: TargetQuery | None = None,
) -> Response:
    """What runs where: the production record of every (model, target), its files and
    locations, and whether it is deployable there now."""
    return Response(registry.status_json(model, target), media_type="application/json")


@router.get(
    f"{API}/gate",
    response_model=GateOutput,
    responses={**errors, 409: {"model": GateOutput, "description": "The gate did not pass."}},
    tags=["read"],
)
def gate(
    registry: RegistryDep,
    _: Reader,
    model: ModelQuery,
    target: TargetQuery,
    sha256: Sha256Query,
    accept_forced: Annotated[
        bool,
        Query(
            description="Pass a production record a break-glass rollback forced there while "
            "it is only stale (`forced` in the answer says so)."
        ),
    ] = False,
) -> Response:
    """The deploy gate: 200 when ``sha256`` is a file of the production record of
    ``model`` on ``target`` and that record is deployable there now (or forced there and
    accepted); 409 with the reasons otherwise."""
    result = registry.gate(model, target, sha256, accept_forced=accept_forced)
    return json_response(result, 200 if result.passed else 409)


@router.get(f"{API}/matrix", response_model=MatrixOutput, responses=errors, tags=["read"])
def matrix(
    registry: RegistryDep,
    _: Reader,
    q: ContainsQuery | None = None,
    offset: Annotated[int, Query(ge=0, le=10_000_000)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> Response:
    """What runs where as a models × targets matrix, a page of models at a time (``q``:
    models whose id contains it)."""
    return json_response(registry.matrix(contains=q, offset=offset, limit=limit))


@router.get(f"{API}/records", response_model=ListOutput, responses=errors, tags=["read"])
def records(
    registry: RegistryDep,
    _: Reader,
    model: ModelQuery | None = None,
    state: State = None,
    deployable_on: TargetQuery | None = None,
) -> Response:
    """Records, oldest first (filters: model, state, deployable on a target)."""
    return json_response(registry.records(model, deployable_on=deployable_on, state=state))


@router.post(
    f"{API}/records",
    response_model=AddOutput,
    status_code=201,
    responses=errors,
    tags=["write"],
)
def add_manifest(registry: RegistryDep, who: Adder, body: AddManifestInput) -> Response:
    """Record a manifest produced by ``modelreg inspect --json`` (201 when new, 200 when
    the registry already had it). Role: verifier or releaser."""
    manifest = cast(dict[str, Any], body.manifest)  # not validated yet: the JSON as sent
    added = registry.add_manifest(
        manifest, record_id=body.record_id, locations=body.locations, actor=who.actor
    )
    return json_response(added, 201 if added.created else 200)


@router.get(
    f"{API}/records/{{record_id}}", response_model=ShowOutput, responses=errors, tags=["read"]
)
def show(registry: RegistryDep, _: Reader, record_id: RecordId) -> Response:
    """One record: manifest, state, production, deployability, runs with evidence."""
    return json_response(registry.show(record_ref(record_id)))


@router.get(
    f"{API}/records/{{record_id}}/locations",
    response_model=LocationsOutput,
    responses=errors,
    tags=["read"],
)
def locations(registry: RegistryDep, _: Reader, record_id: RecordId) -> Response:
    """Where the record's bytes can be fetched."""
    return json_response(registry.locations(record_ref(record_id)))


@router.post(
    f"{API}/records/{{record_id}}/locations",
    response_model=LocationsOutput,
    responses=errors,
    tags=["write"],
)
def add_locations(
    registry: RegistryDep, who: Adder, record_id: RecordId, body: LocationsInput
) -> Response:
    """Add locations (no credentials in URLs). Role: verifier or releaser. The service
    records them unread: it makes no remote call on a request thread, so a location becomes
    fetchable when a host that reads it records a check of it (a locate that checks it, or a
    fetch)."""
    return json_response(
        registry.locate(record_ref(record_id), body.urls, check_added=False, actor=who.actor)
    )


@router.get(
    f"{API}/records/{{record_id}}/imported-runs",
    response_model=ImportedRunsOutput,
    responses=errors,
    tags=["read"],
)
def imported_runs(registry: RegistryDep, _: Reader, record_id: RecordId) -> Response:
    """The record's runs produced elsewhere (imported or uploaded), with whether each is
    the run deciding deployability on its target now."""
    return json_response(registry.imported_runs(record_ref(record_id)))


@router.post(
    f"{API}/records/{{record_id}}/runs",
    response_model=UploadRunOutput,
    status_code=201,
    responses=errors,
    tags=["write"],
)
def upload_run(
    registry: RegistryDep, who: Verifier, record_id: RecordId, body: RunUpload
) -> Response:
    """Upload a verification run. An unsigned run is history only; a run whose signed
    envelope verifies with a key the target trusts counts like a local one. Role:
    verifier."""
    uploaded = registry.upload_run(
        record_ref(record_id),
        body.target,
        body.checks,
        host=body.host,
        fingerprint=body.fingerprint,
        envelope=body.envelope,
        actor=who.actor,
    )
    return json_response(uploaded, 201)


@router.post(
    f"{API}/records/{{record_id}}/promote",
    response_model=PromoteOutput,
    responses=errors,
    tags=["write"],
)
def promote(
    registry: RegistryDep, who: Releaser, record_id: RecordId, body: PromoteInput
) -> Response:
    """Make the record production on the target (409 unless deployable there now).
    Role: releaser."""
    return json_response(
        registry.promote(
            record_ref(record_id),
            body.target,
            why=body.why,
            actor=who.actor,
            owner=body.owner,
            limitations=body.limitations,
            retest_by=body.retest_by,
            accept_relaxed_gate=body.accept_relaxed_gate,
            label=body.label,
        )
    )


@router.post(
    f"{API}/records/{{record_id}}/hold",
    response_model=StateChangeOutput,
    responses=errors,
    tags=["write"],
)
def hold(registry: RegistryDep, who: Releaser, record_id: RecordId, body: ReasonInput) -> Response:
    """Put the record on hold. Role: releaser."""
    return json_response(registry.hold(record_ref(record_id), body.why, actor=who.actor))


@router.post(
    f"{API}/records/{{record_id}}/release",
    response_model=StateChangeOutput,
    responses=errors,
    tags=["write"],
)
def release(
    registry: RegistryDep, who: Releaser, record_id: RecordId, body: ReasonInput
) -> Response:
    """Release a held record, saying why. Role: releaser."""
    return json_response(registry.release(record_ref(record_id), body.why, actor=who.actor))


@router.post(
    f"{API}/records/{{record_id}}/retire",
    response_model=StateChangeOutput,
    responses=errors,
    tags=["write"],
)
def retire(
    registry: RegistryDep, who: Releaser, record_id: RecordId, body: ReasonInput
) -> Response:
    """Retire the record. Role: releaser."""
    return json_response(registry.retire(record_ref(record_id), body.why, actor=who.actor))


@router.get(f"{API}/history", response_model=HistoryOutput, responses=errors, tags=["read"])
def history(
    registry: RegistryDep,
    _: Reader,
    model: ModelQuery,
    limit: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    since: SinceQuery | None = None,
    target: TargetQuery | None = None,
) -> Response:
    """Adds, verifications, promotions, rollbacks, holds of a model, in commit order
    (``limit``: the newest N; ``since``: an RFC 3339 date or date-time, or an age as 12h or 7d;
    ``target``: only events on it and those of no target)."""
    return json_response(registry.history(model, limit=limit, since=since, target=target))


@router.get(f"{API}/search", response_model=SearchOutput, responses=errors, tags=["read"])
def search(
    registry: RegistryDep,
    _: Reader,
    q: SearchQuery,
    limit: Annotated[int, Query(ge=1, le=SEARCH_MAX)] = 50,
) -> Response:
    """Records whose id starts with ``q``, or holding a file whose sha256 is or starts
    with ``q`` (8 hex digits or more); newest first."""
    return json_response(registry.search(q, limit=limit))


@router.get(f"{API}/trend", response_model=TrendOutput, responses=errors, tags=["read"])
def trend(
    registry: RegistryDep,
    _: Reader,
    model: ModelQuery | None = None,
    record: RecordQuery | None = None,
) -> Response:
    """A record's (``record``) or a model's (``model``) local runs, oldest first, with
    decode tokens/s, median time to first token and peak RSS."""
    return json_response(
        registry.trend(model=model, record=record_or_handle(registry, record) if record else None)
    )


@router.get(f"{API}/diff", response_model=DiffOutput, responses=errors, tags=["read"])
def diff(registry: RegistryDep, _: Reader, a: RecordQuery, b: RecordQuery) -> Response:
    """What changed from record A to record B."""
    first, second = record_or_handle(registry, a), record_or_handle(registry, b)
    return json_response(registry.diff(first, second))


@router.get(f"{API}/fit", response_model=FitOutput, responses=errors, tags=["read"])
def fit(
    registry: RegistryDep,
    _: Reader,
    record: RecordQuery,
    target: TargetQuery,
    context: ContextQuery | None = None,
    concurrency: ConcurrencyQuery = 1,
    kv_dtype: Annotated[KVType, Query()] = "f16",
    overhead: Annotated[float, Query(ge=0, lt=10, allow_inf_nan=False)] = 0.10,
    headroom: Annotated[float, Query(ge=0, lt=1, allow_inf_nan=False)] = 0.10,
    bits: BitsQuery | None = None,
    quant: QuantQuery | None = None,
) -> Response:
    """Weights + KV cache + overhead against the target's memory; ``bits`` or ``quant``
    weigh the weights at another width (a what-if, said so in the answer)."""
    return json_response(
        registry.fit(
            record_or_handle(registry, record),
            target,
            context=context,
            concurrency=concurrency,
            kv_dtype=kv_dtype,
            overhead=overhead,
            headroom=headroom,
            bits=bits,
            quant=quant,
        )
    )


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    """Prometheus' text exposition (``modelreg.server.metrics``): a reader's token, or
    anyone with ``--public-metrics`` (or ``--public-read``)."""
    from modelreg.server.metrics import CONTENT_TYPE

    if request.app.state.metrics is None:
        raise StarletteHTTPException(404)
    settings = request.app.state.settings
    if not settings.public_metrics:
        secret = bearer_secret(request.headers.get("authorization"))
        authorize(
            request.app.state.registry, secret, Permission.READ, public_read=settings.public_read
        )
    return Response(request.app.state.metrics.exposition(), media_type=CONTENT_TYPE)


@router.get(f"{API}/webhooks", response_model=WebhooksOutput, responses=errors, tags=["admin"])
def webhooks(registry: RegistryDep, _: Releaser, removed: bool = False) -> Response:
    """Every webhook (never a secret) with its deliveries by status. Role: releaser."""
    return json_response(registry.webhooks(include_removed=removed))


@router.post(
    f"{API}/webhooks",
    response_model=WebhookCreateOutput,
    status_code=201,
    responses=errors,
    tags=["admin"],
)
def add_webhook(registry: RegistryDep, who: Releaser, body: WebhookInput) -> Response:
    """Send events to a URL, each delivery signed with the secret in this answer (shown
    once). Role: releaser."""
    created = registry.add_webhook(body.url, body.events, secret=body.secret, actor=who.actor)
    return json_response(created, status=201)


@router.delete(
    f"{API}/webhooks/{{webhook_id}}",
    response_model=WebhookRemoveOutput,
    responses=errors,
    tags=["admin"],
)
def remove_webhook(
    registry: RegistryDep,
    who: Releaser,
    webhook_id: WebhookId,
    why: ReasonQuery | None = None,
) -> Response:
    """Stop sending to a webhook; its pending deliveries are cancelled. Role: releaser."""
    return json_response(registry.remove_webhook(webhook_id, why=why, actor=who.actor))


@router.get(f"{API}/targets", response_model=TargetsOutput, responses=errors, tags=["read"])
def targets(registry: RegistryDep, _: Reader) -> Response:
    """Every target, with where it is defined (builtin, registry; local: the server's
    own targets file)."""
    return json_response(registry.targets())


@router.get(f"{API}/rollback-plan", response_model=RollbackOutput, responses=errors, tags=["read"])
def rollback_plan(
    registry: RegistryDep,
    _: Reader,
    model: ModelQuery,
    target: TargetQuery,
    to: RecordQuery | None = None,
) -> Response:
    """The production record and the rollback candidate, with their locations (409 when
    there is no candidate); ``to``: the plan for rolling back to that record."""
    plan = registry.rollback_plan(
        model, target, to=record_or_handle(registry, to) if to is not None else None
    )
    if plan.decision == "no_candidate":
        raise NoRollbackCandidate.of_plan(plan)
    return json_response(plan)


@router.post(f"{API}/rollback", response_model=RollbackOutput, responses=errors, tags=["write"])
def rollback(registry: RegistryDep, who: Releaser, body: RollbackInput) -> Response:
    """Apply the rollback plan (a second call changes nothing). Role: releaser."""
    return json_response(
        registry.rollback(
            body.model,
            body.target,
            why=body.why,
            to=record_or_handle(registry, body.to) if body.to is not None else None,
            force=body.force,
            actor=who.actor,
        )
    )
