"""The call and backend instruments (gateway/observability/metrics.py), read back from the registry a scrape reads:
every call counts once under its own labels, however often its labelled series was looked up before."""

from __future__ import annotations

import pytest

from gateway.observability.metrics import Metrics


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_each_answered_call_counts_once_under_its_tool_and_outcome() -> None:
    metrics = Metrics()
    metrics.call_answered("list_tenants", "ok", 0.002)
    metrics.call_answered("list_tenants", "ok", 0.004)
    metrics.call_answered("list_tenants", "rate_limited", 0.001)
    metrics.call_answered("(unknown)", "unknown_tool", 0.0005)
    assert sample(metrics, "gateway_tool_calls_total", tool="list_tenants", outcome="ok") == 2.0
    assert sample(metrics, "gateway_tool_calls_total", tool="list_tenants", outcome="rate_limited") == 1.0
    assert sample(metrics, "gateway_tool_calls_total", tool="(unknown)", outcome="unknown_tool") == 1.0
    # The time is per tool, whatever the outcome: one series, three calls.
    assert sample(metrics, "gateway_tool_call_seconds_count", tool="list_tenants") == 3.0
    assert sample(metrics, "gateway_tool_call_seconds_sum", tool="list_tenants") == pytest.approx(0.007)
    assert sample(metrics, "gateway_tool_call_seconds_bucket", tool="list_tenants", le="0.0025") == 2.0


def test_each_backend_call_counts_under_its_action_result_and_backend() -> None:
    metrics = Metrics()
    tenants, flags = metrics.backend_observer("tenants"), metrics.backend_observer("flags")
    tenants("list", "ok", 0.001)
    tenants("list", "ok", 0.003)
    tenants("list", "lost", 5.0)
    flags("list", "ok", 0.002)
    assert sample(metrics, "gateway_backend_call_seconds_count", action="list", result="ok", backend="tenants") == 2
    assert sample(metrics, "gateway_backend_call_seconds_count", action="list", result="lost", backend="tenants") == 1
    assert sample(metrics, "gateway_backend_call_seconds_count", action="list", result="ok", backend="flags") == 1
    total = sample(metrics, "gateway_backend_call_seconds_sum", action="list", result="ok", backend="tenants")
    assert total == pytest.approx(0.004)
