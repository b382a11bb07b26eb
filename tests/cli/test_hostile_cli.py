"""The command line under hostile input: arbitrary strings for ids, paths, prompts, reasons,
target names and URLs never give exit 3 or a traceback, and an exit 2 changes nothing; the
exit-3 and exit-4 paths say so in one line (JSON too)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import modelreg
from tests.helpers import add_synthetic, record_run

# Text with what breaks parsers and terminals: control characters, escapes, quotes, globs,
# LIKE wildcards, path separators, very long runs, non-ASCII look-alikes.
HOSTILE = st.one_of(
    st.text(max_size=80),
    st.text(
        alphabet=st.sampled_from("\x00\x1b[]%_*?/\\'\"\n\r\t;:@&#\u202eаo. -rR_0"), max_size=40
    ),
    st.sampled_from(["", " ", "-", "--", "r_", "r_%", "..", "/", "a/b", "A/B", "x" * 400]),
)

COMMANDS = [
    lambda s: ["show", s],
    lambda s: ["verify", s, "--target", "cpu"],
    lambda s: ["verify", "r_000000000000", "--target", s],
    lambda s: ["promote", s, "--target", "cpu", "--why", s],
    lambda s: ["rollback", s, "--target", "cpu"],
    lambda s: ["rollback", "rules/alpha", "--target", "cpu", "--apply", "--why", s],
    lambda s: ["status", s],
    lambda s: ["status", "rules/alpha", "--target", "cpu", "--expect-sha256", s],
    lambda s: ["history", s],
    lambda s: ["hold", s, "--why", s],
    lambda s: ["retire", "r_000000000000", "--why", s],
    lambda s: ["list", "--model", s],
    lambda s: ["list", "--deployable-on", s],
    lambda s: ["add", s, "--model-id", s],
    lambda s: ["add", "/nonexistent.gguf", "--model-id", "a/b", "--prompt", s, "--expect", s],
    lambda s: ["diff", s, s],
    lambda s: ["fit", s, "--target", "cpu"],
    lambda s: ["card", "validate", s],
    lambda s: ["import", s],
    lambda s: ["suite", "check", s],
    lambda s: ["--db", s, "status"],
    lambda s: ["--db", f"postgresql+psycopg://u:{s}@127.0.0.1:1/db", "status"],
]


def _state(db: Path) -> str:
    """Everything in the registry, as one digest (an exit 2 must leave it unchanged)."""
    registry = modelreg.open(f"sqlite:///{db}")
    rows = [r.model_dump_json() for r in registry.records().records]
    rows += [e.model_dump_json() for e in registry.history("rules/alpha").events]
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    db = tmp_path / "fuzz.db"
    registry = modelreg.open(f"sqlite:///{db}")
    record = add_synthetic(registry, 1)
    record_run(registry, record)
    registry.promote(record, "cpu")
    return db


@settings(
    max_examples=160,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    text=HOSTILE,
    command=st.sampled_from(COMMANDS),
    json_out=st.booleans(),
)
def test_arbitrary_strings_never_crash_the_cli(
    cli, seeded: Path, monkeypatch: pytest.MonkeyPatch, text: str, command, json_out: bool
) -> None:
    monkeypatch.setenv("MODELREG_DATABASE_URL", f"sqlite:///{seeded}")
    monkeypatch.chdir(seeded.parent)
    before = _state(seeded)
    args = command(text) + (["--json"] if json_out else [])
    code, out, err = cli(*args)
    assert code in (0, 1, 2, 4), (args, code, err)
    # "Unavailable" only where the string named the database: the seeded one is reachable.
    assert code != 4 or args[0] == "--db", (args, err)
    assert "Traceback" not in err and "internal error" not in err, (args, err)
    if code == 2:
        assert _state(seeded) == before, args
        assert err.count("\n") <= 1 or "Usage:" in err, (args, err)
        if json_out and "Usage:" not in err:
            assert json.loads(out)["error"]["code"], out
    for line in (out + err).splitlines():
        assert "\x1b" not in line and "\x00" not in line, (args, line)


def test_internal_errors_are_exit_3_in_one_line(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from modelreg.api import Registry

    def broken(*_: object, **__: object) -> None:
        raise RuntimeError("the status query fell over")

    monkeypatch.setattr(Registry, "status", broken)
    code, out, err = cli("status")
    assert code == 3 and out == ""
    assert err.startswith("internal error: RuntimeError: the status query fell over")
    assert err.count("\n") == 1 and "MODELREG_DEBUG=1" in err
    code, out, _ = cli("status", "--json")
    assert code == 3 and json.loads(out)["error"]["code"] == "internal"


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://bob:s3cretpw@127.0.0.1:1/registry",
        "postgresql+psycopg://bob@127.0.0.1:1/registry?password=s3cretpw",
        "postgresql+psycopg://bob:s3c@ret/pw@127.0.0.1:1/registry",
    ],
)
def test_secrets_never_reach_a_message(cli, monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("MODELREG_DATABASE_URL", url)
    for args in (("status",), ("status", "--json")):
        code, out, err = cli(*args)
        assert code in (2, 4), (code, err)
        assert "s3c" not in out + err and "ret/pw" not in out + err, out + err
    monkeypatch.setenv("MODELREG_DEBUG", "1")
    code, out, err = cli("status")
    assert "s3c" not in out + err


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ("home-is-a-file", "is a file, not a directory"),
        ("not-sqlite", "is not a SQLite database"),
        ("bad-port", "is not a SQLAlchemy URL"),
    ],
)
def test_bad_registry_locations_are_exit_2(
    cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: str, needle: str
) -> None:
    if setup == "home-is-a-file":
        home = tmp_path / "home-file"
        home.write_text("not a directory")
        monkeypatch.setenv("MODELREG_HOME", str(home))
        monkeypatch.delenv("MODELREG_DATABASE_URL")  # the registry lives in the home
    elif setup == "not-sqlite":
        db = tmp_path / "registry.db"
        db.write_bytes(b"PK\x03\x04 a zip file, not a database")
        monkeypatch.setenv("MODELREG_DATABASE_URL", f"sqlite:///{db}")
    else:
        monkeypatch.setenv("MODELREG_DATABASE_URL", "postgresql+psycopg://u@db:notaport/x")
    code, _, err = cli("status")
    assert code == 2 and needle in err and err.count("\n") == 1, err


def test_identifiers_longer_than_any_column_are_refused_at_input(cli, tmp_path: Path) -> None:
    from tests.helpers import write_gguf

    artifact = write_gguf(tmp_path / "m.gguf", {"token_embd.weight": (4, 4)})
    code, _, err = cli("add", artifact, "--model-id", "a/b", "--license", "x" * 101)
    assert code == 2 and "license" in err and "at most 100" in err, err
    code, _, err = cli("add", artifact, "--model-id", "a/b", "--source", "pypi://p==" + "1" * 300)
    assert code == 2 and "source" in err and "at most 300" in err, err
    assert json.loads(cli("list", "--json")[1])["records"] == []
    code, _, err = cli("status", "o/" + "n" * 300)
    assert code == 2 and "at most" in err
    code, _, err = cli("verify", "r_" + "0" * 100)
    assert code == 2 and "at most 32" in err


def test_a_database_host_no_resolver_can_take_is_exit_2(cli) -> None:
    """Found by the fuzz above: '@' in a password left '\\x80@127.0.0.1' as the host, and the
    resolver's UnicodeError was an internal error (exit 3)."""
    code, _, err = cli("--db", "postgresql+psycopg://u:@\x80@127.0.0.1:1/db", "status")
    assert code == 2 and "not a SQLAlchemy URL" in err and err.count("\n") == 1
    assert "\x80" not in err  # the password part is redacted
