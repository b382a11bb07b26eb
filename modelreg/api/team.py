"""The team service's shared state: target definitions, API tokens and webhooks."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from modelreg import config
from modelreg.api.core import Core, _check_why
from modelreg.api.views import _token_out, _webhook_out
from modelreg.errors import (
    InvalidInput,
    NotFound,
    TargetNotFound,
    Unauthorized,
)
from modelreg.schemas.output import (
    TargetsChangeOutput,
    TokenCreateOutput,
    TokenRevokeOutput,
    TokensOutput,
    WebhookAttemptOut,
    WebhookCreateOutput,
    WebhookDeliverOutput,
    WebhookRemoveOutput,
    WebhooksOutput,
)
from modelreg.webhooks import BACKOFF_S, DEFAULT_EVENTS, MAX_ATTEMPTS, TIMEOUT_S

if TYPE_CHECKING:
    # The store (SQLAlchemy) loads when a registry is opened, not when modelreg.api is
    # imported: `modelreg inspect` needs no database.
    from modelreg.registry.store import (
        StoredToken,
    )


class Team(Core):
    """The team service's shared state: target definitions, API tokens and webhooks."""

    def define_targets(self, path: Path, *, actor: str | None = None) -> TargetsChangeOutput:
        """Apply the targets of a YAML file (the targets.yaml format) to the registry: every
        reader sees the same definitions, with the trusted keys and suite files they name read
        and stored in them. A definition replaces the stored one of that name; each change is
        an event, and evidence judged under the old definition is stale from then on."""
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
            raise InvalidInput(f"{path}: defines no targets", "see: modelreg targets --help")
        for name in specs:
            if not TARGET_NAME_RE.fullmatch(name):
                raise InvalidInput(
                    f"{path}: target name {name[:120]!r} must be 1-100 letters, digits, '.', "
                    "'_' or '-'"
                )
            if name in builtin_names():
                raise InvalidInput(f"{path}: target {name!r} is built in and cannot be redefined")
        changes = self.store.define_targets(
            {name: spec_as_json(spec) for name, spec in specs.items()},
            actor or config.actor(),
            str(path),
        )
        changed = [n for n, c in changes.items() if c != "unchanged"]
        message = (
            f"applied to the registry: {', '.join(f'{n} ({changes[n]})' for n in changed)}"
            if changed
            else "nothing changed: the registry already has these definitions"
        )
        return TargetsChangeOutput(changes=changes, message=message, targets=self.targets().targets)

    def remove_target(
        self, name: str, *, why: str | None = None, actor: str | None = None
    ) -> TargetsChangeOutput:
        """Remove a shared target definition. Evidence gathered on it is kept; records
        production there read "target no longer defined" until it is defined again."""
        from modelreg.targets import builtin_names

        _check_why(why)
        if name in builtin_names():
            raise InvalidInput(f"target {name!r} is built in and cannot be removed")
        # The stored names, not every target resolved: a definition that no longer builds
        # (a newer field, a bad path) can still be removed.
        with self.store.read() as reads:
            shared = {t.name for t in reads.target_specs()}
        with self.store.write() as tx:
            removed = tx.remove_target(name, actor or config.actor(), why)
            production = [p.model_id for p in tx.productions(None, name)]
        if not removed:
            from modelreg.api.core import _unapplied

            raise TargetNotFound(name, sorted(shared), _unapplied(name))
        message = f"removed shared target {name}"
        if production:
            message += (
                f". WARNING: production records on {name} ({', '.join(production)}) are no "
                f"longer deployable there until {name} is defined again"
            )
        return TargetsChangeOutput(
            changes={name: "removed"}, message=message, targets=self.targets().targets
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
            raise NotFound(f"token {name!r} not found", "list them with: modelreg token list")
        return TokenRevokeOutput(token=_token_out(stored), changed=before.revoked_at is None)

    def authenticate(self, secret: str) -> StoredToken:
        """The token a bearer secret belongs to; ``Unauthorized`` when it is unknown or
        revoked. One indexed read per call (the secret's digest): a revoke counts from the
        next request, in every process."""
        from modelreg.tokens import secret_digest

        with self.store.read() as reads:
            token = reads.token_of(secret_digest(secret))
        if token is None:
            raise Unauthorized("unknown token", "create one with: modelreg token create NAME")
        if token.revoked_at is not None:
            raise Unauthorized(
                f"token {token.name!r} was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC",
                "ask for a new one: modelreg token create NAME --role ROLE",
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
        delivery signed with ``secret`` (a new one when None; it is in this output only)."""
        from modelreg.registry.hooks import Webhooks
        from modelreg.webhooks import new_secret, parse_events, parse_secret, parse_url

        the_url, kinds = parse_url(url), parse_events(events)
        the_secret = new_secret() if secret is None else parse_secret(secret)
        stored = Webhooks(self.store).add(the_url, kinds, the_secret, actor or config.actor())
        return WebhookCreateOutput(webhook=_webhook_out(stored), secret=the_secret)

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
                f"webhook {webhook_id} not found", "list them with: modelreg webhooks list"
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
    ) -> WebhookDeliverOutput:
        """One pass over the outbox: every due delivery (at most ``limit``) is claimed and
        POSTed once; a failed attempt is due again after a backoff, and given up after
        ``max_attempts``. Senders in other processes share the outbox (a claimed attempt is
        nobody else's), and a sender that dies mid-attempt leaves it due once its lease ends."""
        from modelreg.registry.hooks import Webhooks
        from modelreg.webhooks import backoff_s as wait_after
        from modelreg.webhooks import headers_for, payload, post

        if not (0 < timeout_s <= 300 and 0 <= backoff_s <= 3600 and 1 <= max_attempts <= 100):
            raise InvalidInput(
                "webhook delivery needs 0 < timeout ≤ 300 s, 0 ≤ backoff ≤ 3600 s and "
                "1-100 attempts"
            )
        hooks = Webhooks(self.store)
        # A POST is at most a connect, a send and a read, each within the timeout.
        lease_s = 3 * timeout_s + 30
        attempts = []
        for due in hooks.due(limit):
            if not hooks.claim(due, lease_s):
                continue  # another sender took it
            body = payload(due.event, due.delivery_id)
            headers = headers_for(due.secret, due.event.kind, due.delivery_id, body)
            sent = post(due.url, body, headers, timeout_s)
            attempt = due.attempts + 1
            retry = None
            if not sent.delivered and attempt < max_attempts:
                retry = wait_after(attempt, backoff_s)
            status = hooks.finish(due, sent.status, sent.error, retry)
            attempts.append(
                WebhookAttemptOut(
                    webhook_id=due.webhook_id,
                    delivery_id=due.delivery_id,
                    event=due.event.kind,
                    event_id=due.event.id,
                    attempt=attempt,
                    status=status,
                    http_status=sent.status,
                    error=sent.error,
                    retry_in_s=retry,
                )
            )
        return WebhookDeliverOutput(
            attempts=attempts,
            delivered=sum(a.status == "delivered" for a in attempts),
            retrying=sum(a.status == "pending" for a in attempts),
            failed=sum(a.status == "failed" for a in attempts),
            pending=hooks.pending(),
        )
