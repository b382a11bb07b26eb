"""Secrets are never echoed (issue 22, item 4): every source of a secret — a PEM in
MODELREG_SIGNING_KEY, a key file whose contents are a PEM, a token in or named by a
targets file's token_env, an API token secret, a password in a --db URL — fed to the CLI in
process, with and without --json; the secret (and every 16-character piece of a PEM body)
must appear in no output stream. Then ``redact_secrets`` itself, the last line of defence."""

from __future__ import annotations

import base64
import json
import secrets as random_secrets
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from hypothesis import given, settings
from hypothesis import strategies as st

from modelreg.errors import InvalidInput
from modelreg.secrets import (
    REDACTED,
    looks_like_key_material,
    note_token_env,
    redact_secrets,
)
from tests.helpers import add_synthetic, key_pair

CliResult = tuple[int, str, str]


def _pieces(secret: str, size: int = 16) -> set[str]:
    """Every ``size``-character piece of a secret: of each line, and of a PEM's body with its
    line breaks removed (a piece that crosses a line break is still a leak)."""
    lines = [line.strip() for line in secret.strip().splitlines()]
    body = [line for line in lines if not line.startswith("-----")] or lines
    texts = [*body, "".join(body)]
    return {t[i : i + size] for t in texts for i in range(len(t) - size + 1)} or {secret}


def assert_not_echoed(secret: str, *streams: str) -> None:
    shown = "\n".join(streams)
    assert secret not in shown
    leaked = sorted(p for p in _pieces(secret) if p in shown)
    assert not leaked, f"pieces of the secret leaked: {leaked[:3]}"


def _pem(tmp_path: Path, name: str = "ci") -> str:
    private, _public = key_pair(tmp_path, name)
    return private.read_text()


def _corrupt(pem: str) -> str:
    """A PEM whose armour is intact and whose body is not a key."""
    lines = pem.splitlines()
    lines[1] = "X" * 10 + lines[1][10:]
    return "\n".join(lines) + "\n"


def _ed25519_pem() -> str:
    from cryptography.hazmat.primitives.asymmetric import ed25519

    return (
        ed25519.Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        .decode()
    )


@dataclass
class Case:
    """One way a secret reaches the CLI: the arguments (after --db), the secrets that must not
    be shown, the exit code, and a phrase the error must still carry (so redaction does not
    hide the message along with the secret)."""

    args: list[str]
    secrets: list[str]
    code: int
    says: str | None = None
    db: str | None = None  # a --db of its own, else the test's SQLite registry
    env: dict[str, str] = field(default_factory=dict)
    # In place of modelreg.signing.load_private_key: an error that quotes the key, as the
    # function did before, for the last line of defence to catch.
    load_private_key: Callable[[Path], Any] | None = None


Scenario = Callable[[Path, Any], Case]


def _env_pem_valid(tmp_path: Path, registry: Any) -> Case:
    # The usual CI pattern: MODELREG_SIGNING_KEY="$(cat ci.pem)". The key is read (a bad one
    # would be exit 2), not echoed; the synthetic record's bytes are not here, so nothing runs.
    pem = _pem(tmp_path)
    record = add_synthetic(registry, 1)
    return Case(["verify", record], [pem], 1, "missing_bytes", env={"MODELREG_SIGNING_KEY": pem})


def _env_pem_corrupt(tmp_path: Path, registry: Any) -> Case:
    pem = _corrupt(_pem(tmp_path))
    record = add_synthetic(registry, 1)
    return Case(
        ["verify", record],
        [pem],
        2,
        "MODELREG_SIGNING_KEY (key material): not a usable PEM private key",
        env={"MODELREG_SIGNING_KEY": pem},
    )


def _env_bare_base64_with_slashes(tmp_path: Path, registry: Any) -> Case:
    # A random key body holds "//" about one time in twenty: then it is read as a file name
    # (not found), and is hidden all the same (this made the case above flaky).
    body = "".join(_corrupt(_pem(tmp_path)).strip().splitlines()[1:-1])
    body = body[:40] + "//" + body[42:]
    record = add_synthetic(registry, 1)
    return Case(
        ["verify", record], [body], 2, "private key not found", env={"MODELREG_SIGNING_KEY": body}
    )


def _env_pem_wrong_type(tmp_path: Path, registry: Any) -> Case:
    pem = _ed25519_pem()
    record = add_synthetic(registry, 1)
    return Case(["verify", record], [pem], 2, "EC key", env={"MODELREG_SIGNING_KEY": pem})


def _env_bare_base64(tmp_path: Path, registry: Any) -> Case:
    # The key without its armour (one line of base64): key material too, never a file name.
    # (Without a "//": one would be read as a path, the next case.)
    body = "".join(_corrupt(_pem(tmp_path)).strip().splitlines()[1:-1]).replace("//", "/A")
    record = add_synthetic(registry, 1)
    return Case(
        ["verify", record],
        [body],
        2,
        "not a usable PEM private key",
        env={"MODELREG_SIGNING_KEY": body},
    )


def _sign_key_holds_a_pem(tmp_path: Path, registry: Any) -> Case:
    # --sign-key "$(cat ci.pem)": refused (a command line is visible to every process).
    pem = _pem(tmp_path)
    record = add_synthetic(registry, 1)
    return Case(["verify", record, "--sign-key", pem], [pem], 2, "holds key material")


def _key_file_with_a_bad_pem(tmp_path: Path, registry: Any) -> Case:
    pem = _corrupt(_pem(tmp_path))
    key = tmp_path / "broken.pem"
    key.write_text(pem)
    record = add_synthetic(registry, 1)
    return Case(["verify", record, "--sign-key", str(key)], [pem], 2, "broken.pem")


def _key_file_of_the_wrong_type(tmp_path: Path, registry: Any) -> Case:
    pem = _ed25519_pem()
    key = tmp_path / "ed.pem"
    key.write_text(pem)
    record = add_synthetic(registry, 1)
    return Case(["verify", record, "--sign-key", str(key)], [pem], 2, "ed.pem")


def _env_key_file_with_a_bad_pem(tmp_path: Path, registry: Any) -> Case:
    # MODELREG_SIGNING_KEY as a path (not a secret: named) to a file holding a broken PEM.
    pem = _corrupt(_pem(tmp_path))
    key = tmp_path / "env-key.pem"
    key.write_text(pem)
    record = add_synthetic(registry, 1)
    return Case(["verify", record], [pem], 2, "env-key.pem", env={"MODELREG_SIGNING_KEY": str(key)})


def _old_message_quoting_the_pem(tmp_path: Path, registry: Any) -> Case:
    """The last line of defence: an error that quotes the key (as load_private_key used to)
    is still shown without it."""
    pem = _pem(tmp_path)
    record = add_synthetic(registry, 1)

    def leaky(path: Path) -> Any:
        raise InvalidInput(f"{path}: private key not found", f"check {path!r}")

    env = {"MODELREG_SIGNING_KEY": pem}
    return Case(
        ["verify", record], [pem], 2, "private key not found", env=env, load_private_key=leaky
    )


def _internal_error_quoting_the_pem(tmp_path: Path, registry: Any) -> Case:
    pem = _pem(tmp_path)
    record = add_synthetic(registry, 1)

    def leaky(path: Path) -> Any:
        raise RuntimeError(f"cannot parse {path}")

    env = {"MODELREG_SIGNING_KEY": pem}
    return Case(["verify", record], [pem], 3, "RuntimeError", env=env, load_private_key=leaky)


def _targets_file(tmp_path: Path, body: str) -> dict[str, str]:
    spec = tmp_path / "targets.yaml"
    spec.write_text(body)
    return {"MODELREG_TARGETS": str(spec)}


def _served(token_env: str) -> str:
    return f"targets:\n  served:\n    endpoint: http://127.0.0.1:9\n    token_env: {token_env}\n"


def _token_in_token_env(tmp_path: Path, registry: Any) -> Case:
    # The token itself where the variable's name belongs (not a valid name: it has '-').
    token = "sk-proj-" + random_secrets.token_urlsafe(32)
    env = _targets_file(tmp_path, _served(f"'{token}'"))
    return Case(["targets", "apply"], [token], 2, "not an environment variable name", env=env)


def _token_like_name_in_token_env(tmp_path: Path, registry: Any) -> Case:
    # A token that happens to be a valid variable name (hf_… is letters, digits and '_').
    token = "hf_" + "".join(random_secrets.choice("abcdefXYZ0123456789") for _ in range(34))
    env = _targets_file(tmp_path, _served(token))
    return Case(["targets", "apply"], [token], 2, "looks like a token", env=env)


def _token_env_value_quoted(tmp_path: Path, registry: Any) -> Case:
    # The value of the variable token_env names, pasted where a record id goes: the error
    # quotes the argument, and the token is hidden — even before the targets file is read.
    token = "tok-" + random_secrets.token_hex(12)
    env = {
        **_targets_file(tmp_path, _served("LLM_API_TOKEN")),
        "LLM_API_TOKEN": token,
    }
    return Case(["verify", token, "--target", "served"], [token], 2, "not found", env=env)


def _api_token_secret_quoted(tmp_path: Path, registry: Any) -> Case:
    # An API token's secret given where its name goes.
    from modelreg.tokens import new_secret

    secret = new_secret()
    return Case(["token", "revoke", secret], [secret], 2, None)


def _db_password_without_scheme(tmp_path: Path, registry: Any) -> Case:
    password = "Hunter2-" + random_secrets.token_hex(8)
    return Case(
        ["status"], [password], 2, "not a SQLAlchemy URL", db=f"admin:{password}@db.example.com/r"
    )


def _db_password_unreachable(tmp_path: Path, registry: Any) -> Case:
    password = "p@ss/w?rd#" + random_secrets.token_hex(8)
    return Case(
        ["status"],
        [password],
        4,
        "cannot be reached",
        db=f"postgresql://admin:{password}@127.0.0.1:1/r",
    )


def _db_password_unknown_driver(tmp_path: Path, registry: Any) -> Case:
    password = "S3cret-" + random_secrets.token_hex(8)
    return Case(
        ["status"], [password], 2, "cannot use database", db=f"nosuchdb://admin:{password}@h/r"
    )


def _db_password_in_the_environment(tmp_path: Path, registry: Any) -> Case:
    password = "S3cret-" + random_secrets.token_hex(8)
    url = f"postgresql://admin:{password}@127.0.0.1:1/r?sslpassword={password}x"
    return Case(
        ["status"], [password], 4, "cannot be reached", db="", env={"MODELREG_DATABASE_URL": url}
    )


SCENARIOS: list[Scenario] = [
    _env_pem_valid,
    _env_pem_corrupt,
    _env_pem_wrong_type,
    _env_bare_base64,
    _env_bare_base64_with_slashes,
    _sign_key_holds_a_pem,
    _key_file_with_a_bad_pem,
    _key_file_of_the_wrong_type,
    _env_key_file_with_a_bad_pem,
    _old_message_quoting_the_pem,
    _internal_error_quoting_the_pem,
    _token_in_token_env,
    _token_like_name_in_token_env,
    _token_env_value_quoted,
    _api_token_secret_quoted,
    _db_password_without_scheme,
    _db_password_unreachable,
    _db_password_unknown_driver,
    _db_password_in_the_environment,
]


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "debug"])
@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__.strip("_"))
def test_no_secret_reaches_any_output_stream(
    cli: Callable[..., CliResult],
    registry: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    scenario: Scenario,
    json_out: bool,
    debug: bool,
) -> None:
    case = scenario(tmp_path, registry)
    for name, value in case.env.items():
        monkeypatch.setenv(name, value)
    if debug:  # tracebacks on stderr too
        monkeypatch.setenv("MODELREG_DEBUG", "1")
    if case.load_private_key is not None:
        monkeypatch.setattr("modelreg.signing.load_private_key", case.load_private_key)
    db = case.db if case.db is not None else f"sqlite:///{tmp_path / 'registry.db'}"
    args = (["--db", db] if db else []) + case.args + (["--json"] if json_out else [])
    code, out, err = cli(*args)
    assert code == case.code, (out, err)
    for secret in case.secrets:
        assert_not_echoed(secret, out, err)
    if case.says is not None:
        assert case.says in (out + err)
    if json_out and code != 0 and case.code in (2, 3, 4):
        error = json.loads(out)["error"]
        for secret in case.secrets:
            assert_not_echoed(secret, error["message"], error.get("hint") or "")


def test_a_pem_in_the_environment_signs_the_run(
    cli: Callable[..., CliResult], registry: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The PEM contents in MODELREG_SIGNING_KEY are the key (documented in signing)."""
    private, _public = key_pair(tmp_path, "ci")
    record = add_synthetic(registry, 1)
    db = f"sqlite:///{tmp_path / 'registry.db'}"
    code, out, _ = cli("--db", db, "verify", record, "--sign-key", private, "--json")
    by_file = json.loads(out)["signed_by"]
    monkeypatch.setenv("MODELREG_SIGNING_KEY", private.read_text())
    code, out, _ = cli("--db", db, "verify", record, "--json")
    assert code == 1 and json.loads(out)["signed_by"] == by_file


def test_a_token_create_still_prints_its_secret_once(
    cli: Callable[..., CliResult], tmp_path: Path
) -> None:
    """Data is not redacted: the one place a secret is meant to be shown still shows it."""
    db = f"sqlite:///{tmp_path / 'registry.db'}"
    code, out, err = cli("--db", db, "token", "create", "ci", "--role", "reader")
    assert code == 0 and out.strip().startswith("mr_") and REDACTED not in out
    assert "Bearer <secret>" in err
    code, out, _ = cli("--db", db, "token", "create", "ci2", "--role", "reader", "--json")
    assert code == 0 and json.loads(out)["secret"].startswith("mr_")


# -- the endpoint client: a server that echoes the token ---------------------------------


def _client(handler: Callable[[Any], Any], token: str) -> Any:
    import httpx

    from modelreg.validators.openai_client import OpenAIClient

    client = OpenAIClient("http://llm.test", token, time.monotonic() + 10, trust_env=False)
    client.http.close()
    client.http = httpx.Client(
        base_url="http://llm.test",
        headers={"Authorization": f"Bearer {token}"},
        transport=httpx.MockTransport(handler),
    )
    return client


@pytest.mark.parametrize("status", [401, 500])
def test_a_server_echoing_the_token_does_not_put_it_in_the_summary(status: int) -> None:
    import httpx

    from modelreg.validators.openai_client import EndpointUnavailable

    token = "tok-" + random_secrets.token_hex(4)  # not a known token shape: hidden as the token

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            status, text=f"refused {request.headers['authorization']} (token {token})"
        )

    client = _client(echo, token)
    with pytest.raises(EndpointUnavailable) as caught:
        client.get_json("/v1/models")
    assert_not_echoed(token, str(caught.value))
    assert f"HTTP {status}" in str(caught.value) and REDACTED in str(caught.value)


def test_a_streamed_error_echoing_the_token_is_hidden() -> None:
    import httpx

    from modelreg.validators.openai_client import EndpointUnavailable

    token = "tok-" + random_secrets.token_hex(6)

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"error": {"message": f"bad key {token}"}})

    client = _client(echo, token)
    with pytest.raises(EndpointUnavailable) as caught:
        client.generate("/v1/completions", {"prompt": "x"}, chat=False)
    assert_not_echoed(token, str(caught.value))
    assert "the server reported an error" in str(caught.value)


# -- ModelregError: what the HTTP server shows is redacted too ---------------------------


def test_a_modelreg_error_keeps_its_message_and_hint_redacted(tmp_path: Path) -> None:
    """The server renders ``exc.message`` and ``exc.hint`` (modelreg/server/app.py): both are
    redacted when the error is made, so its JSON error bodies cannot carry the key either."""
    pem = _pem(tmp_path)
    exc = InvalidInput(f"cannot use {pem!r}", f"hint: {pem}")
    assert_not_echoed(pem, exc.message, exc.hint or "", str(exc), repr(exc))
    assert exc.message.startswith(f"cannot use '{REDACTED}")


# -- redact_secrets ---------------------------------------------------------------------


def test_pem_blocks_are_hidden_whole_escaped_and_cut_short(tmp_path: Path) -> None:
    pem = _pem(tmp_path)
    for text in (
        f"bad key: {pem} — hint",
        f"bad key: {pem!r}",
        f"bad key: {json.dumps(pem)}",
        f"bad key: {pem[:70]}",  # a message cut at 70 characters
        pem.replace("PRIVATE KEY", "EC PRIVATE KEY"),
        pem.replace("\n", "\r\n"),
    ):
        shown = redact_secrets(text)
        assert_not_echoed(pem, shown)
        assert REDACTED in shown
    assert redact_secrets(f"a {pem} b").endswith(" b")  # what follows the block stays


def test_the_signing_key_is_hidden_only_when_it_is_key_material(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pem = _pem(tmp_path)
    lines = pem.splitlines()
    monkeypatch.setenv("MODELREG_SIGNING_KEY", pem)
    # A line of the key on its own (no armour left for the PEM pattern) is hidden too.
    assert_not_echoed(pem, redact_secrets(f"line 2 is {lines[1]}, line 3 {lines[2]}"))
    monkeypatch.setenv("MODELREG_SIGNING_KEY", "/run/secrets/ci-signing.pem")
    # A path is not a secret: the message must say which file was meant.
    assert redact_secrets("/run/secrets/ci-signing.pem: not found") == (
        "/run/secrets/ci-signing.pem: not found"
    )


def test_token_env_values_are_hidden_when_long_enough(monkeypatch: pytest.MonkeyPatch) -> None:
    note_token_env("TEST_SECRETS_TOKEN")
    long_token = "t0k-" + random_secrets.token_hex(30)
    monkeypatch.setenv("TEST_SECRETS_TOKEN", long_token)
    # Quoted only in part (a message cut at 40 characters): the part is hidden.
    assert (
        redact_secrets(f"ref '{long_token[:40]}…' is too long") == f"ref '{REDACTED}…' is too long"
    )
    assert redact_secrets(f"x{long_token[10:30]}y") == f"x{REDACTED}y"
    monkeypatch.setenv("TEST_SECRETS_TOKEN", "abcd1234efgh")
    assert redact_secrets("got abcd1234efgh back") == f"got {REDACTED} back"
    assert redact_secrets("got 'abcd1234efgh'") == f"got '{REDACTED}'"
    monkeypatch.setenv("TEST_SECRETS_TOKEN", "short")  # < 8 characters: not taken for one
    assert redact_secrets("a short word") == "a short word"


def test_the_targets_file_names_its_token_variables_without_being_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from modelreg.secrets import note_token_envs_in_file

    spec = tmp_path / "targets.yaml"
    spec.write_text("targets:\n  t: {endpoint: 'http://x', token_env: \"FILE_TOKEN_VAR\"}\n  : [\n")
    monkeypatch.setenv("FILE_TOKEN_VAR", "zzz-9876543210")
    note_token_envs_in_file(spec)
    note_token_envs_in_file(tmp_path / "missing.yaml")  # never raises
    note_token_envs_in_file(tmp_path)  # a directory: nothing read
    assert redact_secrets("zzz-9876543210") == REDACTED


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("admin:hunter22@db.example.com/reg", "admin:***@db.example.com/reg"),
        ("postgresql://u:p@ss/w?rd@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("at mysql://root:pw@h/db; redis://:pw2@h2", "at mysql://root:***@h/db; redis://:***@h2"),
        ("host=db password=s3cret", "host=db password=***"),
        ("Authorization: Bearer abcdefghijklmnop1234", f"Authorization: Bearer {REDACTED}"),
        ("token mr_" + "A" * 43 + " is revoked", f"token {REDACTED} is revoked"),
        # Not secrets: left alone.
        ("send it as: Authorization: Bearer <secret>", None),
        ("registry.example.com/llm/server:v1@sha256:" + "a" * 64, None),
        ("git@github.com:org/repo.git on host:8080", None),
        ("record 'rules/alpha' not found — list records with: modelreg list", None),
        ("MODELREG_SIGNING_KEY holds key material, not a path to a key file", None),
    ],
)
def test_redact_secrets_cases(text: str, shown: str | None) -> None:
    assert redact_secrets(text) == (text if shown is None else shown)
    assert redact_secrets(redact_secrets(text)) == redact_secrets(text)  # idempotent


@pytest.mark.parametrize(
    ("value", "material"),
    [
        ("/run/secrets/ci.pem", False),
        ("keys/ci-signing.pem", False),
        ("-----BEGIN PRIVATE KEY-----", True),
        ("line one\nline two", True),
        ("MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgTtytKdjGC893FMjQ", True),
        (base64.b64encode(b"\x30" * 90).decode(), True),
    ],
)
def test_what_counts_as_key_material(value: str, material: bool) -> None:
    assert looks_like_key_material(value) is material


def _hostile_texts() -> Iterable[str]:
    yield ""
    yield "\x00\udcff-----BEGIN"
    yield "-----END PRIVATE KEY-----"
    yield "x" * 100_000 + "-----BEGIN X-----" + "y" * 100_000


@pytest.mark.parametrize("text", list(_hostile_texts()), ids=["empty", "nul", "end", "long"])
def test_redact_secrets_never_raises(text: str) -> None:
    assert isinstance(redact_secrets(text), str)


_HYPOTHESIS_PEM = (
    ec.generate_private_key(ec.SECP256R1())
    .private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    .decode()
)


@given(start=st.integers(0, 10_000), length=st.integers(16, 200), joined=st.booleans())
@settings(max_examples=200, deadline=None)
def test_any_16_characters_of_the_signing_key_are_hidden(
    start: int, length: int, joined: bool
) -> None:
    """Wherever a message cuts the key — mid-line, across a line break, with the breaks taken
    out — no 16 characters of it survive, and the text around it does."""
    lines = _HYPOTHESIS_PEM.strip().splitlines()[1:-1]
    source = "".join(lines) if joined else "\n".join(lines)
    start %= len(source) - 16
    piece = source[start : start + length]
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("MODELREG_SIGNING_KEY", _HYPOTHESIS_PEM)
        shown = redact_secrets(f"before {piece} after")
    assert_not_echoed(piece, shown)
    assert shown.startswith("before ") and shown.endswith(" after")


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ("LLM_API_TOKEN", False),
        ("HF_TOKEN", False),
        ("OPENAI_API_KEY_FOR_THE_STAGING_CLUSTER_2024", False),  # one case: a name
        ("hf_" + "aB3" * 11, True),
        ("ghp_" + "x1" * 18, True),
        ("sk_live_" + "a1" * 12, True),
        ("Ab1" * 11, True),  # 33 characters mixing cases and digits
    ],
)
def test_what_counts_as_a_token_in_token_env(value: str, token: bool) -> None:
    from modelreg.deployed_unit import looks_like_token

    assert looks_like_token(value) is token
