"""The SQLite store's tables, made when the file is opened; a file made by an older version gets the columns added
since (no migration step: SQLite is one process's file, and ``CREATE ... IF NOT EXISTS`` is idempotent)."""

from __future__ import annotations

import sqlite3

SCHEMA = """
CREATE TABLE IF NOT EXISTS plans (
    plan_id TEXT PRIMARY KEY, body TEXT NOT NULL, in_use_by TEXT, purge_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS plans_purge ON plans (purge_at);
CREATE TABLE IF NOT EXISTS idempotency (
    caller TEXT NOT NULL, key TEXT NOT NULL, plan_id TEXT NOT NULL, target TEXT NOT NULL,
    state TEXT NOT NULL, result TEXT, purge_at REAL NOT NULL, tool TEXT, version_before TEXT,
    PRIMARY KEY (caller, key));
CREATE INDEX IF NOT EXISTS idempotency_purge ON idempotency (purge_at);
CREATE TABLE IF NOT EXISTS nonces (nonce TEXT PRIMARY KEY, purge_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS audit (id INTEGER PRIMARY KEY AUTOINCREMENT, entry TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS approvals (
    approval_id TEXT PRIMARY KEY, body TEXT NOT NULL, rev INTEGER NOT NULL, expires_at REAL NOT NULL,
    requested_at REAL NOT NULL, purge_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS approvals_expiry ON approvals (expires_at);
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY, body TEXT NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS writes (scope TEXT NOT NULL, at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS writes_scope ON writes (scope, at);
CREATE TABLE IF NOT EXISTS tasks (
    task_id TEXT PRIMARY KEY, body TEXT NOT NULL, caller TEXT NOT NULL, key TEXT NOT NULL, status TEXT NOT NULL,
    rev INTEGER NOT NULL, created_at REAL NOT NULL, expires_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS tasks_key ON tasks (caller, key);
CREATE INDEX IF NOT EXISTS tasks_live ON tasks (status, expires_at);
CREATE TABLE IF NOT EXISTS passkeys (
    credential_id TEXT PRIMARY KEY, body TEXT NOT NULL, rev INTEGER NOT NULL, created_at REAL NOT NULL);
"""
ADDED_COLUMNS = {"idempotency": ("tool TEXT", "version_before TEXT"), "writes": ("rows INTEGER NOT NULL DEFAULT 0",)}
"""Columns added after the first release: a file made before them gets them at open."""


def create_tables(db: sqlite3.Connection) -> None:
    """Make whatever tables and columns the file lacks."""
    db.executescript(SCHEMA)
    for table, columns in ADDED_COLUMNS.items():
        present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        for column in columns:
            if column.split()[0] not in present:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {column}")
