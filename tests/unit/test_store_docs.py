"""The stores' docstrings name what the stores make: every SQLite table, every Redis key family, every PostgreSQL
table; and the files pyproject.toml's comments point to exist."""

from __future__ import annotations

import ast
import re

from gateway.stores import postgres, redis, sqlite
from gateway.stores.postgres.schema import migrations
from gateway.stores.sqlite import schema as sqlite_schema
from tests.support.processes import ROOT


def _listed(docstring: str) -> set[str]:
    """The first word of each line indented as a listing (four spaces) in a docstring."""
    return {match.group(1) for match in re.finditer(r"^ {4}([\w:<>]+)", docstring, re.MULTILINE)}


def test_the_sqlite_docstring_lists_every_table_the_store_creates() -> None:
    created = set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", sqlite_schema.SCHEMA))
    assert {"plans", "idempotency", "approvals", "writes"} <= created  # the scan reads the schema
    assert sqlite.__doc__ is not None
    assert sorted(created - _listed(sqlite.__doc__)) == []


def test_the_postgres_docstring_lists_every_table_the_migrations_create() -> None:
    created = {
        name for migration in migrations() for name in re.findall(r"CREATE (?:UNLOGGED )?TABLE (\w+)", migration.sql)
    }
    assert {"plans", "idempotency", "locks", "audit"} <= created  # the scan reads the migrations
    assert postgres.__doc__ is not None
    assert sorted((created | {"schema_migrations"}) - _listed(postgres.__doc__)) == []


def test_the_redis_docstring_lists_every_key_family_the_store_names() -> None:
    families = {
        node.right.value.removesuffix(":")
        for module in sorted((ROOT / "gateway/stores/redis").glob("*.py"))
        for node in ast.walk(ast.parse(module.read_text()))
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.Add)
        and isinstance(node.left, ast.Attribute)
        and node.left.attr == "prefix"
        and isinstance(node.right, ast.Constant)
        and isinstance(node.right.value, str)
    }
    assert {"plan", "key", "bucket", "fence", "audit"} <= families  # the scan reads the code
    assert redis.__doc__ is not None
    listed = {name.split(":")[0] for name in _listed(redis.__doc__)}
    assert sorted(families - listed) == []


def test_every_file_a_pyproject_comment_names_exists() -> None:
    comments = [line.partition("#")[2] for line in (ROOT / "pyproject.toml").read_text().splitlines() if "#" in line]
    named = {
        path
        for comment in comments
        for path in re.findall(r"\b((?:gateway|bench|tests|legacy_backend)/[\w/.-]+)", comment)
    }
    named = {path.rstrip(".") for path in named if "/." not in path}  # hidden ones (bench/.venv-tools) are made by runs
    assert "gateway/http/answer_modes.py" in named  # the scan reads the comments
    assert sorted(path for path in named if not (ROOT / path).exists()) == []
