"""Tracing is opt-in through the standard OTEL_* variables, and off means no SDK is loaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gateway.observability.tracing import wanted
from tests.support.processes import ROOT


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


def test_with_tracing_off_neither_the_sdk_nor_the_exporter_is_imported() -> None:
    probe = (
        "import json, sys; from gateway.observability import tracing; from gateway.mcp import server; "
        "tracing.configure('gw', {}); "
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = json.loads(done.stdout)
    assert not [name for name in loaded if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter"))]
