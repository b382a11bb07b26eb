"""Findings as a SARIF 2.1.0 log, for CI code scanning (GitHub, GitLab, IDE viewers)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modelreg.schemas.manifest import Finding

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://github.com/modelreg/modelreg/blob/main/docs/safety.md"

RULES: dict[str, str] = {
    "unsafe_template": "A chat template reaches Python internals, builds attribute names from "
    "strings, loads another template, writes instructions only when a message's text matches, "
    "or hides characters: runtimes render it on every request.",
    "unsafe_pickle": "A pickle imports a global that is not a tensor type: loading it runs "
    "that global.",
    "identity_mismatch": "A name the file gives itself (general.name, general.basename, "
    "general.size_label) contradicts the model id or the tensors.",
    "hidden_text": "Invisible or bidirectional characters in metadata or a model card: what a "
    "reader sees is not what the text says.",
}


def sarif_log(findings: Sequence[Finding], *, version: str) -> dict[str, Any]:
    """The SARIF log of ``findings``: one run of modelreg, one rule per finding code, one
    result per finding (level ``error`` when ``add`` would hold the record, else
    ``warning``), located at its file and, for a template, its line."""
    results = []
    for finding in findings:
        location: dict[str, Any] = {"artifactLocation": {"uri": finding.file}}
        if finding.line is not None:
            region: dict[str, Any] = {"startLine": finding.line}
            if finding.excerpt:
                region["snippet"] = {"text": finding.excerpt}
            location["region"] = region
        text = finding.message if not finding.where else f"{finding.where}: {finding.message}"
        result: dict[str, Any] = {
            "ruleId": finding.code,
            "level": "error" if finding.holds else "warning",
            "message": {"text": text},
            "locations": [{"physicalLocation": location}],
        }
        if finding.where:
            result["properties"] = {"where": finding.where}
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "modelreg",
                        "version": version,
                        "informationUri": INFORMATION_URI,
                        "rules": [
                            {"id": code, "shortDescription": {"text": text}}
                            for code, text in RULES.items()
                        ],
                    }
                },
                "results": results,
            }
        ],
    }
