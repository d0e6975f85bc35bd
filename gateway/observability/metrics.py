"""Prometheus metrics, one registry per gateway (so several gateways in one process never share counters).

Under ``serve --workers N`` each worker calls ``share_between_workers(directory)`` before its gateway exists: its
values then live in memory-mapped files in the supervisor's directory (prometheus_client's multiprocess mode), and
a scrape of any worker reads every worker's files. Counters and histograms are summed over the workers, a dead
worker's included (so totals never step back); ``gateway_backend_connected`` is the lowest over the live workers
(1 only while every worker's connection answers) and ``gateway_approvals_pending`` the latest any worker read.

gateway_tool_calls_total{tool, outcome}        outcome: ok, applied, replayed, input_required, task, or an error
                                                code (a task's resumed call counted again with its own outcome)
gateway_tool_call_seconds{tool}                 time in the gateway, backend calls included
gateway_backend_call_seconds{action, result, backend}   result: ok, error (isError), lost, unavailable;
                                                 action: a god-tool action or a pass-through tool's name
gateway_backend_connected{backend}              1 while that backend answered its last probe or call
gateway_elicitation_answers_total{answer}       accept, decline, cancel, timeout
gateway_store_seconds{operation}                each store operation
gateway_plans_total{tool, mode, rule}           plans issued, by the confirmation their approval rule chose
gateway_rules_failed_closed_total{tool, rule}   plans whose rule could not be evaluated (the plan failed closed)
gateway_denials_total{tool, rule}               previews and writes refused by a deny rule (each an audit entry)
gateway_write_refusals_total{tool, mode, rule, code}   write calls refused once their mode was chosen (denied,
                                                approval_pending, not_confirmed, ...), as their audit entries say
gateway_approvals_pending                       approvals waiting for people (read from the store when scraped)
gateway_approval_decision_seconds{decision}     from the request to the decision that settled it (approved/rejected)
gateway_refusals_before_plan_total{tool, code}  write calls refused before a plan or key was found (audited per
                                                caller, code and minute, not one entry each: gateway.audit.floods)
gateway_audit_stream_total{sink, result}        audit entries streamed out: sent, failed, dropped (queue full)
"""

from __future__ import annotations

import os
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.multiprocess import MultiProcessCollector

SHARED = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus_client's own variable naming the directory of a multiprocess setup."""

FAST = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Metrics:
    """The gateway's instruments."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._scraped = self.registry
        if getattr(values.ValueClass, "_multiprocess", False):  # see share_between_workers
            self._scraped = CollectorRegistry()
            MultiProcessCollector(self._scraped, os.environ[SHARED])  # type: ignore[no-untyped-call]
        self.calls = Counter(
            "gateway_tool_calls", "Tool calls by outcome.", ["tool", "outcome"], registry=self.registry
        )
        self.call_seconds = Histogram(
            "gateway_tool_call_seconds", "Time to answer a tool call.", ["tool"], buckets=FAST, registry=self.registry
        )
        self._call_children: dict[tuple[str, str], tuple[Counter, Histogram]] = {}
        """Each (tool, outcome)'s labelled series, looked up once: ``labels()`` costs more than the count."""
        self.backend_seconds = Histogram(
            "gateway_backend_call_seconds",
            "Time of each backend call.",
            ["action", "result", "backend"],
            buckets=FAST,
            registry=self.registry,
        )
        self.backend_connected = Gauge(
            "gateway_backend_connected",
            "Whether the backend answered its last probe (a ping) or call.",
            ["backend"],
            registry=self.registry,
            multiprocess_mode="livemin",
        )
        self.answers = Counter(
            "gateway_elicitation_answers", "Answers to confirmation prompts.", ["answer"], registry=self.registry
        )
        self.store_seconds = Histogram(
            "gateway_store_seconds",
            "Time of each store operation.",
            ["operation"],
            buckets=FAST,
            registry=self.registry,
        )

        self.plans = Counter(
            "gateway_plans",
            "Plans issued, by confirmation mode and rule.",
            ["tool", "mode", "rule"],
            registry=self.registry,
        )
        self.rules_failed_closed = Counter(
            "gateway_rules_failed_closed",
            "Plans whose approval rule could not be evaluated, so the strictest mode applied.",
            ["tool", "rule"],
            registry=self.registry,
        )
        self.denials = Counter(
            "gateway_denials", "Previews and writes refused by a deny rule.", ["tool", "rule"], registry=self.registry
        )
        self.write_refusals = Counter(
            "gateway_write_refusals",
            "Write calls refused once their confirmation mode was chosen, by mode, rule and code.",
            ["tool", "mode", "rule", "code"],
            registry=self.registry,
        )
        self.approvals_pending = Gauge(
            "gateway_approvals_pending",
            "Approvals waiting for people.",
            registry=self.registry,
            multiprocess_mode="livemostrecent",
        )
        self.decision_seconds = Histogram(
            "gateway_approval_decision_seconds",
            "Time from an approval's request to the decision that settled it.",
            ["decision"],
            buckets=(5, 15, 30, 60, 120, 300, 600, 1800, 3600),
            registry=self.registry,
        )
        self.refusals_before_plan = Counter(
            "gateway_refusals_before_plan",
            "Write calls refused before reaching a plan or key.",
            ["tool", "code"],
            registry=self.registry,
        )
        self.audit_stream = Counter(
            "gateway_audit_stream", "Audit entries streamed to sinks.", ["sink", "result"], registry=self.registry
        )

    def call_answered(self, tool: str, outcome: str, seconds: float) -> None:
        """One tool call answered (``tool``: a configured name or "(unknown)", so the labels are bounded)."""
        children = self._call_children.get((tool, outcome))
        if children is None:
            children = self._call_children[(tool, outcome)] = (
                self.calls.labels(tool, outcome),
                self.call_seconds.labels(tool),
            )
        children[0].inc()
        children[1].observe(seconds)

    def backend_observer(self, backend: str) -> Callable[[str, str, float], None]:
        """What one backend's client reports each call's duration and ending to."""
        children: dict[tuple[str, str], Histogram] = {}

        def observe(action: str, result: str, seconds: float) -> None:
            child = children.get((action, result))
            if child is None:
                child = children[(action, result)] = self.backend_seconds.labels(action, result, backend)
            child.observe(seconds)

        return observe

    def connection_observer(self, backend: str) -> Callable[[bool], None]:
        """What one backend's client reports each change of its reachability to."""
        gauge = self.backend_connected.labels(backend)
        return lambda reachable: gauge.set(1.0 if reachable else 0.0)

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes: this gateway's, or every worker's under ``--workers``."""
        return generate_latest(self._scraped)


def share_between_workers(directory: str) -> None:
    """Keep every metric this process creates from now on in ``directory``, beside the other workers' (call it in
    a worker after the fork, before its gateway is opened; the supervisor owns and removes the directory)."""
    os.environ[SHARED] = directory
    values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]  # what import picks with SHARED
