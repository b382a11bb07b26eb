"""``modelreg export`` / ``modelreg import``: move a registry, evidence and history included."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from modelreg.cli.main import _registry, app
from modelreg.cli.render import say
from modelreg.errors import InvalidInput

MAX_LINE_BYTES = 64 << 20


@app.command("export")
def export(
    ctx: typer.Context,
    output: Annotated[Path | None, typer.Argument(help="File to write (default: stdout).")] = None,
) -> int:
    """Write the whole registry as JSON lines (records, verifications, promotions, events)."""
    from modelreg.registry.transfer import export_rows

    registry = _registry(ctx)
    stream = output.open("w", encoding="utf-8") if output else sys.stdout
    count = 0
    try:
        for row in export_rows(registry):
            stream.write(json.dumps(row, sort_keys=True) + "\n")
            count += 1
    finally:
        if output:
            stream.close()
    say(f"exported {count - 1} rows" + (f" to {output}" if output else ""))
    return 0


def _lines(path: Path) -> Any:
    try:
        fh = path.open("r", encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"{path}: file not found") from None
    with fh:
        for number, line in enumerate(fh, start=1):
            if len(line) > MAX_LINE_BYTES:
                raise InvalidInput(f"{path}: line {number} is longer than {MAX_LINE_BYTES} bytes")
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"{path}: line {number} is not JSON: {exc}") from None
            if not isinstance(item, dict):
                raise InvalidInput(f"{path}: line {number} is not a JSON object")
            yield number, item


@app.command("import")
def import_(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="A file written by modelreg export.")],
) -> int:
    """Load an export into this registry, all or nothing (e.g. SQLite -> PostgreSQL)."""
    from modelreg.registry.transfer import import_rows

    registry = _registry(ctx)
    try:
        counts = import_rows(registry, _lines(path))
    except UnicodeDecodeError:
        raise InvalidInput(f"{path}: not UTF-8 text") from None
    say("imported " + ", ".join(f"{n} {kind}s" for kind, n in sorted(counts.items())))
    return 0
