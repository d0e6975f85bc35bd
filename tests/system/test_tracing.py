"""Traces an operator can follow: a real ``serve`` process with the standard OTEL_* variables exports over
OTLP/HTTP to a receiver this test runs. A confirmed reset leaves a span with children for the store, the wait
for the person and the backend call; the HTTP backend (run here, recording its request headers) gets the W3C
``traceparent`` of that trace; every log line of the call carries its ``trace_id``, and ``request_id`` differs
per call. Over a stdio backend, the SDK client's span of each call sits under the gateway's backend span (tracing on
takes the SDK's client, not the lane)."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from legacy_backend.cli import server_for
from tests.support.asgi import serve_asgi
from tests.support.clients import Answers, new_key, preview
from tests.support.configs import config_data, write_toml
from tests.support.processes import free_port, serve
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]


@dataclass
class Seen:
    spans: list[Span] = field(default_factory=list)
    traceparents: list[str] = field(default_factory=list)
    applied: anyio.Event = field(default_factory=anyio.Event)

    def named(self, name: str) -> list[Span]:
        return [span for span in self.spans if span.name == name]

    def ancestors(self, span: Span) -> list[str]:
        by_id = {item.span_id: item for item in self.spans}
        names = []
        while span.parent_id in by_id:
            span = by_id[span.parent_id]
            names.append(span.name)
        return names


def otlp_receiver(seen: Seen) -> Starlette:
    async def traces(request: Request) -> Response:
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.body())
        for resource in export.resource_spans:
            for scope in resource.scope_spans:
                for span in scope.spans:
                    attributes = {item.key: item.value.string_value for item in span.attributes}
                    seen.spans.append(
                        Span(span.name, span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex(), attributes)
                    )
                    if span.name == "tool reset_tenant" and attributes.get("gateway.outcome") == "applied":
                        seen.applied.set()
        return Response(ExportTraceServiceResponse().SerializeToString(), media_type="application/x-protobuf")

    return Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])


def recording_backend(db: Path, seen: Seen) -> Any:
    """The demo backend over streamable HTTP, noting each request's traceparent header."""
    app = server_for(["--http", "127.0.0.1:0", "--db", str(db), *TENANTS.seed_demo]).streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True
    )

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            value = dict(scope["headers"]).get(b"traceparent")
            if value is not None:
                seen.traceparents.append(value.decode())
        await app(scope, receive, send)

    return recording


async def test_a_confirmed_reset_is_one_trace_from_tool_call_to_backend(tmp_path: Path) -> None:
    seen = Seen()
    otlp_port, backend_port, gateway_port = free_port(), free_port(), free_port()
    db = tmp_path / "backend.db"
    data = config_data(
        TENANTS,
        db,
        state_dir=tmp_path / "state",
        store=f"sqlite:{tmp_path}/gateway.db",
        backend={"transport": "http", "url": f"http://127.0.0.1:{backend_port}/mcp"},
    )
    config = write_toml(data, tmp_path / "gateway.toml")
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{otlp_port}",
        "OTEL_SERVICE_NAME": "gateway-under-test",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    log = tmp_path / "gateway.log"
    async with (
        serve_asgi(otlp_receiver(seen), otlp_port),
        serve_asgi(recording_backend(db, seen), backend_port, lifespan="on"),
    ):
        with log.open("w") as stderr:
            async with serve(config, gateway_port, stderr=stderr, env=env):
                url = f"http://127.0.0.1:{gateway_port}/mcp"
                async with Client(streamable_http_client(url), mode="legacy", elicitation_callback=Answers()) as client:
                    plan = await preview(client, TENANTS)
                    args = {"planId": plan["planId"], "idempotencyKey": new_key()}
                    done = await client.call_tool(TENANTS.write_tool, args)
                    await client.call_tool(TENANTS.write_tool, args)
            # Stopped: the gateway flushed its spans on the way out.
        with anyio.fail_after(30):
            await seen.applied.wait()
    assert not done.is_error, done.content
    (reset,) = [s for s in seen.named("tool reset_tenant") if s.attributes["gateway.outcome"] == "applied"]
    assert reset.attributes["gateway.caller"] == "local"
    in_reset = [span for span in seen.spans if span.trace_id == reset.trace_id]
    for child in ("store claim", "store settle", "confirm wait", "backend reseed"):
        (span,) = [span for span in in_reset if span.name == child]
        assert "tool reset_tenant" in seen.ancestors(span), child
    assert any(value.split("-")[1] == reset.trace_id for value in seen.traceparents)

    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    calls = [line for line in lines if line["logger"] == "gateway.calls"]
    applied = [line for line in calls if line["outcome"] == "applied"]
    assert len(applied) == 1 and applied[0]["trace_id"] == reset.trace_id
    assert all("trace_id" in line for line in calls)
    assert len({line["request_id"] for line in calls}) == len(calls) >= 3


async def test_with_tracing_on_a_stdio_backends_calls_take_the_sdk_client_and_its_span(tmp_path: Path) -> None:
    """Tool calls to a stdio child go past the SDK's dispatcher only while tracing is off (gateway/backend/lane.py):
    with it on, the SDK's client sends them, so its span (which carries the trace to the backend in ``_meta``)
    sits under the gateway's backend span."""
    seen = Seen()
    otlp_port, gateway_port = free_port(), free_port()
    data = config_data(
        TENANTS, tmp_path / "backend.db", *TENANTS.seed_demo, state_dir=tmp_path / "state", store="memory"
    )
    config = write_toml(data, tmp_path / "gateway.toml")
    env = {
        **os.environ,
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{otlp_port}",
        "OTEL_BSP_SCHEDULE_DELAY": "200",
    }
    async with serve_asgi(otlp_receiver(seen), otlp_port):
        async with serve(config, gateway_port, env=env):
            url = f"http://127.0.0.1:{gateway_port}/mcp"
            async with Client(streamable_http_client(url), mode="legacy", elicitation_callback=Answers()) as client:
                plan = await preview(client, TENANTS)
                done = await client.call_tool(
                    TENANTS.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()}
                )
        with anyio.fail_after(30):
            await seen.applied.wait()
    assert not done.is_error, done.content
    sent = seen.named(f"MCP send tools/call {TENANTS.name}")
    assert any("backend reseed" in seen.ancestors(span) for span in sent), [span.name for span in seen.spans]
