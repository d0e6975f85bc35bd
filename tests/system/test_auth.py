"""Identity over real HTTP with real tokens: JWT from a JWKS, static hashes, RFC 7662 introspection.

An identity provider (JWKS + introspection) and a recording proxy in front of the backend run in this test
process; the gateways and the backend are real processes. The proxy shows what the backend received.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jwt
import mcp.types as types
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.cli.serve import bind_refusal
from gateway.config import parse_config
from gateway.errors import AUTHORIZATION_META
from tests.support.asgi import serve_asgi
from tests.support.clients import INITIALIZE, POST_HEADERS, Answers, error_body, error_code, new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, http_backend, process
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
ISSUER = "https://idp.test"
BACKEND_CREDENTIAL = "Bearer gateway-own-backend-credential"


def private_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


KEY, OTHER_KEY = private_key(), private_key()


def pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def token(resource: str, *, client: str, scopes: str, key: rsa.RSAPrivateKey = KEY, **changes: Any) -> str:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": resource, "client_id": client, "sub": f"user-of-{client}", "scope": scopes}
    claims |= {"iat": now, "nbf": now - 5, "exp": now + 300} | changes
    return jwt.encode(claims, pem(key), algorithm="RS256", headers={"kid": "k1"})


@dataclass
class Recorder:
    """What crossed the proxy to the backend, and which tokens the gateway asked the identity provider about."""

    authorization: list[str | None] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    introspected: list[str] = field(default_factory=list)

    def calls(self) -> int:
        """Tool calls that reached the backend (the gateway's own pings, its liveness checks, are not counted)."""
        return self.methods.count("tools/call")


def identity_provider(active: dict[str, dict[str, Any]], recorder: Recorder) -> Starlette:
    public = jwt.algorithms.RSAAlgorithm.to_jwk(KEY.public_key(), as_dict=True) | {"kid": "k1", "use": "sig"}

    async def jwks(request: Request) -> JSONResponse:
        return JSONResponse({"keys": [public]})

    async def introspect(request: Request) -> JSONResponse:
        if request.headers.get("authorization") != httpx.BasicAuth("gw", "gw-secret")._auth_header:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        form = await request.form()
        recorder.introspected.append(str(form.get("token")))
        return JSONResponse(active.get(str(form.get("token")), {"active": False}))

    return Starlette(routes=[Route("/jwks.json", jwks), Route("/introspect", introspect, methods=["POST"])])


def recording_proxy(target: str, recorder: Recorder) -> Starlette:
    async def forward(request: Request) -> Response:
        recorder.authorization.append(request.headers.get("authorization"))
        body = await request.body()
        try:
            recorder.methods.append(str(json.loads(body).get("method")))
        except (ValueError, AttributeError):
            recorder.methods.append("")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in {"host", "content-length"}}
        async with httpx.AsyncClient(timeout=30) as http:
            answer = await http.request(request.method, target, content=await request.body(), headers=headers)
        keep = {k: v for k, v in answer.headers.items() if k.lower() in {"content-type", "mcp-session-id"}}
        return Response(answer.content, status_code=answer.status_code, headers=keep)

    return Starlette(routes=[Route("/mcp", forward, methods=["GET", "POST", "DELETE"])])


@dataclass
class World:
    db: Path
    recorder: Recorder
    jwt_url: str
    static_url: str
    introspection_url: str
    tokens: dict[str, str]


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture(scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    tmp = tmp_path_factory.mktemp("auth")
    db = tmp / "backend.db"
    idp_port, backend_port, proxy_port = free_port(), free_port(), free_port()
    ports = {"jwt": free_port(), "static": free_port(), "introspection": free_port()}
    urls = {name: f"http://127.0.0.1:{port}/mcp" for name, port in ports.items()}
    active = {
        "opaque-reader": {
            "active": True,
            "client_id": "opaque-app",
            "scope": "tenants:read",
            "aud": urls["introspection"],
            "iss": ISSUER,
        },
        "opaque-other-issuer": {
            "active": True,
            "client_id": "opaque-app",
            "scope": "tenants:read",
            "aud": urls["introspection"],
            "iss": "https://evil.test",
        },
        "opaque-expired": {"active": True, "client_id": "opaque-app", "scope": "tenants:read", "exp": 1},
        # Active, but issued for another API (no audience at all, or another one): not for this gateway.
        "opaque-no-audience": {"active": True, "client_id": "opaque-app", "scope": "tenants:read"},
        "opaque-other-api": {
            "active": True,
            "client_id": "opaque-app",
            "scope": "tenants:read",
            "aud": "https://other-api.test",
        },
    }
    recorder = Recorder()
    auth: dict[str, dict[str, Any]] = {
        "jwt": {"verifier": "jwt", "jwt": {"issuer": ISSUER, "jwks_url": f"http://127.0.0.1:{idp_port}/jwks.json"}},
        "static": {
            "verifier": "static",
            "tokens": [
                {"sha256": sha("static-reader"), "client_id": "static-reader", "scopes": ["tenants:read"]},
                {
                    "sha256": sha("static-admin"),
                    "client_id": "static-admin",
                    "scopes": ["tenants:read", "tenants:reset"],
                },
            ],
        },
        "introspection": {
            "verifier": "introspection",
            "introspection": {
                "endpoint": f"http://127.0.0.1:{idp_port}/introspect",
                "issuer": ISSUER,
                "client_id_env": "INTROSPECTION_ID",
                "client_secret_env": "INTROSPECTION_SECRET",
            },
        },
    }
    env = {
        **os.environ,
        "BACKEND_AUTH": BACKEND_CREDENTIAL,
        "INTROSPECTION_ID": "gw",
        "INTROSPECTION_SECRET": "gw-secret",
    }
    async with (
        serve_asgi(identity_provider(active, recorder), idp_port),
        http_backend(TENANTS, db, backend_port, *TENANTS.seed_demo),
        serve_asgi(recording_proxy(f"http://127.0.0.1:{backend_port}/mcp", recorder), proxy_port),
    ):
        gateways = []
        for name, port in ports.items():
            data = config_data(TENANTS, db, state_dir=tmp / name)
            data["backend"] = {
                **data["backend"],
                "transport": "http",
                "url": f"http://127.0.0.1:{proxy_port}/mcp",
                "headers_from_env": {"Authorization": "BACKEND_AUTH"},
            }
            data["auth"] = {"resource_url": urls[name], **auth[name]}
            if name == "static":
                data["tools"]["reset_tenant"]["hidden_when_unauthorized"] = False
            config = write_toml(data, tmp / f"{name}.toml")
            args = [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(port)]
            gateways.append(process(args, port, env=env))
        async with gateways[0], gateways[1], gateways[2]:
            yield World(db, recorder, urls["jwt"], urls["static"], urls["introspection"], {})


def client(url: str, bearer: str, era: str = "2025-11-25", answers: Answers | None = None) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {bearer}"}, timeout=30)
    mode = "legacy" if era == "2025-11-25" else "auto"
    return Client(streamable_http_client(url, http_client=http), mode=mode, elicitation_callback=answers)


@pytest.mark.parametrize(
    "bad",
    ["missing", "malformed", "expired", "not-yet-valid", "wrong-audience", "wrong-issuer", "bad-signature"],
)
async def test_a_bad_token_gets_401_and_no_backend_call(world: World, bad: str) -> None:
    url = world.jwt_url
    tokens = {
        "malformed": "not.a.jwt",
        "expired": token(
            url, client="a", scopes="tenants:read", exp=int(time.time()) - 120, iat=int(time.time()) - 400
        ),
        "not-yet-valid": token(url, client="a", scopes="tenants:read", nbf=int(time.time()) + 600),
        "wrong-audience": token("http://elsewhere.test/mcp", client="a", scopes="tenants:read"),
        "wrong-issuer": token(url, client="a", scopes="tenants:read", iss="https://evil.test"),
        "bad-signature": token(url, client="a", scopes="tenants:read", key=OTHER_KEY),
    }
    headers = dict(POST_HEADERS)
    if bad in tokens:
        headers["Authorization"] = f"Bearer {tokens[bad]}"
    before = world.recorder.calls(), TENANTS.write_count(world.db)
    async with httpx.AsyncClient() as http:
        response = await http.post(url, json=INITIALIZE, headers=headers)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
    assert (world.recorder.calls(), TENANTS.write_count(world.db)) == before


async def test_protected_resource_metadata_names_only_configured_authorization_servers(world: World) -> None:
    """Static tokens come from no authorization server: the metadata names none (never the gateway itself), so an
    OAuth-discovering host does not try to log in against the gateway."""
    async with httpx.AsyncClient() as http:
        response = await http.get(world.static_url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))
        refused = await http.post(world.static_url, json=INITIALIZE, headers=POST_HEADERS)
    body = response.json()
    assert body["resource"] == world.static_url
    assert "authorization_servers" not in body
    assert {"tenants:read", "tenants:reset"} <= set(body["scopes_supported"])
    assert "resource_metadata=" in refused.headers["www-authenticate"]


@pytest.mark.parametrize("verifier", ["jwt", "introspection"])
async def test_protected_resource_metadata_names_the_issuer_and_every_scope(world: World, verifier: str) -> None:
    url = world.jwt_url if verifier == "jwt" else world.introspection_url
    async with httpx.AsyncClient() as http:
        response = await http.get(url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"))
        rebound = await http.get(
            url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp"), headers={"Host": "rebind.example.com"}
        )
    body = response.json()
    assert body["resource"] == url
    assert body["authorization_servers"] == [ISSUER]
    assert {"tenants:read", "tenants:reset"} <= set(body["scopes_supported"])
    assert rebound.status_code == 421


async def test_tools_list_shows_each_caller_only_what_its_scopes_allow(world: World) -> None:
    reader = token(world.jwt_url, client="reader-app", scopes="tenants:read")
    admin = token(world.jwt_url, client="admin-app", scopes="tenants:read tenants:reset")
    async with client(world.jwt_url, reader) as c:
        reader_tools = {tool.name for tool in (await c.list_tools()).tools}
    async with client(world.jwt_url, admin) as c:
        admin_tools = {tool.name for tool in (await c.list_tools()).tools}
    assert reader_tools == {"list_tenants", "preview_tenant_reset"}
    assert admin_tools == {"list_tenants", "preview_tenant_reset", "reset_tenant"}


class CallAnswers(list[tuple[str, int, str, Any]]):
    """Every tools/call answer as the client received it: tool, HTTP status, content type and the JSON-RPC error
    (an SSE stream's last event, or the JSON body), the tool's name masked."""

    async def __call__(self, response: httpx2.Response) -> None:
        request = response.request
        if request.method != "POST" or json.loads(request.content).get("method") != "tools/call":
            return
        name = json.loads(request.content)["params"]["name"]
        await response.aread()
        kind = response.headers.get("content-type", "").split(";")[0]
        text = response.text
        if kind == "text/event-stream":
            text = [line for line in text.splitlines() if line.startswith("data:") and line[5:].strip()][-1][5:]
        error = json.loads(text)["error"]
        self.append((name, response.status_code, kind, json.dumps(error).replace(name, "NAME")))


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_a_hidden_tool_answers_exactly_like_an_unknown_one(world: World, era: str) -> None:
    """Same status, same content type (a hidden write tool gets no event stream), same error, name aside."""
    reader = token(world.jwt_url, client="reader-app", scopes="tenants:read")
    seen = CallAnswers()
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {reader}"}, timeout=30, event_hooks={"response": [seen]}
    )
    mode = "legacy" if era == "2025-11-25" else "auto"
    before = TENANTS.write_count(world.db)
    args = {"planId": "pl_AAAAAAAAAAAAAAAAAAAAAA", "idempotencyKey": new_key()}
    async with Client(streamable_http_client(world.jwt_url, http_client=http), mode=mode) as c:
        with pytest.raises(MCPError) as hidden:
            await c.call_tool("reset_tenant", args)
        with pytest.raises(MCPError) as unknown:
            await c.call_tool("reset_tenantz", args)
    assert hidden.value.code == unknown.value.code == types.INVALID_PARAMS
    assert hidden.value.message.replace("reset_tenant", "X") == unknown.value.message.replace("reset_tenantz", "X")
    assert [answer[0] for answer in seen] == ["reset_tenant", "reset_tenantz"]
    assert seen[0][1:] == seen[1][1:]
    assert TENANTS.write_count(world.db) == before


async def test_a_visible_tool_outside_the_scopes_is_forbidden_and_writes_nothing(world: World) -> None:
    before = TENANTS.write_count(world.db)
    async with client(world.static_url, "static-reader", answers=Answers()) as c:
        assert "reset_tenant" in {tool.name for tool in (await c.list_tools()).tools}
        plan = await preview(c, TENANTS)
        result = await c.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    assert error_code(result) == "forbidden"
    assert error_body(result)["details"] == {"missingScopes": ["tenants:reset"]}
    # Beside the code, a structured denial (SEP-2643): a replacement token holding the scope lets the call through.
    denial = (result.meta or {})[AUTHORIZATION_META]
    assert (denial["remediation"], denial["credentialDisposition"]) == ("available", "replacement")
    [needed] = denial["remediationHints"][0]["authorization_details"]
    assert (needed["identifier"], needed["privileges"]) == ("reset_tenant", ["tenants:reset"])
    assert TENANTS.write_count(world.db) == before


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
async def test_plans_and_keys_are_bound_to_the_caller(world: World, era: str) -> None:
    alice = token(world.jwt_url, client="alice-app", scopes="tenants:read tenants:reset")
    bob = token(world.jwt_url, client="bob-app", scopes="tenants:read tenants:reset")
    key = new_key()
    async with client(world.jwt_url, alice, era, Answers()) as a, client(world.jwt_url, bob, era, Answers()) as b:
        alice_plan = await preview(a, TENANTS)
        stolen = await b.call_tool("reset_tenant", {"planId": alice_plan["planId"], "idempotencyKey": new_key()})
        before = TENANTS.write_count(world.db)
        done = await a.call_tool("reset_tenant", {"planId": alice_plan["planId"], "idempotencyKey": key})
        replay_by_bob = await b.call_tool("reset_tenant", {"planId": alice_plan["planId"], "idempotencyKey": key})
        bob_plan = await preview(b, TENANTS, target=TENANTS.other)
        same_key_for_bob = await b.call_tool("reset_tenant", {"planId": bob_plan["planId"], "idempotencyKey": key})
        replay_by_alice = await a.call_tool("reset_tenant", {"planId": alice_plan["planId"], "idempotencyKey": key})
    assert error_code(stolen) == "plan_not_found"
    assert done.structured_content is not None and not done.structured_content["replayed"]
    assert error_code(replay_by_bob) == "plan_not_found"  # bob never sees alice's result
    assert same_key_for_bob.structured_content is not None and not same_key_for_bob.structured_content["replayed"]
    assert replay_by_alice.structured_content == {**done.structured_content, "replayed": True}
    assert TENANTS.write_count(world.db) == before + 2


async def test_introspected_tokens_are_checked_at_the_endpoint(world: World) -> None:
    async with client(world.introspection_url, "opaque-reader") as c:
        listed = await c.call_tool("list_tenants", {})
    assert not listed.is_error
    async with httpx.AsyncClient() as http:
        for bad in (
            "opaque-unknown",
            "opaque-expired",
            "opaque-no-audience",
            "opaque-other-api",
            "opaque-other-issuer",
        ):
            response = await http.post(
                world.introspection_url, json=INITIALIZE, headers={**POST_HEADERS, "Authorization": f"Bearer {bad}"}
            )
            assert response.status_code == 401


async def test_probes_and_metrics_answer_without_verifying_a_token(world: World) -> None:
    """Only /mcp verifies tokens: a probe carrying one costs no introspection call and is never refused."""
    base = world.introspection_url.removesuffix("/mcp")
    unseen = f"opaque-{uuid.uuid4()}"
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {unseen}"}) as http:
        answers = [(await http.get(f"{base}{path}")).status_code for path in ("/healthz", "/readyz", "/metrics")]
        assert unseen not in world.recorder.introspected
        refused = await http.post(world.introspection_url, json=INITIALIZE, headers=POST_HEADERS)
    assert answers == [200, 200, 200]
    assert refused.status_code == 401
    assert world.recorder.introspected.count(unseen) == 1


async def test_the_hosts_token_never_reaches_the_backend(world: World) -> None:
    admin = token(world.jwt_url, client="admin-app", scopes="tenants:read tenants:reset")
    async with client(world.jwt_url, admin, answers=Answers()) as c:
        plan = await preview(c, TENANTS)
        await c.call_tool("reset_tenant", {"planId": plan["planId"], "idempotencyKey": new_key()})
    async with client(world.static_url, "static-admin") as c:
        await c.call_tool("list_tenants", {})
    seen = world.recorder.authorization
    assert seen, "the backend was never called"
    assert set(seen) == {BACKEND_CREDENTIAL}


def test_serve_binds_beyond_loopback_only_with_auth_or_the_loud_flag() -> None:
    data = config_data(TENANTS, Path("unused.db"), state_dir=Path("unused"))
    no_auth = parse_config(data)
    with_auth = parse_config(
        {
            **data,
            "auth": {
                "verifier": "static",
                "resource_url": "https://gw.test/mcp",
                "tokens": [{"sha256": sha("x"), "client_id": "x"}],
            },
        }
    )
    assert bind_refusal("0.0.0.0", no_auth, insecure=False) is not None
    assert bind_refusal("127.0.0.1", no_auth, insecure=False) is None
    assert bind_refusal("0.0.0.0", no_auth, insecure=True) is None
    assert bind_refusal("0.0.0.0", with_auth, insecure=False) is None
