"""How long each identifier modelreg accepts may be, in one place.

Every limit is at most the size of the database column the value is stored in
(``modelreg/registry/tables.py``), so a value accepted here is stored the same way on SQLite
(which does not enforce ``VARCHAR(n)``) and on PostgreSQL (which does, with an error that would
otherwise dump the SQL). Free text stored in ``TEXT`` columns is bounded too, so that one
command cannot put megabytes into the event log. ``tests/test_limits.py`` checks the limits
against the tables.
"""

from __future__ import annotations

from typing import Any

from modelreg.errors import InvalidInput

# models.model_id is VARCHAR(200); the grammar (schemas/manifest.py) bounds each part, like
# the Hugging Face Hub's own 96-character repository names.
MODEL_ID_PART_MAX = 96
MODEL_ID_MAX = 2 * MODEL_ID_PART_MAX + 1
RECORD_REF_MAX = 32  # records.id; a record ref on the command line is an id or its prefix
TARGET_NAME_MAX = 100  # verifications.target, promotions.target, events.target
ACTOR_MAX = 200  # events.actor, promotions.actor, record_states.actor, records.created_by
HOST_MAX = 200  # verifications.host
SOURCE_PIN_MAX = 300  # records.source
LICENSE_ID_MAX = 100  # records.license
FILE_PATH_MAX = 1000  # record_files.path
WHY_MAX = 2000  # events.why, promotions.why, record_states.reason (TEXT): one paragraph

# A number a model card states (manifests/card_claims.py): longer runs of digits are not read
# as a claim (no model has 10^18 of anything; a float of 400 digits is infinite).
CARD_NUMBER_DIGITS_MAX = 18
CARD_DECIMALS_MAX = 9


def check_length(field: str, value: str, limit: int) -> str:
    """Return ``value`` if it has at most ``limit`` characters, else raise a one-line
    ``InvalidInput`` naming ``field`` and quoting the start of the value (escaped)."""
    if len(value) <= limit:
        return value
    from modelreg.textsafe import for_terminal

    shown = for_terminal(value[:40])
    raise InvalidInput(
        f"{field} '{shown}…' is {len(value)} characters long; at most {limit} are allowed — "
        "shorten it"
    )


def check_manifest(manifest: Any, origin: str = "manifest") -> None:
    """Every identifier a manifest stores in a sized column, within that column's size — on
    every backend alike (SQLite would store what PostgreSQL then rejects with its SQL)."""
    for field, value, limit in (
        ("model id", manifest.model_id, MODEL_ID_MAX),
        ("base model", manifest.base_model, MODEL_ID_MAX),
        ("source", manifest.source, SOURCE_PIN_MAX),
        ("license", manifest.license.id, LICENSE_ID_MAX),
    ):
        if value is not None:
            check_length(f"{origin}: {field}", value, limit)
    for entry in manifest.files:
        check_length(f"{origin}: file path", entry.path, FILE_PATH_MAX)
