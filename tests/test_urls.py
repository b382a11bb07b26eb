"""Passwords never reach a message: userinfo and query parameters, encoded or not, parseable
or not."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelreg.urls import redact_text, redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql://user:s3cret@db.example:5432/registry",
            "postgresql://user:***@db.example:5432/registry",
        ),
        (
            "postgresql+psycopg://user:p@ss/w?r#d@db:5432/reg",
            "postgresql+psycopg://user:***@db:5432/reg",
        ),
        (
            "postgresql://db/reg?sslmode=require&password=s3cret&sslpassword=k3y"
            "&passfile=/home/u/.pgpass&application_name=modelreg",
            "postgresql://db/reg?sslmode=require&password=***&sslpassword=***"
            "&passfile=***&application_name=modelreg",
        ),
        (
            "postgresql://h/db?user=u&PassWord=s3cret;pwd=s3cret",
            "postgresql://h/db?user=u&PassWord=***;pwd=***",
        ),
        ("postgresql://h/db?pass%77ord=s3cret", "postgresql://h/db?pass%77ord=***"),
        ("postgresql://db/reg?password=s3cret#part", "postgresql://db/reg?password=***#part"),
        ("postgresql://u:s3cret@[::1/reg", "postgresql://u:***@[::1/reg"),  # unparseable
        ("postgresql://:s3cret@h/d", "postgresql://:***@h/d"),
        ("postgresql://user@db/reg", "postgresql://user@db/reg"),
        ("sqlite:////home/u/registry.db", "sqlite:////home/u/registry.db"),
        # an OCI reference pinned to a digest: "@sha256:" is not the end of a userinfo
        (
            f"oci://127.0.0.1:5000/models/m:v1@sha256:{'a' * 64}",
            f"oci://127.0.0.1:5000/models/m:v1@sha256:{'a' * 64}",
        ),
        (
            f"oci://u:s3cret@reg.example/models/m@sha256:{'a' * 64}",
            f"oci://u:***@reg.example/models/m@sha256:{'a' * 64}",
        ),
        ("not a url", "not a url"),
        ("", ""),
    ],
)
def test_secrets_are_hidden_and_the_rest_is_kept(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@given(
    password=st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=4).filter(
        lambda p: "***" not in p
    ),
    query=st.sampled_from(["", "?sslmode=require"]),
)
def test_no_password_survives_whatever_it_contains(password: str, query: str) -> None:
    url = f"postgresql://user:{password}@db.example:5432/registry{query}"
    assert redact_url(url) == f"postgresql://user:***@db.example:5432/registry{query}"


def test_an_at_sign_in_a_query_value_hides_more_never_less() -> None:
    shown = redact_url("postgresql://user:s3cret@db/registry?application_name=me@host")
    assert shown == "postgresql://user:***@host"


def test_secrets_in_free_text_are_hidden() -> None:
    message = (
        "(psycopg.OperationalError) connection to postgresql://u:s3cret@h:5432/db failed: "
        "password authentication failed; conninfo host=h password=s3cret sslpassword='k 3y'"
    )
    shown = redact_text(message)
    assert "s3cret" not in shown and "k 3y" not in shown
    assert "postgresql://u:***@h:5432/db failed" in shown
    assert "password authentication failed" in shown and "sslpassword=***" in shown
