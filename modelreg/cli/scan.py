"""``modelreg scan FILE…``: the safety checks of ``add`` without a database."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from modelreg.cli.app import JsonOption, app
from modelreg.cli.render import emit, out
from modelreg.errors import InvalidInput

FORMATS = ("text", "json", "sarif")


@app.command()
def scan(
    paths: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH...",
            help="GGUF files, checkpoint or bundle directories, chat templates (.jinja), "
            "tokenizer_config.json, pickle-bearing files (.pt .bin .pth .ckpt .pkl .zip), "
            "model cards.",
        ),
    ],
    model_id: Annotated[
        str | None,
        typer.Option("--model-id", help="The model id the names in the files must agree with."),
    ] = None,
    output_format: Annotated[
        str, typer.Option("--format", help="text, json or sarif (SARIF 2.1.0 for CI).")
    ] = "text",
    json_out: JsonOption = False,
) -> int:
    """Scan files for unsafe chat templates and pickles, names that contradict the model id,
    and hidden characters — nothing is rendered or unpickled. Exit 1 on a finding."""
    from modelreg import __version__
    from modelreg.manifests.scan import scan_paths
    from modelreg.safety.sarif import sarif_log
    from modelreg.schemas.output import ScanOutput

    if output_format not in FORMATS:
        raise InvalidInput(f"--format {output_format[:20]!r}", "give text, json or sarif")
    findings = scan_paths(paths, model_id)
    if json_out or output_format == "json":
        emit(ScanOutput(scanned=[str(p) for p in paths], findings=findings, clean=not findings))
    elif output_format == "sarif":
        sys.stdout.write(json.dumps(sarif_log(findings, version=__version__), indent=2) + "\n")
    else:
        for f in findings:
            where = f" {f.where}" if f.where else ""
            line = f" (line {f.line}: {f.excerpt})" if f.line is not None else ""
            out(f"{f.code}: {f.file}{where}: {f.message}{line}")
        if not findings:
            out(f"clean: {len(paths)} path(s) scanned, nothing found")
    return 1 if findings else 0
