"""Registry-wide settings (migration 0011): a name and a value, each change an event.

The one setting so far is ``webhooks.allowed_hosts``: the hosts, by name as they are written
in webhook URLs, that may be sent deliveries although they are (or resolve to) loopback,
link-local or private addresses. Every other such destination is refused (``modelreg.webhooks``).
"""

from __future__ import annotations

from collections.abc import Iterable

from modelreg.clock import utcnow
from modelreg.registry.rows import event_row
from modelreg.registry.store import Store
from modelreg.registry.tables import SettingRow

WEBHOOK_HOSTS = "webhooks.allowed_hosts"


class Settings:
    """The settings of one registry database."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, name: str) -> str | None:
        with self.store.read() as reads:
            row = reads.session.get(SettingRow, name)
            return None if row is None else row.value

    def set(self, name: str, value: str, actor: str, why: str | None = None) -> bool:
        """Store ``value`` under ``name`` (with a ``setting`` event); False when it was so."""
        with self.store.write() as tx:
            row = tx.session.get(SettingRow, name)
            if row is not None and row.value == value:
                return False
            before = None if row is None else row.value
            if row is None:
                row = SettingRow(name=name, value=value, updated_by=actor)
            row.value, row.updated_at, row.updated_by = value, utcnow(), actor
            tx.session.add(row)
            detail = {"name": name, "value": value, "was": before}
            tx.session.add(event_row("setting", actor, why=why, detail=detail))
            return True

    def webhook_hosts(self) -> tuple[str, ...]:
        """The hosts allowed as webhook destinations on non-public addresses."""
        return _hosts(self.get(WEBHOOK_HOSTS) or "")

    def set_webhook_hosts(self, hosts: Iterable[str], actor: str, why: str | None = None) -> bool:
        return self.set(WEBHOOK_HOSTS, ",".join(sorted(set(hosts))), actor, why)


def _hosts(value: str) -> tuple[str, ...]:
    return tuple(h for h in value.split(",") if h)
