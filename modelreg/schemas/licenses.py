"""License ids a card or record may carry: the Hugging Face Hub's license vocabulary (SPDX
ids, lower-cased, plus named model licenses such as ``gemma`` or ``llama3.1``)."""

from __future__ import annotations

import re

from modelreg.limits import LICENSE_ID_MAX

KNOWN_LICENSES = frozenset(
    {
        "apache-2.0",
        "mit",
        "openrail",
        "bigscience-openrail-m",
        "creativeml-openrail-m",
        "bigscience-bloom-rail-1.0",
        "bigcode-openrail-m",
        "afl-3.0",
        "artistic-2.0",
        "bsl-1.0",
        "bsd",
        "bsd-2-clause",
        "bsd-3-clause",
        "bsd-3-clause-clear",
        "c-uda",
        "cc",
        "cc0-1.0",
        "cc-by-2.0",
        "cc-by-2.5",
        "cc-by-3.0",
        "cc-by-4.0",
        "cc-by-sa-3.0",
        "cc-by-sa-4.0",
        "cc-by-nc-2.0",
        "cc-by-nc-3.0",
        "cc-by-nc-4.0",
        "cc-by-nd-4.0",
        "cc-by-nc-nd-3.0",
        "cc-by-nc-nd-4.0",
        "cc-by-nc-sa-2.0",
        "cc-by-nc-sa-3.0",
        "cc-by-nc-sa-4.0",
        "cdla-sharing-1.0",
        "cdla-permissive-1.0",
        "cdla-permissive-2.0",
        "wtfpl",
        "ecl-2.0",
        "epl-1.0",
        "epl-2.0",
        "etalab-2.0",
        "eupl-1.1",
        "eupl-1.2",
        "agpl-3.0",
        "gfdl",
        "gpl",
        "gpl-2.0",
        "gpl-3.0",
        "lgpl",
        "lgpl-2.1",
        "lgpl-3.0",
        "isc",
        "h-research",
        "intel-research",
        "lppl-1.3c",
        "ms-pl",
        "apple-ascl",
        "apple-amlr",
        "mpl-2.0",
        "odc-by",
        "odbl",
        "openmdw-1.0",
        "openrail++",
        "osl-3.0",
        "postgresql",
        "ofl-1.1",
        "ncsa",
        "unlicense",
        "zlib",
        "pddl",
        "lgpl-lr",
        "deepfloyd-if-license",
        "fair-noncommercial-research-license",
        "llama2",
        "llama3",
        "llama3.1",
        "llama3.2",
        "llama3.3",
        "llama4",
        "gemma",
        "unknown",
        "other",
    }
)

# What a license id or an SPDX expression ("(MIT OR Apache-2.0)", "LicenseRef-x") can be made
# of: no newline, no control character, nothing that is markup in Markdown or HTML.
LICENSE_ID_RE = re.compile(rf"\A[A-Za-z0-9(][A-Za-z0-9 .+_:/()-]{{0,{LICENSE_ID_MAX - 1}}}\Z")


def license_id_problem(value: str) -> str | None:
    """Why ``value`` cannot be a license id or SPDX expression, or ``None`` if it can be.
    (Whether it is a *known* license is a separate question: ``KNOWN_LICENSES``.)"""
    if LICENSE_ID_RE.fullmatch(value):
        return None
    from modelreg.textsafe import for_terminal

    shown = for_terminal(value[:60]) + ("…" if len(value) > 60 else "")
    return (
        f"license '{shown}' is not a license id or SPDX expression (letters, digits, spaces and "
        f"'.+_:/()-', at most {LICENSE_ID_MAX} characters) — use the Hub's id, e.g. apache-2.0"
    )
