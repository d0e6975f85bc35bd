"""The audit stream's pure parts: the webhook signature, and a webhook with no secret refused at start."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from prometheus_client import CollectorRegistry, Counter

from gateway.audit.sinks import SinkError, open_feed
from gateway.config import AuditStreamSection, ConfigError, load_config, parse_config
from gateway.signing import signature

pytestmark = pytest.mark.anyio


def test_the_signature_covers_the_timestamp_and_the_body() -> None:
    mac = hmac.new(b"secret", b"1700000000.{}", hashlib.sha256).hexdigest()
    assert signature(b"secret", 1_700_000_000, b"{}") == f"t=1700000000,v1={mac}"
    assert signature(b"secret", 1_700_000_001, b"{}") != signature(b"secret", 1_700_000_000, b"{}")


async def test_a_webhook_whose_secret_is_not_set_is_refused_naming_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_SUCH_SECRET_VAR", raising=False)
    section = AuditStreamSection(webhook_url="http://127.0.0.1:9/hook", webhook_secret_env="NO_SUCH_SECRET_VAR")
    counter = Counter("t", "t", ["sink", "result"], registry=CollectorRegistry())
    with pytest.raises(SinkError, match=r"audit_stream\.webhook_secret_env"):
        async with open_feed(section, counter):
            pass


def test_a_webhook_needs_a_secret_variable_in_the_config() -> None:
    data = load_config().model_dump(by_alias=True, exclude_none=True)
    data["audit_stream"] = {"webhook_url": "https://siem.example/hook"}
    with pytest.raises(ConfigError, match="audit_stream"):
        parse_config(data)
