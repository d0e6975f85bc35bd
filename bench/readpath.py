"""Read path: ``list_tenants`` through the gateway beside ``manage_tenant(list)`` direct, through mcp-proxy and
through FastMCP's proxy; and (with redis-server) the gateway on Redis with one worker and with ``--workers 2``.

Topology (all loopback): direct = client -HTTP-> backend; the gateways and the proxies = client -HTTP-> bridge
-stdio-> backend (each its own backend process and SQLite file, same demo data; a gateway worker has its own
backend child). The backend's ``list`` is unbounded, so
the comparison uses the demo data set (5 tenants): the gateway's first page and the full list hold the same
five tenants. Windows are interleaved (round-robin, rotated each round) so that a noisy neighbour hits every
system alike; the pooled latencies of all rounds give the medians.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx

from bench import procs
from bench.load import Sample, run_load
from bench.wire import PROTOCOL, STATELESS, WireClient, tool_text

LIST_CALL: tuple[str, dict[str, Any]] = ("manage_tenant", {"action": "list", "payload": {}})
PAGE_CALL: tuple[str, dict[str, Any]] = ("list_tenants", {})


async def _call(client: WireClient, name: str, arguments: dict[str, Any]) -> None:
    result = await client.call_tool(name, arguments)
    if result.get("isError"):
        raise RuntimeError(tool_text(result)[:200])


async def _tenant_count(url: str, name: str, arguments: dict[str, Any], protocol: str = PROTOCOL) -> int:
    async with WireClient(url, protocol=protocol) as client:
        result = await client.call_tool(name, arguments)
    data = result.get("structuredContent") or json.loads(tool_text(result))
    return len(data["tenants"])


def run(
    work: Path, *, concurrency: list[int], rounds: int, seconds: float, what_if_h11: bool, log: Any
) -> dict[str, Any]:
    """Measure the systems at each concurrency; return summaries, ratios and CPU per call."""
    for name in ("direct", "gateway", "gateway-2026", "mcp-proxy", "fastmcp-proxy", "gateway-h11", "gateway-redis"):
        procs.seed_database(work / f"read-{name}.db", tenants=None)

    def gateway_config(name: str, store: str | None = None) -> Path:
        """A gateway on its own backend database and (unless given) SQLite store, all named after ``name``."""
        return procs.gateway_config(
            work / f"read-{name}.toml",
            work / f"read-{name}.db",
            store=store or f"sqlite:{work}/read-{name}-store.db",
            tenants=None,
            state_dir=work / "state",
        )

    with ExitStack() as stack:
        servers = {
            "direct": stack.enter_context(procs.direct_backend(work / "read-direct.db", work)),
            "gateway": stack.enter_context(procs.gateway(gateway_config("gateway"), work)),
            "gateway-2026": stack.enter_context(procs.gateway(gateway_config("gateway-2026"), work, "gateway-2026")),
            "mcp-proxy": stack.enter_context(procs.mcp_proxy(work / "read-mcp-proxy.db", work)),
        }
        calls = {name: LIST_CALL if name.endswith(("direct", "proxy")) else PAGE_CALL for name in SYSTEMS}
        if (procs.FASTMCP_VENV / "bin" / "python").exists():
            servers["fastmcp-proxy"] = stack.enter_context(procs.fastmcp_proxy(work / "read-fastmcp-proxy.db", work))
        if procs.store_available("redis") is None:
            on_redis = gateway_config("gateway-redis", procs.store_url("redis", work, stack, "read-redis"))
            servers["gateway-redis"] = stack.enter_context(procs.gateway(on_redis, work, name="gateway-redis"))
            two = procs.gateway(on_redis, work, name="gateway-redis-2w", workers=2)
            servers["gateway-redis-2w"] = stack.enter_context(two)
        if what_if_h11:
            h11 = procs.gateway(gateway_config("gateway-h11"), work, name="gateway-h11", h11=True)
            servers["gateway-h11"] = stack.enter_context(h11)
        protocols = {name: STATELESS if name in STATELESS_SYSTEMS else PROTOCOL for name in SYSTEMS}
        items = {name: anyio.run(_tenant_count, servers[name].url, *calls[name], protocols[name]) for name in servers}
        log(f"  tenants returned per call: {items} (demo data set: one gateway page == the full list)")
        results: dict[str, Any] = {"tenants_per_call": items, "levels": {}}
        for clients in concurrency:
            samples = {name: Sample() for name in servers}
            # "client": this process, the load generator; near one core's worth, it and not the server sets the pace.
            cpu = {name: {"server": 0.0, "children": 0.0, "client": 0.0} for name in servers}
            order = list(servers)
            backend_reads = {name: 0.0 for name in servers}
            gateway_calls = {name: 0 for name in servers}
            for round_number in range(rounds):
                shift = round_number % len(order)
                for name in order[shift:] + order[:shift]:
                    server, (tool, arguments) = servers[name], calls[name]

                    async def call(client: WireClient, tool: str = tool, arguments: dict[str, Any] = arguments) -> None:
                        await _call(client, tool, arguments)

                    before = {**server.cpu_seconds(), "client": time.process_time()}
                    # One worker's /metrics, of several, says nothing of the whole: no figure for -2w.
                    counted = name.startswith("gateway") and not name.endswith("-2w")
                    reads_before = backend_list_calls(server) if counted else None
                    client = partial(WireClient, protocol=protocols[name])
                    load = partial(run_load, server.url, call, clients=clients, seconds=seconds, max_calls=200_000)
                    load = partial(load, open_client=client)
                    sample = anyio.run(load)
                    after = {**server.cpu_seconds(), "client": time.process_time()}
                    for part in cpu[name]:
                        cpu[name][part] += after[part] - before[part]
                    reads_after = backend_list_calls(server) if counted else None
                    if reads_before is not None and reads_after is not None:
                        backend_reads[name] += reads_after - reads_before
                        gateway_calls[name] += len(sample.latencies) + sample.errors + 5 * clients
                    samples[name].add(sample)
            level: dict[str, Any] = {}
            for name, sample in samples.items():
                summary = sample.summary()
                # Warm-up calls (5 per client per window) also burn CPU: count them in the divisor.
                total = summary["calls"] + summary["errors"] + 5 * clients * rounds
                summary["cpu_ms_per_call"] = {part: round(1000 * spent / total, 3) for part, spent in cpu[name].items()}
                level[name] = summary
            for name, calls_made in gateway_calls.items():
                if calls_made:
                    # Concurrent first pages share one backend read that started after each of them arrived.
                    level[name]["backend_list_calls_per_call"] = round(backend_reads[name] / calls_made, 3)
            level["ratios"] = _ratios(level)
            if "gateway-h11" in level:
                on_h11, proxy = level["gateway-h11"], level["mcp-proxy"]
                level["ratios"]["what-if h11: gateway-h11/mcp_proxy median_ms"] = _ratio(
                    on_h11["median_ms"], proxy["median_ms"]
                )
                level["ratios"]["what-if h11: gateway-h11/mcp_proxy calls_per_s"] = _ratio(
                    on_h11["calls_per_s"], proxy["calls_per_s"]
                )
            results["levels"][str(clients)] = level
            log(f"  {clients:>2} clients: " + ", ".join(_brief(name, level[name]) for name in servers))
            log(f"             ratios: {level['ratios']}")
        # Memory per worker, after every level's load: one serve process, its backend child not counted.
        results["rss_mib"] = {
            name: round(server.rss_mib(children=False), 1)
            for name, server in servers.items()
            if name.startswith("gateway") and not name.endswith("-2w")
        }
        log(f"  gateway RSS after the load, MiB: {results['rss_mib']}")
    return results


def backend_list_calls(server: procs.Server) -> float | None:
    """How many ``list`` calls the gateway has sent its backend, from its own /metrics (None without them)."""
    try:
        text = httpx.get(server.url.removesuffix("/mcp") + "/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    total = None
    for line in text.splitlines():
        if line.startswith("gateway_backend_call_seconds_count{") and 'action="list"' in line:
            total = (total or 0.0) + float(line.rsplit(" ", 1)[1])
    return total


SYSTEMS = (
    "direct",
    "gateway",
    "gateway-2026",
    "mcp-proxy",
    "fastmcp-proxy",
    "gateway-redis",
    "gateway-redis-2w",
    "gateway-h11",
)
"""Every system the read path can measure, in the order the report shows them."""
STATELESS_SYSTEMS = ("gateway-2026", "gateway-redis", "gateway-redis-2w")
"""The systems driven by 2026-07-28 clients (no session: any worker answers any request); the rest speak
2025-11-25, the one era mcp-proxy and FastMCP's proxy and the direct backend share."""


def _ratios(level: dict[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for ours in ("gateway", "gateway-2026"):
        gateway = level[ours]
        for base, label in (("direct", "direct"), ("mcp-proxy", "mcp_proxy"), ("fastmcp-proxy", "fastmcp_proxy")):
            other = level.get(base)
            for metric in ("median_ms", "p99_ms", "calls_per_s"):
                out[f"{ours}/{label} {metric}"] = _ratio(gateway[metric], other[metric]) if other else None
    one, two = level.get("gateway-redis"), level.get("gateway-redis-2w")
    if one and two:
        out["redis 2 workers/1 worker calls_per_s"] = _ratio(two["calls_per_s"], one["calls_per_s"])
        out["redis 2 workers/1 worker median_ms"] = _ratio(two["median_ms"], one["median_ms"])
        out["redis 2 workers/1 worker calls_per_s, this machine's ceiling"] = _ceiling(one, two)
    return out


def _ceiling(one: dict[str, Any], two: dict[str, Any]) -> float | None:
    """The most ``--workers 2`` could gain over one worker here: every core busy with what one call costs the
    machine at two workers (both workers, their backend children and the load generator; Redis's own CPU not
    counted, so the true ceiling is lower still), over one worker's calls/s."""
    per_call_ms = sum(two["cpu_ms_per_call"].values())
    cores = len(os.sched_getaffinity(0))
    return _ratio(cores * 1000 / per_call_ms, one["calls_per_s"]) if per_call_ms else None


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return round(ours / theirs, 3) if ours and theirs else None


def _brief(name: str, summary: dict[str, Any]) -> str:
    return f"{name} {summary['median_ms']}ms p99 {summary['p99_ms']}ms {summary['calls_per_s']}/s"


def profile(work: Path, out: Path, *, seconds: float, log: Any) -> dict[str, str]:
    """py-spy flame graphs (SVG) of the gateway process serving list_tenants at 1 and 8 clients."""
    spy = procs.ROOT / "bench" / ".venv-tools" / "bin" / "py-spy"
    if not spy.exists():
        log("  profile skipped: no py-spy in bench/.venv-tools")
        return {}
    config = work / "read-gateway.toml"
    written = {}
    with procs.gateway(config, work, name="gateway-profiled") as server:
        for clients in (1, 8):
            target = out / f"profile-gateway-x{clients}.svg"
            recorder = subprocess.Popen(
                [
                    str(spy),
                    "record",
                    "--pid",
                    str(server.process.pid),
                    "--duration",
                    str(int(seconds)),
                    "--rate",
                    "250",
                    "--nonblocking",
                    "--format",
                    "flamegraph",
                    "--output",
                    str(target),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            call = partial(_call, name=PAGE_CALL[0], arguments=PAGE_CALL[1])
            anyio.run(partial(run_load, server.url, call, clients=clients, seconds=seconds, max_calls=200_000))
            try:
                recorder.wait(timeout=seconds + 60)
            except subprocess.TimeoutExpired:
                recorder.kill()
            written[str(clients)] = str(target)
            log(f"  flame graph: {target}")
    return written
