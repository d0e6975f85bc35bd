"""Results as Markdown tables, and the goals checked against them."""

from __future__ import annotations

from typing import Any

from bench.readpath import SYSTEMS


def markdown(results: dict[str, Any]) -> str:
    """Every section present in ``results`` as a table, then the goals."""
    lines = [f"Machine: {results['machine']}", ""]
    read = results.get("read")
    if read:
        lines += [
            "### Read path (demo data set, 5 tenants: one gateway page == the backend's full list)",
            "",
            "| clients | system | median ms | p99 ms | calls/s | server CPU ms/call (+ children) | backend list "
            "calls per call | load generator CPU ms/call (cores busy) |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for clients, level in read["levels"].items():
            for name in SYSTEMS:
                if name not in level:
                    continue
                row = level[name]
                passes = "-" if name.startswith("gateway") else "1"  # direct and the proxies send every call on
                cpu = row["cpu_ms_per_call"]
                client = cpu.get("client")  # results.json files from before it was measured have none
                busy = "-" if client is None else f"{client} ({client * (row['calls_per_s'] or 0) / 1000:.2f})"
                reads = row.get("backend_list_calls_per_call", passes)
                lines.append(
                    f"| {clients} | {name} | {row['median_ms']} | {row['p99_ms']} | {row['calls_per_s']} | "
                    f"{cpu['server']} (+{cpu['children']}) | {reads} | {busy} |"
                )
        lines += [
            "",
            "| clients | gateway/direct median | gateway/mcp-proxy median | gateway/mcp-proxy calls/s "
            "| gateway/FastMCP median | gateway/FastMCP calls/s | 2026: gateway/direct median "
            "| 2026: gateway/mcp-proxy median | 2026: gateway/mcp-proxy calls/s | Redis 2 workers/1, calls/s "
            "| what-if gateway on h11: median vs mcp-proxy | calls/s vs mcp-proxy |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for clients, level in read["levels"].items():
            ratios = level["ratios"]
            shown = [
                "gateway/direct median_ms",
                "gateway/mcp_proxy median_ms",
                "gateway/mcp_proxy calls_per_s",
                "gateway/fastmcp_proxy median_ms",
                "gateway/fastmcp_proxy calls_per_s",
                "gateway-2026/direct median_ms",
                "gateway-2026/mcp_proxy median_ms",
                "gateway-2026/mcp_proxy calls_per_s",
                "redis 2 workers/1 worker calls_per_s",
                "what-if h11: gateway-h11/mcp_proxy median_ms",
                "what-if h11: gateway-h11/mcp_proxy calls_per_s",
            ]
            lines.append(f"| {clients} | " + " | ".join(_cell(ratios.get(name)) for name in shown) + " |")
        lines.append("")
        if "rss_mib" in read:
            shown_rss = ", ".join(f"{name} {mib}" for name, mib in read["rss_mib"].items())
            lines += [
                f"Resident memory of each one-process gateway after the load, MiB (backend not counted): {shown_rss}.",
                "",
            ]
    own = results.get("own")
    if own:
        lines += [
            "### The gateway's own in-process cost (handler minus backend awaits; medians, ms)",
            "",
            "| store | call | own | own + SDK middleware | p99 own | backend awaited | backend calls |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for store, calls in own.items():
            for name, row in calls.items():
                lines.append(
                    f"| {store} | {name} | {row['own_ms']['median']} | {row['own_with_sdk_ms']['median']} | "
                    f"{row['own_ms']['p99']} | {row['backend_ms']['median']} | {row['backend_calls_per_call']} |"
                )
        lines.append("")
    write = results.get("write")
    if write:
        lines += [
            "### Write path (preview + confirmed reset, SDK client that accepts every prompt)",
            "",
            "| store | era x clients | ops/s | op median ms | op p99 ms | preview median | reset median | errors |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for store, runs in write.items():
            for label, row in runs.items():
                lines.append(
                    f"| {store} | {label} | {row['ops_per_s']} | {row['median_ms']} | {row['p99_ms']} | "
                    f"{row['preview_median_ms']} | {row['reset_median_ms']} | {row['errors']} |"
                )
        lines.append("")
    mixed = results.get("mixed")
    if mixed:
        lines += [
            "### Mixed load (list_tenants while 8 callers run confirmed writes)",
            "",
            "| store | idle read median ms | idle read p99 ms | loaded read median ms | loaded read p99 ms "
            "| p99 loaded / idle | confirmed writes/s, 8 callers (alone) | (beside the reader) | errors |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for store, row in mixed.items():
            idle, loaded = row["idle_read"], row["mixed_read"]
            lines.append(
                f"| {store} | {idle['median_ms']} | {idle['p99_ms']} | {loaded['median_ms']} | {loaded['p99_ms']} | "
                f"**{row['read_p99_ratio']}** | {row['writes_per_s_alone']} | {row['writes_per_s_with_reader']} | "
                f"{row['write_errors']} |"
            )
        lines.append("")
    scale = results.get("scale")
    if scale:
        lines += [
            "### Scale (limit 50; memory store)",
            "",
            "| tenants | first page median ms | walk: pages | walk median ms | walk p99 ms | walk / 10-tenant page "
            "| preview median ms | gateway RSS MiB | + backend |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for tenants, row in scale.items():
            walk = row["walk"]
            pages = f"{walk['count']}{'' if walk['complete'] else ' (cut at ' + str(walk['seconds']) + 's)'}"
            lines.append(
                f"| {tenants} | {row['first_page']['median_ms']} | {pages} | {walk['median_ms']} | {walk['p99_ms']} | "
                f"{row['walk_vs_smallest']} | {row['preview']['median_ms']} | {row['rss_mib']['gateway']} | "
                f"{row['rss_mib']['with_backend']} |"
            )
        lines.append("")
    memory = results.get("memory")
    if memory:
        lines += [
            "### Memory with live plans and idempotency records (store API, fresh process)",
            "",
            "| store | live plans | records | RSS before MiB | RSS after MiB | growth MiB | file MiB |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for store, row in memory.items():
            lines.append(
                f"| {store} | {row['plans_live']} | {row['records']} | {row['rss_before_mib']} | "
                f"{row['rss_after_mib']} | {row['rss_growth_mib']} | {row.get('file_mib', '-')} |"
            )
        lines.append("")
    lines += ["### Goals", ""] + [f"- {line}" for line in goals(results)] + [""]
    return "\n".join(lines)


def goals(results: dict[str, Any]) -> list[str]:
    """Each goal, met or not, with the figure that decides it."""
    out = []
    read = results.get("read", {}).get("levels", {})
    if "1" in read:
        ratios = read["1"]["ratios"]
        for ours in ("gateway", "gateway-2026"):
            for name, limit in (("mcp_proxy", 0.9), ("direct", 1.5)):
                ratio = ratios.get(f"{ours}/{name} median_ms")
                figure = f"{ours}/{name} median latency {ratio}"
                out.append(f"read, 1 client: {figure} (goal <= {limit}): {_met(ratio, limit)}")
    if "32" in read:
        ratios = read["32"]["ratios"]
        floors = [
            ("gateway/mcp_proxy calls_per_s", 2.0),
            ("gateway-2026/mcp_proxy calls_per_s", 2.0),
            ("redis 2 workers/1 worker calls_per_s", 1.6),
        ]
        for name, floor in floors:
            ratio = ratios.get(name)
            verdict = "met" if ratio is not None and ratio >= floor else "NOT met"
            ceiling = ratios.get(f"{name}, this machine's ceiling")
            most = "" if ceiling is None else f"; at most {ceiling} on this machine's cores"
            out.append(f"read, 32 clients: {name} {ratio} (goal >= {floor}{most}): {verdict}")
    for name, mib in results.get("read", {}).get("rss_mib", {}).items():
        out.append(f"memory of one {name} worker after the read load {mib} MiB (goal <= 88): {_met(mib, 88.0)}")
    own = results.get("own", {}).get("sqlite")
    if own:
        read_cost = own["list_tenants"]["own_ms"]["median"]
        write_cost = own["reset_tenant_confirmed"]["own_ms"]["median"]
        out.append(f"own cost per read (sqlite store) {read_cost} ms (goal < 1 ms): {_met(read_cost, 1.0)}")
        out.append(
            f"own cost per confirmed write (sqlite store) {write_cost} ms (goal < 3 ms): {_met(write_cost, 3.0)}"
        )
    mixed = results.get("mixed", {}).get("sqlite")
    if mixed:
        ratio = mixed["read_p99_ratio"]
        out.append(f"read p99 under 8 writing callers / idle read p99 = {ratio} (goal <= 2): {_met(ratio, 2.0)}")
    scale = results.get("scale", {})
    if scale:
        largest = max(scale, key=int)
        row = scale[largest]
        ratio = row["walk_vs_smallest"]
        complete = "" if row["walk"]["complete"] else " (walk cut short by its time bound)"
        out.append(
            f"walk through {largest} tenants: median page / 10-tenant page = {ratio} (goal <= 2): "
            f"{_met(ratio, 2.0)}{complete}"
        )
    return out


def _met(value: float | None, limit: float) -> str:
    return "met" if value is not None and value <= limit else "NOT met"


def _cell(value: Any) -> str:
    return "-" if value is None else f"{value}x"
