"""What a serving process does not import: libraries it needs only on a path its calls may never take. Each check
runs in a fresh interpreter (this one has imported everything); the memory each saves is in bench/RESULTS.md,
"Memory: what a worker holds"."""

from __future__ import annotations

import subprocess
import sys

from tests.support.processes import ROOT


def _run(script: str) -> list[str]:
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.splitlines()


LAZY = """
import sys
from gateway.catalog.published import build_catalog
from gateway.config import DEFAULT_CONFIG, load_config
import gateway.cli.main, gateway.http.app, gateway.stores.redis.client, gateway.stores.postgres

catalog = build_catalog(load_config(DEFAULT_CONFIG), {"fixtures": {"smoke": 25}, "presets": {"canary": 5}})
listing, preview = catalog.tools["list_tenants"], catalog.tools["preview_tenant_reset"]
listing.validate_arguments({})
listing.validate_output({"tenants": [{"id": "tn_a", "name": "A", "rows": 3, "version": 1, "protected": False}]})
expires = preview.tool.output_schema["properties"]["expiresAt"]
assert expires["format"] == "date-time", expires
assert preview.fits("expiresAt", "2026-12-06T10:00:00Z")
print("jsonschema" in sys.modules)
try:
    listing.validate_arguments({"limit": "ten"})
except Exception as error:
    print(type(error).__name__, error)
print("jsonschema" in sys.modules)
"""


def test_jsonschema_is_imported_only_when_a_check_fails() -> None:
    """A serving gateway whose calls are valid does not hold jsonschema's ~3 MiB; the first refusal imports it and
    its message is jsonschema's."""
    before, refusal, after = _run(LAZY)
    assert before == "False"
    assert refusal.startswith("ToolError list_tenants: limit: 'ten' is not of type 'integer'"), refusal
    assert after == "True"


REDIS = """
import sys
from gateway.stores import open_store
store = open_store("redis://127.0.0.1:1/0")  # no server needed: nothing connects until the first command
import redis.observability.providers as providers
print("redis" in sys.modules, "opentelemetry.sdk.metrics" in sys.modules, providers.OTEL_AVAILABLE)
from opentelemetry.sdk.metrics import MeterProvider
print(MeterProvider.__name__)
"""


def test_the_redis_store_loads_its_driver_without_the_opentelemetry_metrics_sdk() -> None:
    """redis-py imports OpenTelemetry's metrics SDK whenever it is installed, for metrics the gateway never turns
    on; the store loads redis-py without it, and the SDK stays importable for anyone else."""
    assert _run(REDIS) == ["True False False", "MeterProvider"]
