"""``modelreg card validate`` and ``modelreg card render``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from modelreg import config
from modelreg.cli.main import JsonOption, _registry, app
from modelreg.cli.render import emit_json, say, table

card_app = typer.Typer(
    help="Model cards: validate their claims, render them from a record.", no_args_is_help=True
)
app.add_typer(card_app, name="card")


@card_app.command("validate")
def validate(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(metavar="README.md", help="The model card.")],
    record_ref: Annotated[
        str | None, typer.Option("--record", help="Check the card against this record.")
    ] = None,
    json_out: JsonOption = False,
) -> int:
    """Check a card's license, base model, relation, parameter and context claims; exit 1 on
    error-level findings. With --record, missing required facts put the record on hold."""
    from modelreg.validators.card import validate_card, validate_card_for_record

    record = None
    held = None
    if record_ref:
        registry = _registry(ctx)
        record = registry.get(record_ref)
        report, held = validate_card_for_record(registry, path, record, config.actor())
    else:
        report = validate_card(path)
    if json_out:
        emit_json(
            {
                "card": str(path),
                "record": record.id if record else None,
                "clean": not report.errors,
                "missing": report.missing,
                "hold": held,
                "findings": [
                    {
                        "severity": f.severity,
                        "field": f.field,
                        "message": f.message,
                        "expected": f.expected,
                        "found": f.found,
                    }
                    for f in report.findings
                ],
            }
        )
    else:
        if report.findings:
            print(
                table(
                    [(f.severity, f.field, f.message) for f in report.findings],
                    ["severity", "field", "finding"],
                )
            )
        else:
            print(f"{path}: no findings")
        if held and record is not None:
            say(f"{record.id} put on hold: {held}")
    return 1 if report.errors else 0


@card_app.command("render")
def render(
    ctx: typer.Context,
    record_ref: Annotated[str, typer.Argument(metavar="RECORD", help="Record id or prefix.")],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write here instead of stdout.")
    ] = None,
) -> int:
    """Write the card section a publisher needs: identity and pin, license, parameter ledger
    with provenance, quantization and real bits per weight, digests, where it was verified."""
    from modelreg import deploy
    from modelreg.manifests.card import render_card

    registry = _registry(ctx)
    record = registry.get(record_ref)
    text = render_card(record.manifest, record.id, deploy.verified_on(registry, record))
    if output:
        output.write_text(text, encoding="utf-8")
        say(f"wrote {output}")
    else:
        print(text, end="")
    return 0
