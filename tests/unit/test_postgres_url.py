"""The PostgreSQL store's URL and shipped migrations, read without a server: libpq's parameters pass as libpq
spells them, ours are taken out, a password is refused wherever it hides, and the migrations are numbered."""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict

from gateway.config import ConfigError, parse_config
from gateway.stores.postgres.schema import SCHEMA_VERSION, migrations
from gateway.stores.postgres.url import credentials_refusal, parse_url
from tests.support.configs import config_data
from tests.support.profiles import TENANTS


def test_the_url_keeps_libpq_spellings_and_takes_out_ours() -> None:
    parsed = parse_url("postgresql://gw@db:5433/app?sslmode=verify-full&sslrootcert=/ca.pem&schema=gw1&lock_lease=70")
    assert (parsed.schema, parsed.lease, parsed.timeout, parsed.pool_max) == ("gw1", 70.0, 5.0, 10)
    libpq = conninfo_to_dict(parsed.conninfo)
    assert {name: libpq.get(name) for name in ("user", "host", "port", "dbname", "sslmode", "sslrootcert")} == {
        "user": "gw",
        "host": "db",
        "port": "5433",
        "dbname": "app",
        "sslmode": "verify-full",
        "sslrootcert": "/ca.pem",
    }
    assert libpq["connect_timeout"] == "3"  # ours by default: libpq would wait forever
    assert not {"schema", "lock_lease", "timeout", "pool_max"} & set(libpq)
    assert conninfo_to_dict(parse_url("postgresql://gw@db/app?connect_timeout=9").conninfo)["connect_timeout"] == "9"
    spaced = parse_url("postgresql://gw@db/app?options=-c%20synchronous_commit%3Don&application_name=a+b")
    assert conninfo_to_dict(spaced.conninfo)["options"] == "-c synchronous_commit=on"
    assert conninfo_to_dict(spaced.conninfo)["application_name"] == "a+b"  # as libpq reads its own URL


@pytest.mark.parametrize(
    "url",
    ["postgresql://gw:secret@db/app", "postgres://gw:@db/app", "postgresql://gw@db/app?password=secret"],
)
def test_a_password_in_the_url_is_refused(url: str) -> None:
    assert credentials_refusal(url) is not None
    with pytest.raises(ValueError, match="PGPASSWORD"):
        parse_url(url)


def test_a_password_in_the_config_file_is_refused_naming_the_key(tmp_path: Path) -> None:
    data = config_data(TENANTS, tmp_path / "backend.db", store="postgresql://gw:secret@db/app", state_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"gateway\.store: a PostgreSQL URL in the config file must not carry"):
        parse_config(data)
    clean = config_data(TENANTS, tmp_path / "b.db", store="postgresql://gw@db/app?sslmode=require", state_dir=tmp_path)
    assert parse_config(clean).gateway.store.endswith("sslmode=require")


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("postgresql://gw@db/app?sslmdoe=require", "sslmdoe"),
        ("postgresql://gw@db/app?schema=Robert');DROP", "schema"),
        ("postgresql://gw@db/app?timeout=0", "timeout must be positive"),
        ("postgresql://gw@db/app?lock_lease=soon", "lock_lease must be a number"),
    ],
)
def test_a_bad_parameter_is_refused_naming_it(url: str, named: str) -> None:
    with pytest.raises(ValueError, match=named):
        parse_url(url)


def test_the_shipped_migrations_are_numbered_without_gaps() -> None:
    shipped = migrations()
    assert [migration.version for migration in shipped] == list(range(1, SCHEMA_VERSION + 1))
    assert "CREATE TABLE idempotency" in shipped[0].sql
