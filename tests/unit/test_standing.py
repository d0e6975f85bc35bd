"""What a task keeps of its caller's token, and the check made again when it resumes (gateway.identity.standing):
a static token by its hash, any other token sealed with the gateway's key (opened by every key, so a rotation
keeps live tasks; by no other), and a caller refused naming why (``caller_revoked``) when its credential, its
identity or its scopes no longer allow the tool. The system tier runs the same over real processes
(tests/system/test_task_callers.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from gateway.config import GatewayConfig, parse_config
from gateway.errors import ToolError
from gateway.identity.principal import Principal, encode
from gateway.identity.standing import CREDENTIAL, bearer_of, kept, opened, recheck
from tests.support.configs import config_data
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
OLD, NEW, OTHER = b"k" * 32, b"n" * 32, b"o" * 32
ALICE = encode(Principal(issuer=None, client="alice", subject=None))


def gateway_config(tmp: Path, auth: dict[str, Any]) -> GatewayConfig:
    data = config_data(TENANTS, tmp / "backend.db", state_dir=tmp / "state")
    data["auth"] = {"resource_url": "https://gw.example/mcp", **auth}
    return parse_config(data)


def static(scopes: list[str]) -> dict[str, Any]:
    entry = {"sha256": hashlib.sha256(b"alice-token").hexdigest(), "client_id": "alice", "scopes": scopes}
    return {"verifier": "static", "tokens": [entry]}


def test_a_token_is_kept_as_its_hash_or_sealed_never_in_clear(tmp_path: Path) -> None:
    static_config = gateway_config(tmp_path, static(["tenants:reset"]))
    jwks = {"issuer": "https://idp.example", "jwks_url": "https://idp.example/jwks.json"}
    jwt_config = gateway_config(tmp_path, {"verifier": "jwt", "jwt": jwks})
    assert kept(static_config.auth, "alice-token", [OLD]) == {"sha256": hashlib.sha256(b"alice-token").hexdigest()}
    sealed = kept(jwt_config.auth, "eyJ.secret.jwt", [OLD])
    assert sealed is not None and "eyJ.secret.jwt" not in str(sealed)
    assert sealed != kept(jwt_config.auth, "eyJ.secret.jwt", [OLD])  # a fresh nonce each time
    assert kept(jwt_config.auth, None, [OLD]) is None
    assert bearer_of({"authorization": "Bearer abc"}) == "abc"
    assert bearer_of({"authorization": "Basic abc"}) is None and bearer_of(None) is None


async def test_a_static_caller_stands_while_listed_with_the_scope_and_is_refused_otherwise(tmp_path: Path) -> None:
    credential = kept(gateway_config(tmp_path, static(["tenants:reset"])).auth, "alice-token", [OLD])
    identity: dict[str, Any] = {
        "client": "alice",
        "issuer": None,
        "subject": None,
        "scopes": ["tenants:reset"],
        CREDENTIAL: credential,
    }
    listed = gateway_config(tmp_path, static(["tenants:read", "tenants:reset"]))
    stands = await recheck(listed, ALICE, identity, "reset_tenant", [OLD])
    assert stands["scopes"] == ["tenants:read", "tenants:reset"]  # its scopes as the config gives them now
    reasons = []
    for config, caller, kept_identity in (
        (gateway_config(tmp_path, static(["tenants:read"])), ALICE, identity),  # the scope is gone
        (gateway_config(tmp_path, {**static([]), "tokens": [{"sha256": "0" * 64, "client_id": "x"}]}), ALICE, identity),
        (listed, encode(Principal(None, "mallory", None)), identity),  # another caller's task
        (listed, ALICE, {key: value for key, value in identity.items() if key != CREDENTIAL}),  # nothing kept
    ):
        with pytest.raises(ToolError) as refused:
            await recheck(config, caller, kept_identity, "reset_tenant", [OLD])
        assert refused.value.wire_code == "caller_revoked"
        reasons.append((refused.value.details or {})["reason"])
    assert reasons == ["scope_missing", "credential_rejected", "another_caller", "credential_rejected"]
    assert await recheck(listed, "local", {}, "reset_tenant", [OLD]) == {}  # no token: the local caller


async def test_a_sealed_token_opens_under_a_rotated_key_and_under_no_other(tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    pem = tmp_path / "idp.pem"
    pem.write_bytes(key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    config = gateway_config(
        tmp_path, {"verifier": "jwt", "jwt": {"issuer": "https://idp.example", "public_key_file": str(pem)}}
    )
    sealed = kept(config.auth, "not-a-jwt", [OLD])
    assert sealed is not None
    identity: dict[str, Any] = {"client": "alice", "issuer": "https://idp.example", "scopes": [], CREDENTIAL: sealed}
    assert opened(sealed["sealed"], [NEW, OLD]) == "not-a-jwt"  # a rotation keeps it
    assert opened(sealed["sealed"], [OTHER]) is None and opened("garbage", [OLD]) is None
    with pytest.raises(ToolError) as refused:  # it opens, and the verifier refuses what it holds: not a JWT
        await recheck(config, ALICE, identity, "reset_tenant", [NEW, OLD])
    assert (refused.value.details or {})["reason"] == "credential_rejected"
