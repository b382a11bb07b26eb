"""A next step (``modelreg.steps.Step``) as the command that does it.

Which command does an action is this table's; how each argument is given (an argument in its
place, an option with its flag, a switch) is read from the command itself, so a renamed flag
cannot leave a stale hint behind. An argument to fill in shows as a placeholder.
"""

from __future__ import annotations

import shlex
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import click

    from modelreg.steps import Step


# action -> (command words, switches always given, {the action's parameter: the command's})
_COMMANDS: dict[str, tuple[str, tuple[str, ...], dict[str, str]]] = {
    "verify": ("verify", (), {"ref": "record_ref"}),
    "promote": ("promote", (), {"ref": "record_ref", "limitations": "limitation"}),
    "release": ("release", (), {"ref": "record_ref"}),
    "hold": ("hold", (), {"ref": "record_ref"}),
    "retire": ("retire", (), {"ref": "record_ref"}),
    "show": ("show", (), {"ref": "record_ref"}),
    "locate": ("locate", (), {"ref": "record_ref"}),
    "fetch": ("fetch", (), {"ref": "record_ref"}),
    "push": ("push", (), {"ref": "record_ref"}),
    "attest": ("attest", (), {"ref": "record_ref"}),
    "fit": ("fit", (), {"ref": "record_ref"}),
    "rollback_plan": ("rollback", (), {"model_id": "model"}),
    "rollback": ("rollback", ("--apply",), {"model_id": "model"}),
    "drill_rollback": ("rollback", ("--drill",), {"model_id": "model"}),
    "records": ("list", (), {}),
    "status": ("status", (), {"model_id": "model"}),
    "history": ("history", (), {"model_id": "model"}),
    "deploy": ("deploy", (), {"model_id": "model"}),
    "search": ("search", (), {}),
    "add": ("add", (), {"locations": "location", "license": "license_id"}),
    "create_token": ("token create", (), {}),
    "tokens": ("token list", (), {}),
    "webhooks": ("webhooks list", (), {"include_removed": "removed"}),
    "allow_webhook_hosts": ("webhooks permit", (), {}),
    "db_check": ("db check", (), {}),
    "upgrade": ("db upgrade", (), {}),
    "targets": ("targets", (), {}),
    "define_targets": ("targets apply", (), {"path": "file"}),
    "remove_target": ("targets remove", (), {}),
    "host_report": ("host report", (), {}),
    "export": ("export", (), {"output": "output"}),
    "attach_suite": ("suite attach", (), {"model_id": "model", "suite_ref": "suite"}),
    "detach_suite": ("suite detach", (), {"model_id": "model"}),
    "card_validate": ("card validate", (), {"ref": "record_ref"}),
    "scan": ("scan", (), {}),
}

# What an argument to fill in looks like, by the command's parameter.
_BLANKS = {"why": "'...'", "sign_key": "KEY.pem", "record_ref": "RECORD", "to": "RECORD"}


def known(action: str) -> bool:
    return action in _COMMANDS


def command(step: Step) -> str:
    """``modelreg verify r_3f2a --target lab`` for ``Step("verify", ref=…, target="lab")``.
    An action or argument this CLI cannot say raises ``KeyError`` (a test checks every step
    the library writes)."""
    words, switches, renamed = _COMMANDS[step.action]
    params = _params(words)
    arguments: list[str] = []
    options: list[str] = []
    for name, value in step.args.items():
        own = renamed.get(name, name)
        param = params[own]
        if param.param_type_name == "argument":
            arguments.extend(_values(own, param, value))
        elif getattr(param, "is_flag", False):
            if value:
                options.append(param.opts[0] if param.opts[0].startswith("--") else param.opts[-1])
        else:
            flag = next((o for o in param.opts if o.startswith("--")), param.opts[0])
            for shown in _values(own, param, value):
                options += [flag, shown]
    return " ".join(["modelreg", words, *arguments, *options, *switches])


def said(step: Step | None) -> str | None:
    """The step as this CLI says it (its purpose, then the command), or None."""
    return step.said(command(step)) if step is not None else None


def _values(name: str, param: click.Parameter, value: Any) -> list[str]:
    if value is None:
        return [_BLANKS.get(name) or (param.metavar or name.upper())]
    if isinstance(value, (list, tuple)):
        return [_quote(str(v)) for v in value]
    return [_quote(str(value))]


def _quote(text: str) -> str:
    return text if text in ("RECORD", "'...'") else shlex.quote(text)


@cache
def _params(words: str) -> dict[str, click.Parameter]:
    import typer.main

    from modelreg.cli.app import app

    found: Any = typer.main.get_command(app)
    for word in words.split():
        found = found.commands[word]
    return {p.name: p for p in found.params if p.name}
