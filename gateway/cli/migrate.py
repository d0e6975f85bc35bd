"""``mcp-safety-gateway migrate [--config F]``, and the schema check ``serve``, ``check`` and ``audit`` make first.

Only the PostgreSQL store has a schema to migrate (gateway/stores/postgres/schema.py): SQLite makes its tables
when it opens its file, Redis needs none. ``migrate`` is the operator's step, run once per upgrade from any
machine that has the config; it is idempotent and refuses a database migrated by a newer gateway. ``serve``,
``check`` and ``audit`` refuse, in one sentence naming gateway.store, a PostgreSQL store whose schema version is
not this gateway's (nothing migrated yet, an older one, a newer one), before they touch anything.
"""

from __future__ import annotations

import sys

from gateway.config import GatewayConfig

PROGRAM = "mcp-safety-gateway migrate"


async def run(config: GatewayConfig) -> int:
    """The ``migrate`` subcommand; the exit code (2: refused, 1: the server failed)."""
    from gateway.config.store_url import is_postgres

    store = config.gateway.store
    if not is_postgres(store):
        kind = store.partition(":")[0]
        print(f"nothing to migrate: gateway.store is a {kind} store, which makes what it needs when it opens")
        return 0
    import psycopg

    from gateway.stores.postgres.schema import SCHEMA_VERSION, MigrationRefused, migrate

    try:
        was, applied = await migrate(store)
    except (MigrationRefused, ValueError) as exc:
        print(f"{PROGRAM}: {exc}", file=sys.stderr)
        return 2
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        print(f"{PROGRAM}: the PostgreSQL server failed ({type(exc).__name__}: {first})", file=sys.stderr)
        return 1
    if not applied:
        print(f"schema is at version {SCHEMA_VERSION}: nothing to do")
    else:
        print(f"migrated from version {was} to {SCHEMA_VERSION}: {', '.join(applied)}")
    return 0


async def schema_refusal(config: GatewayConfig) -> str | None:
    """Why this gateway cannot run on its store's schema (a sentence naming gateway.store), or None (also for
    every store that has no schema)."""
    from gateway.config.store_url import is_postgres

    if not is_postgres(config.gateway.store):
        return None
    from gateway.stores.postgres.schema import schema_refusal as refusal

    return await refusal(config.gateway.store)
