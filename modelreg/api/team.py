"""The team service's shared state: target definitions, API tokens and webhooks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelreg import config
from modelreg.api.core import Core, _check_why
from modelreg.api.impact import production_changes, production_on, watch
from modelreg.api.views import _token_out, _webhook_out
from modelreg.errors import (
    InvalidInput,
    NotFound,
    TargetNotFound,
    Unauthorized,
)
from modelreg.schemas.output import (
    ProductionChangeOut,
    TargetsChangeOutput,
    TokenCreateOutput,
    TokenRevokeOutput,
    TokensOutput,
    WebhookCreateOutput,
    WebhookDeliverOutput,
    WebhookHostsOutput,
    WebhookRemoveOutput,
    WebhooksOutput,
)
from modelreg.steps import Step
from modelreg.webhooks import BACKOFF_S, DEFAULT_EVENTS, MAX_ATTEMPTS, TIMEOUT_S

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.registry.rows import StoredToken
    from modelreg.registry.writes import Writes


class Team(Core):
    """The team service's shared state: target definitions, API tokens and webhooks."""

    def define_targets(
        self, path: Path, *, actor: str | None = None, dry_run: bool = False
    ) -> TargetsChangeOutput:
        """Apply the targets of a YAML file (the targets.yaml format) to the registry: every
        reader sees the same definitions, with the trusted keys and suite files they name read
        and stored in them. A definition replaces the stored one of that name; each change is
        an event, and evidence judged under the old definition is stale from then on.

        The answer names every production entry on the changed targets the change makes
        stale or failing — a new memory size, runtime, suite or trusted key
        (``production_affected``, each with the step that re-verifies it), read from the
        verdicts before and after it in its own transaction. ``dry_run``: the same answer
        from the same transaction, rolled back — nothing written."""
        from modelreg.targets import (
            TARGET_NAME_RE,
            builtin_names,
            read_target_specs,
            spec_as_json,
        )

        if not path.is_file():
            raise InvalidInput(f"{path}: no such file", "give a targets YAML file")
        specs = read_target_specs(path)
        if not specs:
            raise InvalidInput(
                f"{path}: defines no targets", "a targets file maps each name to its definition"
            )
        for name in specs:
            if not TARGET_NAME_RE.fullmatch(name):
                raise InvalidInput(
                    f"{path}: target name {name[:120]!r} must be 1-100 letters, digits, '.', "
                    "'_' or '-'"
                )
            if name in builtin_names():
                raise InvalidInput(f"{path}: target {name!r} is built in and cannot be redefined")
        changes, affected = self._define(
            {name: spec_as_json(spec) for name, spec in specs.items()},
            actor or config.actor(),
            str(path),
            dry_run,
        )
        changed = [n for n, c in changes.items() if c != "unchanged"]
        verb = "would apply" if dry_run else "applied"
        message = (
            f"{verb} to the registry: {', '.join(f'{n} ({changes[n]})' for n in changed)}"
            if changed
            else "nothing changed: the registry already has these definitions"
        )
        return TargetsChangeOutput(
            changes=changes,
            message=message,
            targets=self.targets().targets,
            production_affected=affected,
            dry_run=dry_run,
        )

    def _define(
        self, specs: dict[str, dict[str, Any]], actor: str, origin: str, dry_run: bool
    ) -> tuple[dict[str, str], list[ProductionChangeOut]]:
        """Store the definitions in one transaction, with the production entries they change
        (started over once on a concurrent definition of the same name)."""

        def work(tx: Writes) -> tuple[dict[str, str], list[ProductionChangeOut]]:
            watched = watch(tx, production_on(tx, list(specs)))
            changes = tx.define_targets(specs, actor, origin)
            return changes, production_changes(tx, watched)

        return self.store.write_once_more_on_conflict(work, dry_run=dry_run)

    def remove_target(
        self,
        name: str,
        *,
        why: str | None = None,
        actor: str | None = None,
        dry_run: bool = False,
    ) -> TargetsChangeOutput:
        """Remove a shared target definition. Evidence gathered on it is kept; records
        production there read "target no longer defined" until it is defined again — the
        answer names them (``production_affected``). ``dry_run``: the same answer, nothing
        written."""
        from modelreg.targets import builtin_names

        _check_why(why)
        if name in builtin_names():
            raise InvalidInput(f"target {name!r} is built in and cannot be removed")
        # The stored names, not every target resolved: a definition that no longer builds
        # (a newer field, a bad path) can still be removed.
        with self.store.read() as reads:
            shared = {t.name for t in reads.target_specs()}
        with self.store.write(dry_run=dry_run) as tx:
            watched = watch(tx, production_on(tx, [name]))
            removed = tx.remove_target(name, actor or config.actor(), why)
            affected = production_changes(tx, watched)
        if not removed:
            from modelreg.api.core import _unapplied

            raise TargetNotFound(name, sorted(shared), _unapplied(name))
        production = [p.model_id for p in watched.promotions]
        message = f"{'would remove' if dry_run else 'removed'} shared target {name}"
        if production:
            message += (
                f". WARNING: production records on {name} ({', '.join(production)}) are no "
                f"longer deployable there until {name} is defined again"
            )
        return TargetsChangeOutput(
            changes={name: "removed"},
            message=message,
            targets=self.targets().targets,
            production_affected=affected,
            dry_run=dry_run,
        )

    def create_token(self, name: str, role: str, *, actor: str | None = None) -> TokenCreateOutput:
        """A new bearer token for ``modelreg serve``. The secret is in this output only; the
        registry keeps its sha256."""
        from modelreg.tokens import new_secret, parse_role, parse_token_name, secret_digest

        parse_token_name(name)
        the_role = parse_role(role)
        secret = new_secret()
        stored = self.store.create_token(
            name, the_role.value, secret_digest(secret), actor or config.actor()
        )
        return TokenCreateOutput(token=_token_out(stored), secret=secret)

    def tokens(self) -> TokensOutput:
        """Every token, revoked ones included (never their secrets)."""
        with self.store.read() as reads:
            return TokensOutput(tokens=[_token_out(t) for t in reads.tokens()])

    def revoke_token(self, name: str, *, actor: str | None = None) -> TokenRevokeOutput:
        """Revoke a token at once: the server refuses it from its next request."""
        with self.store.write() as tx:
            before = {t.name: t for t in tx.tokens()}.get(name)
            stored = tx.revoke_token(name, actor or config.actor())
        if stored is None or before is None:
            raise NotFound(f"token {name!r} not found", step=Step("tokens", "list them"))
        return TokenRevokeOutput(token=_token_out(stored), changed=before.revoked_at is None)

    def authenticate(self, secret: str) -> StoredToken:
        """The token a bearer secret belongs to; ``Unauthorized`` when it is unknown or
        revoked. One indexed read per call (the secret's digest): a revoke counts from the
        next request, in every process."""
        from modelreg.tokens import secret_digest

        with self.store.read() as reads:
            token = reads.token_of(secret_digest(secret))
        if token is None:
            raise Unauthorized(
                "unknown token", step=Step("create_token", "create one", name=None, role=None)
            )
        if token.revoked_at is not None:
            raise Unauthorized(
                f"token {token.name!r} was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC",
                step=Step("create_token", "ask for a new one", name=None, role=None),
            )
        return token

    # -- webhooks (modelreg.webhooks: the wire format; registry.hooks: the outbox) ----------

    def add_webhook(
        self,
        url: str,
        events: Sequence[str] = DEFAULT_EVENTS,
        *,
        secret: str | None = None,
        actor: str | None = None,
    ) -> WebhookCreateOutput:
        """Send ``events`` (kinds of ``modelreg.webhooks.EVENTS``) to ``url`` from now on, each
        delivery signed with ``secret`` (a new one when None; it is in this output only, and
        stored sealed with this host's webhook key: ``modelreg.sealing``). A URL whose host
        is, or resolves to, a loopback, link-local or private address is refused unless the
        host is allowed (``allow_webhook_hosts``)."""
        from modelreg import sealing
        from modelreg.registry.hooks import Webhooks
        from modelreg.registry.settings import Settings
        from modelreg.webhooks import check_url, new_secret, parse_events, parse_secret, parse_url

        the_url, kinds = parse_url(url), parse_events(events)
        the_secret = new_secret() if secret is None else parse_secret(secret)
        check_url(the_url, Settings(self.store).webhook_hosts())
        try:
            sealed = sealing.seal(the_secret, the_url, sealing.host_key(create=True))
        except (sealing.NoKey, OSError) as exc:
            raise InvalidInput(
                f"cannot seal the webhook's secret: {exc}",
                f"give this host a webhook key: ${sealing.KEY_ENV} (32 bytes, base64)",
            ) from None
        stored = Webhooks(self.store).add(the_url, kinds, sealed, actor or config.actor())
        return WebhookCreateOutput(webhook=_webhook_out(stored), secret=the_secret)

    def allow_webhook_hosts(
        self,
        hosts: Sequence[str] = (),
        *,
        remove: Sequence[str] = (),
        why: str | None = None,
        actor: str | None = None,
    ) -> WebhookHostsOutput:
        """Allow webhooks to ``hosts`` (by name, as URLs write them) although they are, or
        resolve to, loopback, link-local or private addresses; ``remove`` takes hosts off
        the list. Nothing given: the list as it is."""
        from modelreg.registry.settings import Settings
        from modelreg.webhooks import parse_host

        _check_why(why)
        added, taken = [parse_host(h) for h in hosts], {parse_host(h) for h in remove}
        settings = Settings(self.store)
        now = [h for h in dict.fromkeys([*settings.webhook_hosts(), *added]) if h not in taken]
        changed = bool(added or taken) and settings.set_webhook_hosts(
            now, actor or config.actor(), why
        )
        return WebhookHostsOutput(allowed_hosts=sorted(now), changed=changed)

    def webhooks(self, *, include_removed: bool = False) -> WebhooksOutput:
        """Every webhook (never its secret) with its deliveries by status and the newest
        attempt."""
        from modelreg.registry.hooks import Webhooks

        listed = Webhooks(self.store).listed(include_removed)
        return WebhooksOutput(webhooks=[_webhook_out(h) for h in listed])

    def remove_webhook(
        self, webhook_id: int, *, why: str | None = None, actor: str | None = None
    ) -> WebhookRemoveOutput:
        """Stop sending to a webhook; what it has pending is cancelled (its history kept)."""
        from modelreg.registry.hooks import Webhooks

        _check_why(why)
        hooks = Webhooks(self.store)
        try:
            changed, cancelled = hooks.remove(webhook_id, actor or config.actor(), why)
        except LookupError:
            raise NotFound(
                f"webhook {webhook_id} not found", step=Step("webhooks", "list them")
            ) from None
        hook = hooks.get(webhook_id)
        return WebhookRemoveOutput(webhook=_webhook_out(hook), changed=changed, cancelled=cancelled)

    def deliver_webhooks(
        self,
        *,
        timeout_s: float = TIMEOUT_S,
        backoff_s: float = BACKOFF_S,
        max_attempts: int = MAX_ATTEMPTS,
        limit: int = 50,
        wait: bool = True,
    ) -> WebhookDeliverOutput:
        """One pass over the outbox (``modelreg.webhook_sender``): every due delivery (at most
        ``limit``) is claimed and POSTed once, each webhook in its own lane so a slow one
        delays no other; an attempt has ``timeout_s`` in all. A failed attempt is due again
        after a backoff, and given up after ``max_attempts``. Senders in other processes
        share the outbox (a claimed attempt is nobody else's), and a sender that dies
        mid-attempt leaves it due once its lease ends. ``wait=False`` (a server's loop)
        returns without waiting for the lanes, which record their own outcomes."""
        from modelreg.webhook_sender import Policy, deliver_pass

        if not (0 < timeout_s <= 300 and 0 <= backoff_s <= 3600 and 1 <= max_attempts <= 100):
            raise InvalidInput(
                "webhook delivery needs 0 < timeout ≤ 300 s, 0 ≤ backoff ≤ 3600 s and "
                "1-100 attempts"
            )
        policy = Policy(timeout_s, backoff_s, max_attempts)
        return deliver_pass(self.store, policy, limit=limit, wait=wait)
