"""The audit stream for a SIEM: every stored entry goes to a JSONL file and to an HMAC-signed webhook, a webhook
that is slow or down never holds up or fails a call, and a webhook without its secret stops ``serve`` at start."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.audit.display import entry_json
from gateway.config import parse_config
from gateway.runtime import Gateway
from gateway.signing import SIGNATURE_HEADER
from tests.support.asgi import serve_asgi
from tests.support.clients import Answers, connect, new_key, preview, running_gateway
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio

SECRET = "a-webhook-secret-for-the-siem-0123"
SECRET_ENV = "TEST_AUDIT_WEBHOOK_SECRET"


@dataclass
class Siem:
    """A webhook receiver that checks each signature and can be held back."""

    bodies: list[dict[str, Any]] = field(default_factory=list)
    bad_signatures: int = 0
    gate: anyio.Event = field(default_factory=anyio.Event)

    def __post_init__(self) -> None:
        self.arrivals, self.arrived = anyio.create_memory_object_stream[None](100)

    async def wait_for(self, count: int) -> None:
        """Until ``count`` entries have arrived (60 s at most)."""
        with anyio.fail_after(60):
            while len(self.bodies) < count:
                await self.arrived.receive()

    def app(self) -> Starlette:
        async def hook(request: Request) -> Response:
            await self.gate.wait()
            body = await request.body()
            stamp, _, mac = request.headers[SIGNATURE_HEADER].partition(",v1=")
            expected = hmac.new(SECRET.encode(), f"{stamp.removeprefix('t=')}.".encode() + body, hashlib.sha256)
            if not hmac.compare_digest(expected.hexdigest(), mac):
                self.bad_signatures += 1
                return Response(status_code=401)
            self.bodies.append(json.loads(body))
            self.arrivals.send_nowait(None)
            return Response(status_code=204)

        return Starlette(routes=[Route("/hook", hook, methods=["POST"])])


def streaming_config(tmp: Path, webhook_port: int) -> dict[str, Any]:
    data = config_data(
        TENANTS, tmp / "backend.db", *TENANTS.seed_demo, store=f"sqlite:{tmp}/gateway.db", state_dir=tmp / "state"
    )
    data["audit_stream"] = {
        "file": str(tmp / "siem" / "audit.jsonl"),
        "webhook_url": f"http://127.0.0.1:{webhook_port}/hook",
        "webhook_secret_env": SECRET_ENV,
    }
    return data


async def decisions(gw: Gateway) -> None:
    """An applied reset, its replay, and a declined one: three audit entries."""
    async with connect(gw, "2025-11-25", Answers()) as client:
        args = {"planId": (await preview(client, TENANTS))["planId"], "idempotencyKey": new_key()}
        assert not (await client.call_tool(TENANTS.write_tool, args)).is_error
        assert not (await client.call_tool(TENANTS.write_tool, args)).is_error
    async with connect(gw, "2025-11-25", Answers("decline")) as client:
        args = {"planId": (await preview(client, TENANTS, TENANTS.other))["planId"], "idempotencyKey": new_key()}
        assert (await client.call_tool(TENANTS.write_tool, args)).is_error


async def test_every_stored_entry_reaches_the_file_and_the_signed_webhook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    siem, port = Siem(), free_port()
    siem.gate.set()
    async with serve_asgi(siem.app(), port), running_gateway(parse_config(streaming_config(tmp_path, port))) as gw:
        await decisions(gw)
        await siem.wait_for(3)
        stored = [entry_json(entry) async for entry in gw.store.audit_entries()]
    lines = [json.loads(line) for line in (tmp_path / "siem" / "audit.jsonl").read_text().splitlines()]
    assert [entry["outcome"] for entry in stored] == ["applied", "replayed", "refused"]
    assert lines == stored
    assert siem.bodies == stored
    assert siem.bad_signatures == 0


async def test_a_webhook_that_hangs_or_is_down_neither_holds_up_nor_fails_a_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)
    siem, port = Siem(), free_port()
    async with serve_asgi(siem.app(), port), running_gateway(parse_config(streaming_config(tmp_path, port))) as gw:
        with anyio.fail_after(60):  # the receiver answers nothing until the gate opens, after the calls
            await decisions(gw)
        assert siem.bodies == []
        siem.gate.set()
        await siem.wait_for(3)
    down = tmp_path / "down"
    down.mkdir()
    async with running_gateway(parse_config(streaming_config(down, free_port()))) as gw:
        await decisions(gw)
        failed = 'gateway_audit_stream_total{result="failed",sink="webhook"} 3.0'
        with anyio.fail_after(60):
            while failed not in gw.metrics.exposition().decode():  # noqa: ASYNC110 - a metric is polled
                await anyio.sleep(0.1)  # three entries, three tries each
        assert TENANTS.write_count(down / "backend.db") == 1
        assert len([entry async for entry in gw.store.audit_entries()]) == 3
    assert len((down / "siem" / "audit.jsonl").read_text().splitlines()) == 3


def test_a_webhook_without_its_secret_stops_serve_with_one_sentence(tmp_path: Path) -> None:
    config = write_toml(streaming_config(tmp_path, free_port()), tmp_path / "gateway.toml")
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--config", str(config), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if "audit_stream.webhook_secret_env" in line]
    assert len(errors) == 1 and "Traceback" not in done.stderr
