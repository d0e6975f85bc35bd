"""What an operator sees of a running gateway: structured logs, Prometheus metrics, OpenTelemetry spans.

    logs     JSON or text lines on stderr, with the request's bound fields; never secrets or payloads
    metrics  bounded labels only (tool names from config, codes from gateway.errors)
    tracing  spans, off unless the OTEL_* environment turns them on

Imports the standard library and the exporters only, so every other folder may import these.
"""
