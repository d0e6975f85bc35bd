"""OpenTelemetry traces, opt-in through the standard ``OTEL_*`` environment variables.

Tracing is on when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, or
``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, or ``console``, which writes to stderr: stdout may carry
the protocol); ``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none`` keeps it off. The exporter is
OTLP over HTTP (protobuf) and reads its own variables (endpoint, headers, timeout); ``OTEL_SERVICE_NAME`` and
``OTEL_RESOURCE_ATTRIBUTES`` name the service. Off, every span below is the OpenTelemetry API's no-op, and the
SDK and exporter are never imported.

What one tool call leaves (the SDK's own ``tools/call NAME`` server span, continuing a client's
``_meta.traceparent``, is its parent):

    tool NAME                    caller, request id, outcome
      store OPERATION            each plan, key, nonce, bucket and audit operation
      confirm wait               a 2025-era prompt, from push to the person's answer
      backend ACTION             each god-tool call; the SDK's client span below it carries ``_meta.traceparent``,
                                 and an HTTP backend also gets a W3C ``traceparent`` header
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.propagate import inject

log = logging.getLogger(__name__)
tracer = trace.get_tracer("gateway")
"""A proxy: a no-op until ``configure`` installs a provider."""

ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
_DEFAULTS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)
"""The API's own providers: they only make no-op spans."""


def wanted(env: Mapping[str, str]) -> str | None:
    """The exporter the environment asks for (``otlp`` or ``console``), or None when tracing stays off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return None
    if exporter:
        return exporter
    return "otlp" if any(env.get(name, "").strip() for name in ENDPOINTS) else None


def configure(service_name: str, env: Mapping[str, str] = os.environ) -> Callable[[], None] | None:
    """Install a tracer provider when the environment asks for one; returns its shutdown (which flushes)."""
    exporter_name = wanted(env)
    if exporter_name is None:
        return None
    if exporter_name not in ("otlp", "console"):
        log.warning("OTEL_TRACES_EXPORTER=%s is not supported (use otlp or console); tracing stays off", exporter_name)
        return None
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or ""
    if exporter_name == "otlp" and protocol.strip() not in ("", "http/protobuf"):
        log.warning("OTLP protocol %r is not supported (only http/protobuf, usually port 4318)", protocol)
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    exporter: SpanExporter
    if exporter_name == "console":
        exporter = ConsoleSpanExporter(out=sys.stderr)
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    # Resource.create reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES; the config's name is the fallback.
    named = "OTEL_SERVICE_NAME" in env or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    resource = Resource.create() if named else Resource.create({SERVICE_NAME: service_name})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    log.info("tracing on: %s exporter", exporter_name)
    return provider.shutdown


def recording() -> bool:
    """Whether any tracer provider is installed (``configure``'s, or one an operator's instrumentation set): the
    API's default is a proxy that only ever makes no-op spans."""
    return not isinstance(trace.get_tracer_provider(), _DEFAULTS)


@contextmanager
def span(name: str, **attributes: Any) -> Iterator[trace.Span]:
    """A child of the current span. With tracing off it is the API's invalid span, yielded without entering the
    API at all: a no-op span still attaches and detaches a context, which costs every store step and call."""
    if not recording():
        yield trace.INVALID_SPAN
        return
    with tracer.start_as_current_span(name, attributes=attributes or None) as current:
        yield current


def annotate(**attributes: Any) -> None:
    """Set attributes on the current span."""
    trace.get_current_span().set_attributes(attributes)


def trace_id() -> str | None:
    """The current trace's id (32 hex digits), or None outside a recorded trace."""
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


async def inject_traceparent(request: Any) -> None:
    """An HTTP client hook: the current trace context as W3C ``traceparent`` (and ``tracestate``) headers."""
    carrier: dict[str, str] = {}
    inject(carrier)
    for name, value in carrier.items():
        request.headers[name] = value
