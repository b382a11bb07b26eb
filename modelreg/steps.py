"""What to do next, as data: the action that does it and its arguments.

The library never writes a command line. An answer that has a next step (a reason a record is
not deployable, a refused rollback, an error) carries a ``Step``: ``action`` is the name of the
``Registry`` method that does it (``"verify"``, ``"release"``, ``"rollback"``) and ``args`` its
parameters by name. Each caller says it its own way: the CLI as the command
(``modelreg.cli.steps``), the HTTP API as JSON (``{"action": …, "args": {…}}``), Python as the
call (``Step.call``: ``registry.release(ref="r_3f2a", why=...)``).

An argument given as ``None`` is one the caller fills in (a reason, a key file): the CLI shows a
placeholder, Python ``...``, JSON ``null``. ``purpose`` says in a few words what the step is
for ("release it first"), when the step alone would not say it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Actions that are not Registry methods: the module function that does them.
MODULE_ACTIONS = {"upgrade": "modelreg.upgrade"}


class Step:
    """One next step: ``Step("verify", ref="r_3f2a", target="lab")``."""

    __slots__ = ("action", "args", "purpose")

    action: str
    args: Mapping[str, Any]
    purpose: str | None

    def __init__(self, action: str, /, purpose: str | None = None, **args: Any) -> None:
        object.__setattr__(self, "action", action)
        object.__setattr__(self, "purpose", purpose)
        object.__setattr__(self, "args", dict(args))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("a Step does not change")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Step):
            return NotImplemented
        return (self.action, self.purpose, self.args) == (other.action, other.purpose, other.args)

    def __hash__(self) -> int:
        return hash((self.action, self.purpose, tuple(sorted(self.args.items(), key=str))))

    def __repr__(self) -> str:
        return f"Step({self.call()!r})"

    def json(self) -> dict[str, Any]:
        """The step as JSON: ``{"action", "args", "purpose"}`` (an argument to fill in: null)."""
        return {"action": self.action, "args": dict(self.args), "purpose": self.purpose}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Step:
        return cls(str(data["action"]), data.get("purpose"), **dict(data.get("args") or {}))

    def call(self) -> str:
        """The Python call that does it: ``registry.verify(ref="r_3f2a", target="lab")``."""
        name = MODULE_ACTIONS.get(self.action, f"registry.{self.action}")
        shown = ", ".join(
            f"{key}={'...' if value is None else _python(value)}"
            for key, value in self.args.items()
        )
        return f"{name}({shown})"

    def said(self, how: str) -> str:
        """``how`` (the step in a caller's words) after the purpose, when there is one."""
        return f"{self.purpose}: {how}" if self.purpose else how


def _python(value: object) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_python(v) for v in value) + "]"
    return repr(value)


def said_in_python(step: Step | None) -> str | None:
    """The step as a Python caller reads it, or None."""
    return step.said(step.call()) if step is not None else None
