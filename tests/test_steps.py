"""Next steps as data (``modelreg.steps``): the library writes what to do next once, as an
action and its arguments; the CLI says it as the command, the HTTP API as JSON, Python as the
call. Every step the library writes is checked here against the Registry method it names and
the command the CLI gives it, so neither can drift; and no command line is left in the library.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

import modelreg.cli.main  # noqa: F401 - registers every command on the app the steps read
from modelreg.api import Registry
from modelreg.cli import steps as cli_steps
from modelreg.errors import InvalidInput, NotFound, TargetNotFound
from modelreg.steps import MODULE_ACTIONS, Step
from tests.helpers import add_synthetic

PACKAGE = Path(__file__).resolve().parents[1] / "modelreg"


def _written_steps() -> list[tuple[str, int, str, dict[str, Any]]]:
    """Every ``Step("action", …)`` in the library's source: (file, line, action, args) — an
    argument's value as written when it is a constant, else a stand-in string."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Step"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                continue
            args: dict[str, Any] = {}
            for kw in node.keywords:
                if kw.arg is None:  # **step.args: a step already checked where it was written
                    continue
                if isinstance(kw.value, ast.Constant):
                    args[kw.arg] = kw.value.value
                elif isinstance(kw.value, ast.List):
                    args[kw.arg] = ["x"]
                else:
                    args[kw.arg] = "x"
            found.append(
                (str(path.relative_to(PACKAGE.parent)), node.lineno, node.args[0].value, args)
            )
    return found


WRITTEN = _written_steps()


def test_the_library_writes_steps() -> None:
    assert len(WRITTEN) >= 30, WRITTEN  # the scan finds them (a broken scan would pass all)


@pytest.mark.parametrize(("where", "line", "action", "args"), WRITTEN, ids=lambda v: str(v))
def test_every_step_is_a_call_and_a_command(
    where: str, line: int, action: str, args: dict[str, Any]
) -> None:
    step = Step(action, **args)
    if action in MODULE_ACTIONS:
        assert not args
    else:
        method = getattr(Registry, action)
        parameters = inspect.signature(method).parameters
        for name in args:
            assert name in parameters, f"{where}:{line}: {action}() has no parameter {name!r}"
    ast.parse(step.call())  # valid Python
    command = cli_steps.command(step)
    words = shlex.split(command)
    assert words[0] == "modelreg"
    # The command parses: every option is one the command has, each value where it belongs.
    import typer.main

    from modelreg.cli.main import app

    group: Any = typer.main.get_command(app)
    found, rest = group, words[1:]
    while hasattr(found, "commands") and rest and rest[0] in found.commands:
        found, rest = found.commands[rest[0]], rest[1:]
    found.make_context("modelreg", rest, resilient_parsing=False)


def test_each_caller_says_a_step_its_way() -> None:
    step = Step("verify", "sign one", ref="r_3f2a", target="lab", sign_key=None)
    assert (
        cli_steps.said(step) == "sign one: modelreg verify r_3f2a --target lab --sign-key KEY.pem"
    )
    assert step.call() == 'registry.verify(ref="r_3f2a", target="lab", sign_key=...)'
    assert step.json() == {
        "action": "verify",
        "args": {"ref": "r_3f2a", "target": "lab", "sign_key": None},
        "purpose": "sign one",
    }
    assert Step.from_json(json.loads(json.dumps(step.json()))) == step
    rollback = Step("rollback", model_id="a/b", target="cpu", to="r_9", why="incident 7")
    assert cli_steps.command(rollback) == (
        "modelreg rollback a/b --target cpu --to r_9 --why 'incident 7' --apply"
    )
    assert cli_steps.command(Step("drill_rollback", model_id="a/b", target="cpu")) == (
        "modelreg rollback a/b --target cpu --drill"
    )
    assert cli_steps.command(Step("db_check", quarantine=True)) == "modelreg db check --quarantine"
    assert cli_steps.command(Step("locate", ref="r_1", add=["s3://b/k"])) == (
        "modelreg locate r_1 --add s3://b/k"
    )


# Words that are this CLI's commands: "modelreg verify" in a library string is a command line.
_COMMAND = re.compile(
    r"\bmodelreg (add|inspect|show|list|search|verify|promote|rollback|status|history|attest|"
    r"hold|release|retire|deploy|diff|fit|export|import|scan|serve|locate|push|fetch|card|host|"
    r"db|suite|token|targets|webhooks)\b"
)
# Adapters speak in words: the CLI, the demo script, the server's start-up line.
_ADAPTERS = ("modelreg/cli/", "modelreg/demo.py", "modelreg/server/app.py")


def test_no_command_line_in_the_library() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE.parent))
        if rel.startswith(_ADAPTERS) or "/migrations/" in rel:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
                and _COMMAND.search(node.value)
            ):
                found.append(f"{rel}:{node.lineno}: {node.value[:80]!r}")
    assert not found, "\n".join(found)


def test_python_callers_read_calls_and_the_cli_commands(registry: Any, cli: Any) -> None:
    add_synthetic(registry, 1)
    with pytest.raises(InvalidInput) as caught:
        registry.show("rules/alpha")
    assert caught.value.step == Step("records", "list the model's records", model="rules/alpha")
    assert str(caught.value).endswith(
        'list the model\'s records: registry.records(model="rules/alpha")'
    )
    code, _, err = cli("--db", registry.url, "show", "rules/alpha")
    assert code == 2 and err.strip().endswith(
        "list the model's records: modelreg list --model rules/alpha"
    )
    code, out, _ = cli("--db", registry.url, "show", "rules/alpha", "--json")
    assert code == 2
    assert json.loads(out)["error"]["next"] == {
        "action": "records",
        "args": {"model": "rules/alpha"},
        "purpose": "list the model's records",
    }

    with pytest.raises(NotFound) as missing:
        registry.remove_webhook(99)
    assert str(missing.value).endswith("list them: registry.webhooks()")

    with pytest.raises(TargetNotFound) as unknown:
        registry.target("nowhere")
    assert unknown.value.step == Step("targets", "list them")


def test_the_http_api_gives_steps_as_json(registry: Any) -> None:
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
    assert body["error"]["next"] == {
        "action": "promote",
        "args": {"ref": None, "target": "cpu"},
        "purpose": "promote a verified record",
    }
    assert "modelreg" not in json.dumps(body)
