"""A hint in a caller's words: the library writes what to do next once, as the command that
does it (``modelreg release r_3f2a --why '...'``); a Python caller reads it as the call that
does it (``registry.release("r_3f2a", why="...")``). ``ModelregError.hint`` is the Python
wording, ``cli_hint`` the command: the CLI and the HTTP API show the command.

Only commands this module knows the call of are reworded, each option to its parameter; a
command with an option it does not know stays a command (never a call that does something
else). What follows a command in the hint (prose, a closing bracket) is kept."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field


@dataclass(frozen=True)
class _Call:
    call: str  # registry.verify, modelreg.upgrade
    positionals: tuple[str, ...] = ()  # what the command's arguments are, in order
    # --flag -> (parameter, how): "pos" fills the next positional slot, "path" a Path
    # keyword, "list" a one-item list positional, "true" a keyword set to True, "value" a
    # keyword; "" (as for --apply) only chooses the call.
    options: dict[str, tuple[str, str]] = field(default_factory=dict)
    # With one of these flags given the call is another one, the first found deciding
    # (rollback --apply: rollback; --drill alone: drill_rollback; else its plan).
    switch: tuple[tuple[str, str], ...] = ()
    # How the command's own arguments are passed: "text" each a string, "path" a Path,
    # "list" all of them as one list of paths (add FILE…).
    arguments: str = "text"


_CALLS: dict[str, _Call] = {
    "verify": _Call(
        "registry.verify",
        ("ref",),
        {
            "--target": ("target", "pos"),
            "--sign-key": ("sign_key", "path"),
            "--suite": ("suite", "value"),
        },
    ),
    "promote": _Call(
        "registry.promote",
        ("ref",),
        {
            "--target": ("target", "pos"),
            "--why": ("why", "value"),
            "--accept-relaxed-gate": ("accept_relaxed_gate", "true"),
        },
    ),
    "release": _Call("registry.release", ("ref",), {"--why": ("why", "value")}),
    "hold": _Call("registry.hold", ("ref",), {"--why": ("why", "value")}),
    "retire": _Call("registry.retire", ("ref",), {"--why": ("why", "value")}),
    "show": _Call("registry.show", ("ref",)),
    "locate": _Call("registry.locate", ("ref",), {"--add": ("add", "list")}),
    "fetch": _Call("registry.fetch", ("ref",), {"--to": ("to", "pospath")}),
    "rollback": _Call(
        "registry.rollback_plan",
        ("model_id",),
        {
            "--target": ("target", "pos"),
            "--to": ("to", "value"),
            "--why": ("why", "value"),
            "--drill": ("drill", "true"),
            "--apply": ("", ""),
        },
        switch=(("--apply", "registry.rollback"), ("--drill", "registry.drill_rollback")),
    ),
    "list": _Call(
        "registry.records",
        (),
        {"--model": ("model", "pos"), "--deployable-on": ("deployable_on", "value")},
    ),
    "status": _Call("registry.status", ("model_id",), {"--target": ("target", "value")}),
    "history": _Call("registry.history", ("model_id",)),
    "token create": _Call("registry.create_token", ("name",), {"--role": ("role", "pos")}),
    "token list": _Call("registry.tokens"),
    "webhooks list": _Call("registry.webhooks"),
    "db check": _Call("registry.db_check", (), {"--quarantine": ("quarantine", "true")}),
    "db upgrade": _Call("modelreg.upgrade"),
    "targets": _Call("registry.targets"),
    "targets add": _Call("registry.define_targets", ("path",), arguments="path"),
    "export": _Call("registry.export", ("output",), arguments="path"),
    "add": _Call(
        "registry.add",
        ("paths",),
        {
            "--signature": ("signature", "path"),
            "--model-id": ("model_id", "value"),
            "--source": ("source", "value"),
        },
        arguments="list",
    ),
}
_COMMAND = re.compile(r"modelreg ((?:token|webhooks|db|targets) [a-z]+|[a-z][a-z-]*)")
_END = re.compile(r"[);]|, |$")


def api_wording(text: str | None) -> str | None:
    """``text`` with each command it names that has a known call reworded as that call."""
    if not text:
        return text
    out, at = [], 0
    for found in _COMMAND.finditer(text):
        if found.start() < at:
            continue
        call = _CALLS.get(found.group(1))
        if call is None:
            continue
        end = _END.search(text, found.end())
        stop = end.start() if end else len(text)
        reworded = _reword(call, text[found.end() : stop])
        if reworded is None:
            continue
        words, rest = reworded
        out.append(text[at : found.start()])
        out.append(words + rest)
        at = stop
    out.append(text[at:])
    return "".join(out)


def _reword(call: _Call, tail: str) -> tuple[str, str] | None:
    """The call for the command's arguments in ``tail`` and what follows them; None when an
    argument does not fit the command (it stays a command)."""
    try:
        tokens = shlex.split(tail)
    except ValueError:
        return None
    arguments: list[str] = []  # the command's own arguments, first
    positional: list[str] = []  # then what options fill in order (--target T)
    keywords: list[str] = []
    name = call.call
    used = 0
    wanted = list(call.positionals)
    while used < len(tokens):
        token = tokens[used]
        if token.startswith("--"):
            spec = call.options.get(token)
            if spec is None:
                return None
            parameter, how = spec
            if how in ("true", ""):
                if how == "true":
                    keywords.append(f"{parameter}=True")
                used += 1
                continue
            if used + 1 >= len(tokens):
                return None
            value = tokens[used + 1]
            if how == "pos":
                positional.append(_text(value))
            elif how == "pospath":
                positional.append(f"Path({_text(value)})")
            elif how == "path":
                keywords.append(f"{parameter}=Path({_text(value)})")
            elif how == "list":
                positional.append(f"[{_text(value)}]")
            else:
                keywords.append(f"{parameter}={_text(value)}")
            used += 2
            continue
        if not wanted:
            break  # prose after the command
        if call.arguments != "list":
            wanted.pop(0)
        arguments.append(f"Path({_text(token)})" if call.arguments == "path" else _text(token))
        used += 1
    given = set(tokens[:used])
    for flag, other in call.switch:
        if flag in given:
            name = other
            break
    if name == "registry.drill_rollback":
        keywords = [k for k in keywords if k != "drill=True"]  # the call is the drill
    rest = " ".join(tokens[used:])
    if call.arguments == "list":
        arguments = [f"[{', '.join(arguments)}]"] if arguments else []
    shown = ", ".join(arguments + positional + keywords)
    return f"{name}({shown})", (f" {rest}" if rest else "")


def _text(value: str) -> str:
    """A string argument as Python writes it (placeholders too: "RECORD", "...")."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
