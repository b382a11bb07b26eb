"""How long each identifier modelreg accepts may be, and how large each count a manifest
names, in one place (the table of every limit, with the modules that hold the rest: docs/limits.md).

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
LABEL_MAX = 64  # promotions.label: a name a releaser gives a promotion (release-14)
HANDLE_MAX = MODEL_ID_MAX + 1 + LABEL_MAX  # the model id, @, then vN or a label
TARGET_NAME_MAX = 100  # verifications.target, promotions.target, events.target
ACTOR_MAX = 200  # events.actor, promotions.actor, record_states.actor, records.created_by
HOST_MAX = 200  # verifications.host
SOURCE_PIN_MAX = 300  # records.source
LICENSE_ID_MAX = 100  # records.license
FILE_PATH_MAX = 1000  # record_files.path
WHY_MAX = 2000  # events.why, promotions.why, record_states.reason (TEXT): one paragraph
MAX_LIMITATIONS = 20  # a promotion's known limitations (each at most WHY_MAX)

# A golden suite (schemas/suite.py; the file itself at most 1 MiB: suites.MAX_SUITE_BYTES).
MAX_SUITE_CASES = 2000
MAX_PROMPT_CHARS = 16_000
MAX_CASE_TOKENS = 2048
MAX_EXPECT_CHARS = 2000  # an expected value, each of one_of's values and of reject's
MAX_LIST_ITEMS = 100  # one_of's values, reject's alternatives
MAX_SUBSETS = 100  # per-subset gates
MAX_DECODE_TOKENS_PER_S = 1e6  # a speed gate
MAX_TTFT_MS = 3.6e6  # a time-to-first-token gate: one hour
MAX_KL = 100.0  # max_mean_kl, nats

# A target definition (targets.py _TargetSpec; the targets file at most 1 MiB).
MAX_TARGET_MEMORY_GIB = float(1 << 20)  # memory_gib, swap_gib: 1 PiB
MAX_COST_PER_HOUR_USD = 100_000.0  # a target's cost_per_hour_usd
MAX_POWER_WATTS = 1_000_000.0  # a target's power_watts (a rack, not a grid)
MAX_TARGET_HOSTS = 1000
MAX_TARGET_FLAGS = 1000  # cpu_flags, forbidden_flags, required_build_flags
MAX_TARGET_PROMPTS = 100  # golden_prompts
MAX_DESCRIPTION_CHARS = 8000

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


# ---------------------------------------------------------------- the sizes a manifest names
#
# Every count a manifest can name, bounded where it is validated (schemas/manifest.py), so
# that every door — `modelreg add`, a manifest file (`fit`, `diff`), POST /api/v1/records,
# `import` — refuses the same values with the same one line naming the field and its limit.
# The bounds are far beyond any real model (the largest have ~130 layers, 256 experts, a few
# trillion parameters, 10M tokens of context) and small enough that no arithmetic over them
# overflows a float. Computations over layers never cost one step per layer either
# (manifests/layers.py): a manifest stored before these bounds is read back and fitted all the
# same. docs/limits.md is the table of all of them.
MAX_LAYERS = 1 << 16  # block_count, kv_shared_layers, a per-layer list's length
MAX_EXPERTS = 1 << 16  # expert_count, expert_used_count
MAX_CONTEXT_TOKENS = 1 << 24  # context_length, sliding_window, seq_len, a fit's --context
MAX_WIDTH = 1 << 24  # embedding / feed-forward / head sizes, head counts, vocab_size
MAX_PARAMETERS = 10**15  # a parameter count (total, active, effective, per group, per type)
MAX_ARTIFACT_BYTES = 1 << 50  # a file's, a tensor type's, a module's, a host run's bytes
MAX_TENSORS = 10**7  # tensors per type / per file, metadata keys, importance-matrix entries
MAX_MANIFEST_FILES = 100_000  # files of one artifact (a Neuron bundle holds at most 10,000)
MAX_BITS_PER_WEIGHT = 64.0
MAX_TP_DEGREE = 1024  # tensor-parallel ranks of a Neuron bundle
MAX_BATCH = 4096  # sequences: a bundle's batch_size, a fit's --concurrency
MAX_HOST_SECONDS = 10**7  # a compile or deploy run's wall time (~4 months)
MAX_BUCKETS = 1024  # context buckets of a Neuron bundle


class bounded:
    """Metadata for ``Annotated[int | None, bounded(MAX_LAYERS, "layers")]``: refuses a value
    outside [minimum, limit] — or a per-layer list longer than MAX_LAYERS or holding one —
    with one line naming the limit, and states the bounds in the JSON Schema (``minimum``,
    ``maximum``, ``maxItems``: each applies to the values of its type).

    A manifest read back from the registry's own rows (validation context ``{"stored":
    True}``) is not refused: rows stored before a bound existed must stay readable
    (invariant 10); what computes over them is proportional to distinct facts anyway."""

    def __init__(self, limit: float, what: str, minimum: float = 0) -> None:
        self.limit, self.what, self.minimum = limit, what, minimum

    def check(self, value: Any, info: Any) -> Any:
        from pydantic_core import PydanticCustomError

        if value is None or (info.context or {}).get("stored"):
            return value
        if isinstance(value, list) and len(value) > MAX_LAYERS:
            raise PydanticCustomError(
                "limit",
                f"a per-layer list of {len(value):,} values is beyond the limit of "
                f"{MAX_LAYERS:,} layers",
            )
        for item in value if isinstance(value, list) else [value]:
            number = isinstance(item, int | float) and not isinstance(item, bool)
            if number and not self.minimum <= item <= self.limit:
                raise PydanticCustomError(
                    "limit",
                    f"{item:,} is beyond the limit: {self.minimum:,} to {self.limit:,} {self.what}",
                )
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.with_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: Any) -> Any:
        json = handler(schema)
        json.update(minimum=self.minimum, maximum=self.limit)
        if "anyOf" in json and any(s.get("type") == "array" for s in json["anyOf"]):
            json["maxItems"] = MAX_LAYERS
        return json
