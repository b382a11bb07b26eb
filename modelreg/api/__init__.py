"""The public Python API: what the CLI and the HTTP server call, and what a notebook imports.

    import modelreg

    registry = modelreg.open()               # $MODELREG_DATABASE_URL, else the local SQLite
    added = registry.add(["model.gguf"], model_id="org/name", source="pypi://pkg==1.0")
    report = registry.verify(added.record.record_id, "cpu")
    if report.deployability.deployable:
        registry.promote(added.record.record_id, "cpu", why="release 1")
    print(registry.status("org/name").entries)

Every decision goes through the rules module (``modelreg.rules``) with the target's current
runtime fingerprint, and every decision that writes (promote, rollback, hold, release, retire,
verify) re-checks state and deployability inside one transaction that holds the model's lock:
nothing public can skip a gate. Reporting methods return the pydantic output models of
``modelreg.schemas.output`` — the same objects ``--json`` prints and the HTTP API serves.

The package is split by concern, one part per module — ``records``, ``locations``,
``verify``, ``suites``, ``uploads``, ``deploy``, ``rollback`` (and its ``drill``), ``status``,
``browse``, ``team``, ``fleet`` — each over ``core.Core`` (the store and the look-ups every
part shares), taking the parts it needs as explicit collaborators; ``views`` holds every
conversion from the domain to the output contract and ``offline`` what needs no registry.
``Registry`` holds the parts and delegates to them (``delegate.Delegate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from modelreg import config
from modelreg.api.browse import Browse
from modelreg.api.core import Core
from modelreg.api.delegate import Delegate
from modelreg.api.deploy import Deploy
from modelreg.api.drill import Drill
from modelreg.api.fleet import Fleet
from modelreg.api.locations import Locations
from modelreg.api.offline import (
    check_suite,
    diff,
    fit,
    inspect,
    signed_run_problem_for,
    targets,
    validate_card_file,
)
from modelreg.api.records import Records
from modelreg.api.rollback import Rollback
from modelreg.api.status import Status
from modelreg.api.suites import Suites
from modelreg.api.team import Team
from modelreg.api.uploads import Uploads
from modelreg.api.verify import Verify
from modelreg.errors import InvalidInput, ModelregError
from modelreg.judging import load_suite_ref, suite_label
from modelreg.validators.base import VerifyOptions

if TYPE_CHECKING:
    from modelreg.registry.store import Store

__all__ = [
    "Registry",
    "VerifyOptions",
    "check_suite",
    "database_unavailable",
    "diff",
    "fit",
    "inspect",
    "load_suite_ref",
    "open",
    "redact",
    "signed_run_problem_for",
    "suite_label",
    "targets",
    "upgrade",
    "validate_card_file",
]


def open(url: str | None = None) -> Registry:
    """Open the registry at ``url`` (a SQLAlchemy URL), else ``$MODELREG_DATABASE_URL``, else
    the SQLite file under ``$MODELREG_HOME``.

    SQLite is created or upgraded on first use; a PostgreSQL registry is created when empty and
    must be upgraded on purpose (``Registry.upgrade`` / ``modelreg db upgrade``) when older.
    Verdicts stored under older rules are derived again, once, by the first process of this
    modelreg that opens the registry. Raises ``RegistryUnavailable`` (exit 4) when the server
    cannot be reached.
    """
    from sqlalchemy.exc import DBAPIError

    from modelreg.registry.db import create_registry_engine, prepare
    from modelreg.registry.store import Store

    resolved = config.database_url(url)
    engine = create_registry_engine(resolved)
    try:
        prepare(engine, resolved)
        store = Store(engine)
        store.ensure_verdicts()
    except DBAPIError as exc:
        raise _database_error(exc, resolved) from None
    return Registry(store, resolved)


def upgrade(url: str | None = None) -> tuple[str | None, str]:
    """Bring the registry's schema to this modelreg's (under the schema lock); returns the
    revisions before and after."""
    from sqlalchemy.exc import DBAPIError

    from modelreg.registry.db import create_registry_engine, current_revision, migrate
    from modelreg.registry.db_head import SCHEMA_HEAD

    resolved = config.database_url(url)
    engine = create_registry_engine(resolved)
    try:
        before = current_revision(engine)
        migrate(engine)
        from modelreg.registry.store import Store

        Store(engine).ensure_verdicts()
    except DBAPIError as exc:
        raise _database_error(exc, resolved) from None
    return before, SCHEMA_HEAD


def _database_error(exc: Any, url: str) -> Exception:
    from modelreg.registry.db import redact, unavailable

    found = unavailable(exc, url)
    if found is not None:
        return found
    from modelreg.urls import redact_text

    reason = redact_text(str(exc.orig or exc).strip().splitlines()[0])
    return InvalidInput(
        f"cannot open the registry at {redact(url)}: {reason}",
        "check --db or MODELREG_DATABASE_URL",
    )


class Registry:
    """The registry, as a library: every operation the CLI and the HTTP server offer. Each
    concern is a part of this package, holding the store; the registry holds the parts, wires
    the few that need another (explicit collaborators, named in each part's constructor) and
    delegates each public method to the part that defines it.

    ``with modelreg.open() as registry:`` closes its database connections at the end
    (``close()``: the same, by hand)."""

    def __init__(self, store: Store, url: str) -> None:
        self.store = store
        self.url = url
        self._core = Core(store, url)
        self._status = Status(store, url)
        self._locations = Locations(store, url)
        self._verify = Verify(store, url, locations=self._locations)
        self._suites = Suites(store, url)
        self._uploads = Uploads(store, url)
        self._drill = Drill(store, url, verify=self._verify)
        self._rollback = Rollback(store, url, drill=self._drill)
        self._deploy = Deploy(store, url, rollback=self._rollback)
        self._records = Records(store, url, deploy=self._deploy, locations=self._locations)
        self._browse = Browse(store, url)
        self._team = Team(store, url)
        self._fleet = Fleet(store, url, status=self._status, locations=self._locations)

    # -- look-ups every part shares (core) ---------------------------------------------------
    target = Delegate("_core", Core.target)
    targets = Delegate("_core", Core.targets)
    get = Delegate("_core", Core.get)
    record_counts = Delegate("_core", Core.record_counts)
    models = Delegate("_core", Core.models)
    inspect = Delegate("_core", Core.inspect)
    all_targets = Delegate("_core", Core.all_targets)
    targets_with = Delegate("_core", Core.targets_with)

    # -- records ------------------------------------------------------------------------------
    add = Delegate("_records", Records.add)
    add_manifest = Delegate("_records", Records.add_manifest)
    show = Delegate("_records", Records.show)
    records = Delegate("_records", Records.records)
    history = Delegate("_records", Records.history)
    manifest_of = Delegate("_records", Records.manifest_of)
    diff = Delegate("_records", Records.diff)
    fit = Delegate("_records", Records.fit)
    verified_on = Delegate("_records", Records.verified_on)
    card_render = Delegate("_records", Records.card_render)
    card_validate = Delegate("_records", Records.card_validate)
    attest = Delegate("_records", Records.attest)
    cyclonedx = Delegate("_records", Records.cyclonedx)
    export = Delegate("_records", Records.export)
    import_ = Delegate("_records", Records.import_)
    db_check = Delegate("_records", Records.db_check)

    # -- where the bytes are --------------------------------------------------------------
    locations = Delegate("_locations", Locations.locations)
    locate = Delegate("_locations", Locations.locate)
    push = Delegate("_locations", Locations.push)
    fetch = Delegate("_locations", Locations.fetch)

    # -- verify, suites, runs from elsewhere --------------------------------------------------
    verify = Delegate("_verify", Verify.verify)
    stale = Delegate("_verify", Verify.stale)
    verify_stale = Delegate("_verify", Verify.verify_stale)
    attach_suite = Delegate("_suites", Suites.attach_suite)
    detach_suite = Delegate("_suites", Suites.detach_suite)
    suite_add_case = Delegate("_suites", Suites.suite_add_case)
    upload_run = Delegate("_uploads", Uploads.upload_run)
    imported_runs = Delegate("_uploads", Uploads.imported_runs)

    # -- deploy decisions ---------------------------------------------------------------------
    promote = Delegate("_deploy", Deploy.promote)
    hold = Delegate("_deploy", Deploy.hold)
    release = Delegate("_deploy", Deploy.release)
    retire = Delegate("_deploy", Deploy.retire)
    rollback_plan = Delegate("_rollback", Rollback.rollback_plan)
    drill_rollback = Delegate("_rollback", Rollback.drill_rollback)
    rollback = Delegate("_rollback", Rollback.rollback)

    # -- what runs where ----------------------------------------------------------------------
    deployability = Delegate("_status", Status.deployability)
    status = Delegate("_status", Status.status)
    only_production_target = Delegate("_status", Status.only_production_target)
    status_json = Delegate("_status", Status.status_json)
    matrix = Delegate("_status", Status.matrix)
    gate = Delegate("_status", Status.gate)
    gated_status = Delegate("_status", Status.gated_status)
    search = Delegate("_browse", Browse.search)
    browse = Delegate("_browse", Browse.browse)
    trend = Delegate("_browse", Browse.trend)

    # -- the fleet ----------------------------------------------------------------------------
    host_report = Delegate("_fleet", Fleet.host_report)
    deploy = Delegate("_fleet", Fleet.deploy)

    # -- the team service ---------------------------------------------------------------------
    define_targets = Delegate("_team", Team.define_targets)
    remove_target = Delegate("_team", Team.remove_target)
    create_token = Delegate("_team", Team.create_token)
    tokens = Delegate("_team", Team.tokens)
    revoke_token = Delegate("_team", Team.revoke_token)
    authenticate = Delegate("_team", Team.authenticate)
    add_webhook = Delegate("_team", Team.add_webhook)
    allow_webhook_hosts = Delegate("_team", Team.allow_webhook_hosts)
    webhooks = Delegate("_team", Team.webhooks)
    remove_webhook = Delegate("_team", Team.remove_webhook)
    deliver_webhooks = Delegate("_team", Team.deliver_webhooks)

    def close(self) -> None:
        """Close the registry's database connections (a later call opens new ones)."""
        self.store.engine.dispose()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def redact(url: str) -> str:
    """A database URL with its password hidden, for messages."""
    from modelreg.registry.db import redact as redact_url

    return redact_url(url)


def database_unavailable(exc: Exception, url: str) -> ModelregError | None:
    """The error to report when ``exc`` (raised mid-call) means the database cannot be
    reached (exit 4); None when it means something else."""
    from sqlalchemy.exc import DBAPIError

    from modelreg.registry.db import unavailable

    return unavailable(exc, url) if isinstance(exc, DBAPIError) else None
