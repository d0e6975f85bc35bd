"""Every refusal a config file can meet names a real key of that file.

Each case edits the built-in config as a person would edit its TOML, and the refusal's first line must begin with
the key the case expects, a key that exists in the edited file (or, for a key the refusal asks for, whose table
does). Together the cases reach every ``raise ValueError`` in gateway/config/: a validator added without a case
here fails ``test_every_refusal_in_the_config_modules_is_reached``.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import tomllib
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import gateway.config
from gateway.config import DEFAULT_CONFIG, ConfigError, GatewayConfig, parse_config
from gateway.config.expressions import MISSING, at_path

Data = dict[str, Any]
CONFIG_DIR = Path(gateway.config.__file__).parent
SHA = hashlib.sha256(b"approver-token").hexdigest()
ISSUER = "https://login.example.com"
HINTS = {"read_only": True, "destructive": False, "idempotent": True, "open_world": False}
WRITES = {"read_only": False, "destructive": True, "idempotent": False, "open_world": False}


def default() -> Data:
    """The built-in config's TOML, as a file an operator edits."""
    data: Data = tomllib.loads(DEFAULT_CONFIG.read_text(encoding="utf-8"))
    return data


def page(data: Data, **approvals: Any) -> Data:
    """An approval page with one approver token, and reset_tenant asking people on it."""
    data["approvals"] = {
        "public_url": "http://127.0.0.1:8080",
        "tokens": [{"sha256": SHA, "subject": "bob"}],
        **approvals,
    }
    data["tools"]["reset_tenant"]["confirm"] = "url"
    return data


def oidc(data: Data, **approvals: Any) -> Data:
    """Approvers who sign in at an identity provider."""
    return page(data, **{"login": "oidc", "tokens": [], "oidc": {"client_id": "page"}, **approvals})


def rules(data: Data, *added: Data) -> Data:
    """reset_tenant's approval rules."""
    data["tools"]["reset_tenant"]["approval"] = [
        {"name": f"r{n}", "when": "true", "mode": "url", **rule} for n, rule in enumerate(added)
    ]
    return data


def status(data: Data, **tool: Any) -> Data:
    """A pass-through tool ``status`` of the backend."""
    data["tools"]["status"] = {"kind": "passthrough", "description": "Status.", "annotations": dict(HINTS), **tool}
    return data


def two_backends(data: Data) -> Data:
    data["backends"] = {"other": {"command": "other-backend"}}
    return data


def static_auth(data: Data, **token: Any) -> Data:
    entry = {key: value for key, value in {"sha256": SHA, "client_id": "agent", **token}.items() if value is not None}
    data["auth"] = {"verifier": "static", "resource_url": "https://gw.example.com/mcp", "tokens": [entry]}
    return data


def preview(data: Data) -> Data:
    tool: Data = data["tools"]["preview_tenant_reset"]
    return tool


def target(data: Data) -> Data:
    table: Data = preview(data)["target"]
    return table


def lookup(data: Data) -> Data:
    table: Data = data["lookups"]["fixtures"]
    return table


def backend(data: Data) -> Data:
    table: Data = data["backend"]
    return table


def tool(name: str) -> Callable[[Data], Data]:
    def pick(data: Data) -> Data:
        table: Data = data["tools"][name]
        return table

    return pick


def setting(where: Callable[[Data], Data], **values: Any) -> Callable[[Data], Data]:
    """An edit: set these keys in the table ``where`` picks (a value of None removes the key)."""

    def change(data: Data) -> Data:
        table = where(data)
        for key, value in values.items():
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        return data

    return change


def section(name: str, **values: Any) -> Callable[[Data], Data]:
    def change(data: Data) -> Data:
        data[name] = {**data.get(name, {}), **values}
        return data

    return change


def then(*changes: Callable[[Data], Data]) -> Callable[[Data], Data]:
    def change(data: Data) -> Data:
        for step in changes:
            data = step(data)
        return data

    return change


def statements(data: Data) -> Data:
    """A statement source ``db`` on the backend, and its query, preview and execute tools."""
    data["statements"] = {
        "db": {"tool": "execute_sql", "dialect": "postgres", "answers": "dbhub", "tables": ["tenants"]}
    }
    data["tools"]["query"] = {"kind": "statement_query", "statements": "db"}
    data["tools"]["preview_statement"] = {"kind": "statement_preview", "statements": "db"}
    data["tools"]["execute_statement"] = {"kind": "statement_execute", "preview": "preview_statement"}
    return data


reset, lists = tool("reset_tenant"), tool("list_tenants")
execute = tool("execute_statement")
jwt = {"verifier": "jwt", "resource_url": "https://gw.example.com/mcp"}

CASES: dict[str, tuple[Callable[[Data], Data], str]] = {
    # gateway/config/statements.py: statement-executing tools
    "a table listed twice": (
        then(statements, setting(lambda d: d["statements"]["db"], tables=["tenants", "tenants"])),
        "statements.db.tables",
    ),
    "an allowed table that is no table name": (
        then(statements, setting(lambda d: d["statements"]["db"], tables=["tenants; x"])),
        "statements.db",
    ),
    "a statement tool naming no statements": (
        then(statements, setting(tool("query"), statements="nothing")),
        "tools.query.statements",
    ),
    "no class to execute": (then(statements, setting(execute, classes=[])), "tools.execute_statement.classes"),
    "an execute tool whose preview is no statement preview": (
        then(statements, setting(execute, preview="query")),
        "tools.execute_statement.preview",
    ),
    "ddl without four eyes to approve it": (
        then(statements, setting(execute, classes=["delete", "ddl"])),
        "tools.execute_statement.classes",
    ),
    "a planned write whose preview is a statement preview": (
        then(statements, setting(reset, preview="preview_statement")),
        "tools.reset_tenant.preview",
    ),
    "the statement tool passed through": (
        then(statements, lambda d: status(d, source="execute_sql")),
        "tools.status.source",
    ),
    # gateway/config/__init__.py: references between the tables
    "unknown lookup": (
        setting(lambda d: preview(d)["inputs"]["fixture"], enum_from="nothing"),
        "tools.preview_tenant_reset.inputs.fixture.enum_from",
    ),
    "no backend": (lambda d: (d.pop("backend"), d)[1], "backend"),
    "backends.default beside [backend]": (section("backends", default={"command": "x"}), "backends.default"),
    "a backend's odd name": (section("backends", **{"an odd name": {"command": "x"}}), "backends.an odd name"),
    "unknown backend": (setting(lists, backend="nowhere"), "tools.list_tenants.backend"),
    "several backends, none named": (two_backends, "tools.list_tenants.backend"),
    "a write off its preview's backend": (
        then(
            two_backends,
            *(setting(tool(name), backend="default") for name in ("list_tenants", "preview_tenant_reset")),
            setting(lookup, backend="default"),
            setting(reset, backend="other"),
        ),
        "tools.reset_tenant.backend",
    ),
    "the god-tool passed through": (lambda d: status(d, source="manage_tenant"), "tools.status.source"),
    "one tool decided twice": (
        then(
            lambda d: status(d, source="status"),
            lambda d: (d["tools"].__setitem__("status2", {**d["tools"]["status"], "annotations": dict(WRITES)}), d)[1],
        ),
        "tools.status2.source",
    ),
    "preview names no preview": (setting(reset, preview="list_tenants"), "tools.reset_tenant.preview"),
    "payload names no value": (
        setting(lambda d: reset(d)["call"]["payload"], id="{nothing}"),
        "tools.reset_tenant.call.payload",
    ),
    "result names no summary field": (
        setting(lambda d: reset(d)["result"], other="other"),
        "tools.reset_tenant.result.other",
    ),
    "notify names no webhook": (
        lambda d: rules(page(d), {"mode": "form"}, {"name": "hook-ok", "mode": "url", "notify": "nobody"}),
        "tools.reset_tenant.approval.1.notify",
    ),
    "passkeys on an IP address": (lambda d: page(d, passkey="required"), "approvals.passkey"),
    "passkeys without a page address": (
        lambda d: setting(reset, passkey="required")(page(d, public_url=None) | {}),
        "tools.reset_tenant.passkey",
    ),
    "url mode without approvers": (setting(reset, confirm="url"), "tools.reset_tenant.confirm"),
    "oidc without an approver rule": (
        lambda d: oidc(d, oidc={"client_id": "page", "issuer": ISSUER}),
        "tools.reset_tenant.confirm",
    ),
    "four eyes without auth": (lambda d: setting(reset, four_eyes=True)(page(d)), "tools.reset_tenant.four_eyes"),
    "oidc without an issuer": (
        lambda d: oidc(d, approvers={"subjects": ["bob"]}),
        "approvals.oidc.issuer",
    ),
    "four eyes across identity spaces": (
        lambda d: setting(reset, four_eyes=True)(page(static_auth(d, issuer=ISSUER))),
        "tools.reset_tenant.four_eyes",
    ),
    "approvers counted across identity spaces": (
        lambda d: setting(reset, approvers=2)(
            page(
                d,
                tokens=[{"sha256": SHA, "subject": "bob"}, {"sha256": "0" * 64, "subject": "carol", "issuer": ISSUER}],
            )
        ),
        "tools.reset_tenant.approvers",
    ),
    "four eyes with an issuer-less introspection": (
        lambda d: setting(reset, four_eyes=True)(
            page(
                section(
                    "auth",
                    verifier="introspection",
                    resource_url="https://gw.example.com/mcp",
                    introspection={"endpoint": "https://login.example.com/introspect"},
                )(d)
            )
        ),
        "tools.reset_tenant.four_eyes",
    ),
    # gateway/config/approvals.py
    "a rule that does not parse": (lambda d: rules(d, {"when": "1 +"}), "tools.reset_tenant.approval.0.when"),
    "a rule naming what it cannot read": (
        lambda d: rules(d, {"when": "nobody == 1"}),
        "tools.reset_tenant.approval.0.when",
    ),
    "a rule's approvers without url": (
        lambda d: rules(d, {"mode": "form", "approvers": 2}),
        "tools.reset_tenant.approval.0",
    ),
    "an approver claim without values": (lambda d: page(d, approvers={"claim": "groups"}), "approvals.approvers"),
    "approver claims without when": (
        lambda d: page(d, approvers={"subjects": ["bob"], "claims": {"dept": "string"}}),
        "approvals.approvers",
    ),
    "approver claims as a list of names": (
        lambda d: page(d, approvers={"when": 'approver.claims.dept != "x"', "claims": ["dept"]}),
        "approvals.approvers.claims",
    ),
    "an approver condition reading an undeclared claim": (
        lambda d: page(d, approvers={"when": 'approver.claims.dept != "x"'}),
        "approvals.approvers.when",
    ),
    "an approver condition comparing across types": (
        lambda d: page(d, approvers={"when": "approver.claims.dept != 5", "claims": {"dept": "string"}}),
        "approvals.approvers.when",
    ),
    "an approver condition combining across types": (
        lambda d: page(d, approvers={"when": 'approver.claims.level < "3"', "claims": {"level": "int"}}),
        "approvals.approvers.when",
    ),
    "page_listen not HOST:PORT": (lambda d: page(d, page_listen="8080"), "approvals.page_listen"),
    "page_listen beyond loopback": (lambda d: page(d, page_listen="0.0.0.0:8080"), "approvals.page_listen"),
    "oidc login without its table": (lambda d: page(d, login="oidc"), "approvals"),
    "a plain-http webhook": (
        lambda d: page(d, webhooks={"hook": {"url": "http://hooks.example.com/"}}),
        "approvals.webhooks.hook.url",
    ),
    "a plain-http public_url": (lambda d: page(d, public_url="http://gw.example.com"), "approvals.public_url"),
    # gateway/config/face.py, kinds.py, mapping.py, passthrough.py
    "read-only and destructive": (
        lambda d: status(d, annotations={**HINTS, "destructive": True}),
        "tools.status.annotations",
    ),
    "default_limit past max_limit": (setting(lists, default_limit=50, max_limit=40), "tools.list_tenants"),
    "two target inputs": (
        setting(lambda d: preview(d)["inputs"]["fixture"], target=True),
        "tools.preview_tenant_reset",
    ),
    "a summary key naming no input": (
        setting(lambda d: preview(d)["summary"]["rowsInserted"], key="nothing"),
        "tools.preview_tenant_reset",
    ),
    "an input that is a summary field": (
        setting(lambda d: preview(d)["summary"], fixture={"target": "rows"}),
        "tools.preview_tenant_reset",
    ),
    "version_output clashing": (setting(target, version_output="rowsDeleted"), "tools.preview_tenant_reset"),
    "a message naming no value": (setting(preview, message="Delete {nothing}?"), "tools.preview_tenant_reset"),
    "approvers without url": (setting(reset, approvers=2), "tools.reset_tenant"),
    "two rules of one name": (lambda d: rules(d, {"name": "same"}, {"name": "same"}), "tools.reset_tenant"),
    "a lookup with two sources": (setting(lookup, values={"empty": 0}), "lookups.fixtures"),
    "a lookup key without value": (setting(lookup, key="id"), "lookups.fixtures"),
    "inline values read as a list": (
        setting(lookup, call=None, values={"empty": 0}, key="id", value="rows"),
        "lookups.fixtures",
    ),
    "get.payload naming more": (
        setting(lambda d: target(d)["get"]["payload"], fixture="{fixture}"),
        "tools.preview_tenant_reset.target",
    ),
    "a noun spelling another code": (setting(target, noun="plan"), "tools.preview_tenant_reset.target.noun"),
    "a summary field with two sources": (
        setting(lambda d: preview(d)["summary"]["rowsDeleted"], lookup="fixtures"),
        "tools.preview_tenant_reset.summary.rowsDeleted",
    ),
    "a summary lookup without key": (
        setting(lambda d: preview(d)["summary"]["rowsInserted"], key=None),
        "tools.preview_tenant_reset.summary.rowsInserted",
    ),
    "god-tool override on a read": (lambda d: status(d, unsafe_republish_god_tool=True), "tools.status"),
    "confirm on a read": (lambda d: status(d, confirm="typed"), "tools.status"),
    "typed without target_argument": (lambda d: status(d, annotations=dict(WRITES), confirm="typed"), "tools.status"),
    "a schema that is no object": (lambda d: status(d, input_schema={"type": "string"}), "tools.status"),
    "a risk against the hints": (lambda d: status(d, risk={"category": "destroy"}), "tools.status"),
    # gateway/config/sections.py
    "a PostgreSQL password in the file": (section("gateway", store="postgresql://gw:secret@db/gw"), "gateway.store"),
    "an unsigned audit webhook": (section("audit_stream", webhook_url="https://audit.example.com/"), "audit_stream"),
    "a symmetric JWT algorithm": (
        section("auth", **jwt, jwt={"issuer": ISSUER, "jwks_url": f"{ISSUER}/jwks", "algorithms": ["HS256"]}),
        "auth.jwt.algorithms",
    ),
    "two JWT key sources": (
        section("auth", **jwt, jwt={"issuer": ISSUER, "jwks_url": f"{ISSUER}/jwks", "public_key_file": "k.pem"}),
        "auth.jwt",
    ),
    "a plain-http JWKS": (
        section("auth", **jwt, jwt={"issuer": ISSUER, "jwks_url": "http://login.example.com/jwks"}),
        "auth.jwt.jwks_url",
    ),
    "a verifier without resource_url": (section("auth", verifier="static"), "auth"),
    "static without tokens": (section("auth", verifier="static", resource_url="https://gw.example.com/mcp"), "auth"),
    "jwt without its table": (section("auth", **jwt), "auth"),
    "introspection without its table": (
        section("auth", verifier="introspection", resource_url="https://gw.example.com/mcp"),
        "auth",
    ),
    "a token hash given twice": (lambda d: static_auth(d, sha256_env="PATH"), "auth.tokens.0"),
    "a token hash from an unset variable": (
        lambda d: static_auth(d, sha256=None, sha256_env="GATEWAY_TEST_NO_SUCH_VARIABLE"),
        "auth.tokens.0",
    ),
    "a token hash variable holding no hash": (
        lambda d: static_auth(d, sha256=None, sha256_env="PATH"),
        "auth.tokens.0",
    ),
    "a wildcard host": (section("http", allowed_hosts=["*"]), "http.allowed_hosts"),
    "a proxy that is no address": (section("http", trusted_proxies=["proxy.example.com"]), "http.trusted_proxies"),
    "every peer a proxy": (section("http", trusted_proxies=["0.0.0.0/0"]), "http.trusted_proxies"),
    "stdio without a command": (setting(backend, command=None), "backend"),
    "http without a url": (setting(backend, transport="http"), "backend"),
}


def refusal(data: Data) -> str:
    with pytest.raises(ConfigError) as raised:
        parse_config(data)
    return str(raised.value)


def resolves(data: Data, key: str) -> bool:
    """Whether a dotted key names a value of the data, or (for a key the refusal asks for) its table does."""
    return at_path(data, key) is not MISSING or at_path(data, key.rpartition(".")[0]) is not MISSING


@pytest.mark.parametrize("case", list(CASES))
def test_a_refusal_names_a_real_key_of_the_file(case: str) -> None:
    change, key = CASES[case]
    data = change(default())
    first = refusal(copy.deepcopy(data)).splitlines()[1].strip()
    assert first.startswith((f"{key}:", f"{key} ")), first
    assert resolves(data, key), (key, first)
    said = first[len(key) :].lstrip(": ")
    assert not said.startswith(key), f"the key is said twice: {first}"


NOT_FROM_A_FILE = {
    ("store_url.py", "store_password"): "reads the environment when a store opens, not when a file is loaded",
}
"""Refusals in gateway/config/ that no config file can meet, each with the reason."""


def raise_sites() -> set[tuple[str, int]]:
    """Every ``raise ValueError`` in gateway/config/ (file name, line), but those of NOT_FROM_A_FILE."""
    sites = set()
    for module in CONFIG_DIR.glob("*.py"):
        for function in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if not isinstance(function, ast.FunctionDef) or (module.name, function.name) in NOT_FROM_A_FILE:
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Raise) and node.exc is not None:
                    called = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                    if isinstance(called, ast.Name) and called.id == "ValueError":
                        sites.add((module.name, node.lineno))
    return sites


def reached(data: Data) -> set[tuple[str, int]]:
    """The raise sites (file name, line) a config's refusal came from."""
    try:
        GatewayConfig.model_validate(data)
    except ValidationError as exc:
        found = set()
        for error in exc.errors():
            raised = (error.get("ctx") or {}).get("error")
            if isinstance(raised, ValueError) and raised.__traceback__ is not None:
                frame = traceback.extract_tb(raised.__traceback__)[-1]
                found.add((Path(frame.filename).name, frame.lineno or 0))
        return found
    return set()


def test_every_refusal_in_the_config_modules_is_reached() -> None:
    seen: set[tuple[str, int]] = set()
    for change, _ in CASES.values():
        seen |= reached(change(default()))
    assert raise_sites() - seen == set()
