"""Hints in the caller's words (``modelreg.hints``): a Python caller reads the call that does
what the hint says, the CLI and the HTTP API the command; a command with an option whose call
is not known stays a command."""

from __future__ import annotations

from typing import Any

import pytest

from modelreg.errors import InvalidInput, NotFound
from modelreg.hints import api_wording
from tests.helpers import add_synthetic


@pytest.mark.parametrize(
    ("command", "call"),
    [
        ("modelreg release r_1 --why '...'", 'registry.release("r_1", why="...")'),
        ("modelreg hold r_1 --why 'bad'", 'registry.hold("r_1", why="bad")'),
        ("modelreg show r_1", 'registry.show("r_1")'),
        ("modelreg verify r_2 --target cpu", 'registry.verify("r_2", "cpu")'),
        (
            "sign one with: modelreg verify r_2 --target cpu --sign-key KEY.pem",
            'sign one with: registry.verify("r_2", "cpu", sign_key=Path("KEY.pem"))',
        ),
        (
            "modelreg promote r_1 --target cpu --accept-relaxed-gate --why '...'",
            'registry.promote("r_1", "cpu", accept_relaxed_gate=True, why="...")',
        ),
        ("modelreg rollback a/b --target cpu", 'registry.rollback_plan("a/b", "cpu")'),
        (
            "roll back with: modelreg rollback a/b --target cpu --to r_9 --apply --why '...'",
            'roll back with: registry.rollback("a/b", "cpu", to="r_9", why="...")',
        ),
        (
            "drill again: modelreg rollback a/b --target cpu --drill",
            'drill again: registry.drill_rollback("a/b", "cpu")',
        ),
        (
            "fetch it first (modelreg fetch RECORD --to DIR) and locate that copy",
            'fetch it first (registry.fetch("RECORD", Path("DIR"))) and locate that copy',
        ),
        (
            "modelreg locate r_9 --add file://HOST/DIR",
            'registry.locate("r_9", ["file://HOST/DIR"])',
        ),
        (
            "list the records: modelreg list --model a/b",
            'list the records: registry.records("a/b")',
        ),
        ("modelreg token create NAME --role ROLE", 'registry.create_token("NAME", "ROLE")'),
        ("list them with: modelreg webhooks list", "list them with: registry.webhooks()"),
        ("with: modelreg db check --quarantine", "with: registry.db_check(quarantine=True)"),
        ("run modelreg db upgrade", "run modelreg.upgrade()"),
        (
            "share your version: modelreg targets add ~/.config/modelreg/targets.yaml",
            'share your version: registry.define_targets(Path("~/.config/modelreg/targets.yaml"))',
        ),
        (
            "export again with: modelreg export FILE",
            'export again with: registry.export(Path("FILE"))',
        ),
        (
            "(add it with: modelreg add PATH --signature BUNDLE)",
            '(add it with: registry.add(["PATH"], signature=Path("BUNDLE")))',
        ),
        ("record it with: modelreg add FILE…", 'record it with: registry.add(["FILE…"])'),
        # Unknown to the table, or an option it has no parameter for: left a command.
        ("see: modelreg targets --help", "see: modelreg targets --help"),
        ("send modelreg inspect --json unchanged", "send modelreg inspect --json unchanged"),
        (
            "modelreg verify r_1 --target cpu --bogus 1",
            "modelreg verify r_1 --target cpu --bogus 1",
        ),
        ("check --db or MODELREG_DATABASE_URL", "check --db or MODELREG_DATABASE_URL"),
    ],
)
def test_a_command_reads_as_its_call(command: str, call: str) -> None:
    assert api_wording(command) == call


def test_python_callers_read_calls_and_the_cli_commands(registry: Any, cli: Any) -> None:
    add_synthetic(registry, 1)
    with pytest.raises(InvalidInput) as caught:
        registry.show("rules/alpha")
    assert caught.value.hint == 'list the model\'s records: registry.records("rules/alpha")'
    assert caught.value.cli_hint == "list the model's records: modelreg list --model rules/alpha"
    assert str(caught.value).endswith('registry.records("rules/alpha")')
    code, _, err = cli("--db", registry.url, "show", "rules/alpha")
    assert code == 2 and err.strip().endswith("modelreg list --model rules/alpha")

    with pytest.raises(NotFound) as missing:
        registry.remove_webhook(99)
    assert missing.value.hint == "list them with: registry.webhooks()"


def test_the_http_api_names_commands(registry: Any) -> None:
    import json
    import urllib.error
    import urllib.request

    from tests.server.conftest import serving

    add_synthetic(registry, 1)
    with serving(registry.url) as served:
        secret = served.registry.create_token("rita", "reader", actor="admin").secret
        request = urllib.request.Request(
            f"{served.url}/api/v1/rollback-plan?model=rules/alpha&target=cpu",
            headers={"Authorization": f"Bearer {secret}"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request)
        body = json.loads(refused.value.read())
    assert refused.value.code == 409
    assert (
        body["error"]["hint"] == "promote a verified record: modelreg promote RECORD --target cpu"
    )
