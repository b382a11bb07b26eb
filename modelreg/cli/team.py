"""Team commands: serve, token, targets (list, add, remove), locate, fetch, push, webhooks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from modelreg.cli.app import JsonOption, RecordArg, WhyOption, app, registry
from modelreg.cli.records import unit_text
from modelreg.cli.render import emit, human_bytes, out, say, table
from modelreg.cli.suites import DryRunOption, say_production_affected
from modelreg.progress import ProgressMode

# -- serve ----------------------------------------------------------------------------------


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8765,
    public_read: Annotated[
        bool,
        typer.Option("--public-read", help="Let anyone read (API and dashboard) without a token."),
    ] = False,
    public_metrics: Annotated[
        bool,
        typer.Option(
            "--public-metrics",
            help="Let anyone read GET /metrics (Prometheus) without a token; else a reader's.",
        ),
    ] = False,
    metrics: Annotated[
        bool,
        typer.Option(
            "--metrics/--no-metrics",
            help="Count and time every request and serve GET /metrics (Prometheus).",
        ),
    ] = True,
    max_body_bytes: Annotated[
        int,
        typer.Option("--max-body-bytes", min=1024, help="Larger request bodies get 413."),
    ] = 16 << 20,
    workers: Annotated[int, typer.Option("--workers", min=1, max=64, help="Server processes.")] = 1,
    threads: Annotated[
        int,
        typer.Option("--threads", min=1, max=256, help="Requests handled at once, per process."),
    ] = 8,
    access_log: Annotated[
        bool, typer.Option("--access-log", help="Log every request to stderr.")
    ] = False,
    webhooks: Annotated[
        bool,
        typer.Option(
            "--webhooks/--no-webhooks",
            help="Send the webhooks' deliveries from this server (every 2 s).",
        ),
    ] = True,
) -> int:
    """Serve the registry over HTTP: the JSON API under /api/v1 (OpenAPI at
    /api/v1/openapi.json), the deploy gate, and the dashboard at /. Writes need a token
    (modelreg token create NAME --role ROLE); reads too, unless --public-read."""
    from modelreg.server.app import run
    from modelreg.server.http import ServerSettings

    db = ctx.obj.get("db") if ctx.obj else None
    settings = ServerSettings(
        url=db,
        public_read=public_read,
        public_metrics=public_metrics,
        metrics=metrics,
        max_body_bytes=max_body_bytes,
        threads=threads,
        webhooks=webhooks,
    )
    run(settings, host, port, announce=say, access_log=access_log, workers=workers)
    return 0


# -- tokens ---------------------------------------------------------------------------------

token_app = typer.Typer(help="Bearer tokens of modelreg serve.", no_args_is_help=True)
app.add_typer(token_app, name="token")


@token_app.command("create")
def token_create(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Who or what uses it; the actor of its events.")],
    role: Annotated[
        str,
        typer.Option(
            "--role",
            help="reader (reads), verifier (reads, add manifests, upload runs) or releaser "
            "(reads, add manifests, promote, rollback, hold, release, retire).",
        ),
    ],
    json_out: JsonOption = False,
) -> int:
    """Create a token; its secret is printed once (stdout) and only its sha256 is kept."""
    created = registry(ctx).create_token(name, role)
    if json_out:
        emit(created)
        return 0
    out(created.secret)
    say(
        f"token {created.token.name!r} ({created.token.role}) created. The secret above is "
        "shown only now; send it as: Authorization: Bearer <secret>"
    )
    return 0


@token_app.command("list")
def token_list(ctx: typer.Context, json_out: JsonOption = False) -> int:
    """Every token (never a secret), revoked ones included."""
    listed = registry(ctx).tokens()
    if json_out:
        emit(listed)
        return 0
    if not listed.tokens:
        say("no tokens — create one with: modelreg token create NAME --role reader")
        return 0
    rows = [
        (
            t.name,
            t.role,
            f"{t.created_at:%Y-%m-%d %H:%M}",
            t.created_by,
            f"revoked {t.revoked_at:%Y-%m-%d %H:%M} by {t.revoked_by}" if t.revoked_at else "",
        )
        for t in listed.tokens
    ]
    print(table(rows, ["name", "role", "created (UTC)", "by", "revoked (UTC)"]))
    return 0


@token_app.command("revoke")
def token_revoke(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The token's name.")],
    json_out: JsonOption = False,
) -> int:
    """Revoke a token: the server refuses it from its next request."""
    revoked = registry(ctx).revoke_token(name)
    if json_out:
        emit(revoked)
    elif revoked.changed:
        say(f"token {name!r} revoked")
    else:
        say(f"token {name!r} was already revoked; nothing changed")
    return 0


# -- targets --------------------------------------------------------------------------------

targets_app = typer.Typer(
    help="Targets: built in, and defined in the registry (targets apply FILE) — the same for "
    "every host using it. Without a subcommand: list them."
)
app.add_typer(targets_app, name="targets")


@targets_app.callback(invoke_without_command=True)
def targets_list(ctx: typer.Context, json_out: JsonOption = False) -> int | None:
    """List the targets with where each is defined (builtin, registry) and whether this host
    is one of their hosts."""
    if ctx.invoked_subcommand is not None:
        return None
    listed = registry(ctx).targets()
    if json_out:
        emit(listed)
        return 0
    rows = [
        (
            t.name,
            t.kind,
            human_bytes(t.memory_bytes),
            t.neuron_cores or "",
            "yes" if t.is_local else "",
            t.origin,
            t.description,
        )
        for t in listed.targets
    ]
    print(table(rows, ["target", "kind", "memory", "cores", "here", "defined in", "description"]))
    for t in listed.targets:
        if t.unit:
            out(f"{t.name}  unit: {unit_text(t.unit)}")
    from modelreg import config
    from modelreg.api.offline import unapplied_targets

    unapplied = unapplied_targets(listed)
    if unapplied:
        say(
            f"{config.targets_file()} defines {', '.join(unapplied)} otherwise than the "
            "registry (no verdict reads the file): apply it with: modelreg targets apply"
        )
    return 0


def _apply(ctx: typer.Context, file: Path | None, dry_run: bool, json_out: bool) -> int:
    from modelreg import config

    changed = registry(ctx).define_targets(file or config.targets_file(), dry_run=dry_run)
    if json_out:
        emit(changed)
    else:
        say(changed.message)
        say_production_affected(changed.production_affected, changed.dry_run)
    return 0


TargetsFileArgument = Annotated[
    Path | None,
    typer.Argument(
        help="A YAML file in the targets.yaml format (default: $MODELREG_TARGETS, else "
        "$MODELREG_HOME/targets.yaml).",
        show_default=False,
    ),
]


@targets_app.command("apply")
def targets_apply(
    ctx: typer.Context,
    file: TargetsFileArgument = None,
    dry_run: DryRunOption = False,
    json_out: JsonOption = False,
) -> int:
    """Write the file's targets to the registry, with the trusted keys and suite files they
    name (a definition of the same name is replaced; each change is an event, and evidence
    judged under the old definition is stale from then on). A targets file counts only once
    applied: no verdict reads it. Says which production entries the change (a definition, a
    trusted key, a suite) makes stale or failing, and the command that re-verifies each;
    --dry-run shows the same and writes nothing."""
    return _apply(ctx, file, dry_run, json_out)


@targets_app.command("add", hidden=True)
def targets_add(
    ctx: typer.Context,
    file: TargetsFileArgument = None,
    dry_run: DryRunOption = False,
    json_out: JsonOption = False,
) -> int:
    """The same as ``targets apply`` (its former name)."""
    return _apply(ctx, file, dry_run, json_out)


@targets_app.command("remove")
def targets_remove(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="A target defined in the registry.")],
    why: WhyOption = None,
    dry_run: DryRunOption = False,
    json_out: JsonOption = False,
) -> int:
    """Remove a shared target (its evidence is kept; it no longer counts). Says which
    production entries it takes out; --dry-run shows the same and writes nothing."""
    changed = registry(ctx).remove_target(name, why=why, dry_run=dry_run)
    if json_out:
        emit(changed)
    else:
        say(changed.message)
        say_production_affected(changed.production_affected, changed.dry_run)
    return 0


# -- locations ------------------------------------------------------------------------------


@app.command()
def locate(
    ctx: typer.Context,
    record_ref: RecordArg,
    add: Annotated[
        list[str] | None,
        typer.Option(
            "--add",
            help="A URL the bytes can be fetched from (repeatable): file://HOST/path, "
            "hf://org/name@COMMIT, s3://bucket/prefix, oci://registry/repo@sha256:…. Checked "
            "at once when this host can read it (--no-check: not).",
        ),
    ] = None,
    check: Annotated[
        list[str] | None,
        typer.Option(
            "--check",
            help="Read every file at this location and compare each sha256 (repeatable; "
            "'all': every location of RECORD). What makes a location fetchable for every "
            "reader of the registry.",
        ),
    ] = None,
    no_check: Annotated[
        bool, typer.Option("--no-check", help="Add without reading the bytes there.")
    ] = False,
    json_out: JsonOption = False,
) -> int:
    """Where RECORD's bytes are, each location with its newest recorded check; --add records
    another location, --check reads one again."""
    checks: list[str] | bool = False
    if check:
        checks = True if "all" in check else list(check)
    found = registry(ctx).locate(record_ref, add or [], check=checks, check_added=not no_check)
    if json_out:
        emit(found)
        return 0
    for url in found.added:
        say(f"added {url}")
    if add and not found.added:
        say("nothing added: already known")
    for c in found.checked:
        if c.ok is None:
            say(f"not checked from this host: {c.url}: {c.detail} (nothing recorded)")
        else:
            say(f"{'verified' if c.ok else 'FOUND WANTING'}: {c.url}: {c.detail}")
    for loc in found.locations:
        if loc.checked is None:
            note = "never checked"
        else:
            last = loc.checked
            what = "verified" if last.ok else f"NOT THERE ({last.detail})"
            note = f"{what} by {last.source} on {last.host}, {last.at:%Y-%m-%d %H:%M} UTC"
        out(f"{loc.url}  {note}")
    if not found.locations:
        say(f"no locations recorded; added from {found.added_from} on its add host")
    elif found.fetch_from is None:
        say(
            f"no location is verified to hold every file: the deploy gate fails — check one "
            f"from a host that can read it: modelreg locate {found.record_id} --check URL"
        )
    return 0


@app.command()
def push(
    ctx: typer.Context,
    record_ref: RecordArg,
    url: Annotated[
        str,
        typer.Argument(
            help="oci://registry/repository:tag — the manifest's digest is recorded as the "
            "location; the tag is a convenience.",
            metavar="oci://HOST/REPO:TAG",
        ),
    ],
    json_out: JsonOption = False,
) -> int:
    """Push RECORD's files to an OCI registry as one artifact whose layers are the files (each
    layer's digest is the file's sha256) and record where: oci://HOST/REPO:TAG@sha256:….
    Credentials from Docker's config (~/.docker/config.json). Exit 1 when the registry
    cannot take it."""
    pushed = registry(ctx).push(record_ref, url)
    if json_out:
        emit(pushed)
        return 0
    for f in pushed.files:
        say(f"{'uploaded' if f.uploaded else 'had    '} {f.path}  sha256:{f.sha256}")
    out(pushed.location)
    return 0


@app.command()
def fetch(
    ctx: typer.Context,
    record_ref: RecordArg,
    to: Annotated[Path, typer.Option("--to", help="A new (or empty) directory to fill.")],
    progress: Annotated[
        ProgressMode,
        typer.Option(
            "--progress",
            help="Progress on stderr, never stdout: auto (a bar when stderr is a terminal), "
            "json (JSON lines: start, progress, done or failed), none.",
        ),
    ] = ProgressMode.AUTO,
    json_out: JsonOption = False,
) -> int:
    """Copy RECORD's files into DIR from its locations (file:// on this host, the local
    Hugging Face cache, s3:// with the standard AWS credentials, oci:// by digest), checking
    every sha256 as the bytes arrive; a mismatch is refused and nothing is left in DIR unless
    every file matched. An S3 download cut short is resumed by the same fetch again. Exit 1
    when some file could not be fetched."""
    from modelreg.cli.render import FetchProgress

    shown = FetchProgress(progress.value)
    ok = False
    try:
        fetched = registry(ctx).fetch(
            record_ref,
            to,
            progress=shown if shown.enabled else None,
            on_start=shown.start if shown.enabled else None,
        )
        ok = True
    finally:
        if shown.enabled:
            shown.finish(ok)
    if json_out:
        emit(fetched)
        return 0
    for problem in fetched.skipped:
        say(f"skipped {problem.url}: {problem.reason}")
    for f in fetched.files:
        out(f"{fetched.to}/{f.path}  sha256:{f.sha256}  from {f.source}")
    say(f"fetched {len(fetched.files)} file(s) of {fetched.record_id} into {fetched.to}")
    return 0


# -- webhooks -------------------------------------------------------------------------------

webhooks_app = typer.Typer(
    help="Webhooks: signed POSTs to a URL when production changes (see README: Webhooks).",
    no_args_is_help=True,
)
app.add_typer(webhooks_app, name="webhooks")


@webhooks_app.command("add")
def webhooks_add(
    ctx: typer.Context,
    url: Annotated[str, typer.Argument(help="Where to POST deliveries (http:// or https://).")],
    events: Annotated[
        str,
        typer.Option(
            "--events",
            help="Comma-separated event kinds: add, verify, upload-run, promote, rollback, "
            "hold, release, retire.",
        ),
    ] = "promote,rollback,hold,release,retire,verify",
    json_out: JsonOption = False,
) -> int:
    """Send events to URL from now on. Each delivery is signed with a new secret, printed
    once (stdout): give it to the receiver, which checks X-Modelreg-Signature."""
    created = registry(ctx).add_webhook(url, [events])
    if json_out:
        emit(created)
        return 0
    out(created.secret)
    hook = created.webhook
    say(
        f"webhook {hook.id} added: {', '.join(hook.events)} → {hook.url}. The secret above "
        "signs every delivery and is shown only now. Deliveries are sent by `modelreg serve` "
        "or `modelreg webhooks deliver --watch`."
    )
    return 0


@webhooks_app.command("list")
def webhooks_list(
    ctx: typer.Context,
    removed: Annotated[bool, typer.Option("--removed", help="Removed webhooks too.")] = False,
    json_out: JsonOption = False,
) -> int:
    """Every webhook (never its secret), its deliveries by status and the newest attempt."""
    listed = registry(ctx).webhooks(include_removed=removed)
    if json_out:
        emit(listed)
        return 0
    if not listed.webhooks:
        say("no webhooks — add one with: modelreg webhooks add URL --events promote,rollback")
        return 0
    rows = []
    for h in listed.webhooks:
        counts = ", ".join(f"{n} {status}" for status, n in h.deliveries.items()) or "none yet"
        last = h.last_delivery
        newest = ""
        if last is not None:
            answer = f"HTTP {last.http_status}" if last.http_status else "no answer"
            newest = f"{last.event} {last.status} ({answer}, attempt {last.attempts})"
            if last.error and last.status != "delivered":
                newest += f": {last.error}"
        state = f"removed {h.removed_at:%Y-%m-%d}" if h.removed_at else "live"
        rows.append((h.id, h.url, ",".join(h.events), state, counts, newest))
    print(table(rows, ["id", "url", "events", "state", "deliveries", "last"]))
    return 0


@webhooks_app.command("remove")
def webhooks_remove(
    ctx: typer.Context,
    webhook_id: Annotated[int, typer.Argument(metavar="ID", help="The webhook's id.", min=1)],
    why: WhyOption = None,
    json_out: JsonOption = False,
) -> int:
    """Stop sending to a webhook; its pending deliveries are cancelled."""
    removed = registry(ctx).remove_webhook(webhook_id, why=why)
    if json_out:
        emit(removed)
    elif removed.changed:
        say(f"webhook {webhook_id} removed; {removed.cancelled} pending delivery(ies) cancelled")
    else:
        say(f"webhook {webhook_id} was already removed; nothing changed")
    return 0


@webhooks_app.command("permit")
def webhooks_permit(
    ctx: typer.Context,
    hosts: Annotated[
        list[str] | None,
        typer.Argument(metavar="[HOST]...", help="Hosts as webhook URLs name them."),
    ] = None,
    remove: Annotated[
        list[str] | None,
        typer.Option("--remove", metavar="HOST", help="Take a host off the list (repeatable)."),
    ] = None,
    why: WhyOption = None,
    json_out: JsonOption = False,
) -> int:
    """Allow webhooks to hosts that are, or resolve to, loopback, link-local or private
    addresses (refused otherwise: a webhook must not reach into the network its sender runs
    in unless someone allowed that host by name). No HOST: print the list."""
    allowed = registry(ctx).allow_webhook_hosts(hosts or [], remove=remove or [], why=why)
    if json_out:
        emit(allowed)
        return 0
    for host in allowed.allowed_hosts:
        out(host)
    if not allowed.allowed_hosts:
        say("no host permitted on non-public addresses — add one: modelreg webhooks permit HOST")
    return 0


@webhooks_app.command("deliver")
def webhooks_deliver(
    ctx: typer.Context,
    watch: Annotated[
        bool, typer.Option("--watch", help="Keep delivering until interrupted.")
    ] = False,
    interval: Annotated[
        float,
        typer.Option("--interval", min=0.1, max=3600, help="Seconds between passes (--watch)."),
    ] = 2.0,
    timeout: Annotated[
        float,
        typer.Option("--timeout", min=0.1, max=300, help="Seconds per POST, all told."),
    ] = 10.0,
    json_out: JsonOption = False,
) -> int:
    """Send what the outbox has due: each delivery POSTed once per pass, retried with
    backoff (5 s, 10 s, 20 s …) and given up after 8 attempts. `modelreg serve` does this by
    itself; this is for a registry without a server (SQLite, a cron job). Exit 1 when a
    delivery was given up in this pass."""
    import time

    reg = registry(ctx)
    failed = 0
    while True:
        passed = reg.deliver_webhooks(timeout_s=timeout)
        failed += passed.failed
        if json_out:
            emit(passed)
        else:
            for a in passed.attempts:
                said = a.error or f"HTTP {a.http_status}"
                again = f", again in {a.retry_in_s:g} s" if a.retry_in_s is not None else ""
                say(f"webhook {a.webhook_id} {a.event} #{a.event_id}: {a.status} ({said}){again}")
            if not watch:
                say(
                    f"{passed.delivered} delivered, {passed.retrying} to retry, "
                    f"{passed.failed} given up; {passed.pending} pending"
                )
            if passed.unsigned:
                say(f"{passed.unsigned} left pending: {passed.unsigned_reason}")
        if not watch:
            break
        try:
            time.sleep(interval)
        except KeyboardInterrupt:
            break
    return 1 if failed else 0
