"""Tracing is opt-in through the standard OTEL_* variables (that off loads no SDK is in
tests/system/test_layout_imports.py)."""

from __future__ import annotations

import pytest

from gateway.observability.tracing import wanted


@pytest.mark.parametrize(
    ("env", "exporter"),
    [
        ({}, None),
        ({"OTEL_SERVICE_NAME": "gw"}, None),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, None),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, None),
    ],
)
def test_the_environment_decides_whether_traces_are_exported(env: dict[str, str], exporter: str | None) -> None:
    assert wanted(env) == exporter


def test_with_tracing_off_a_span_enters_no_context_at_all() -> None:
    """Off (no provider installed), a span costs nothing per store step or call: no context is attached."""
    from opentelemetry import context, trace

    from gateway.observability.tracing import recording, span

    assert not recording()
    before = context.get_current()
    with span("store get_plan", operation="get_plan") as current:
        assert context.get_current() is before
        assert current is trace.INVALID_SPAN
