"""``chart.py RESULTS.json OUT.png``: the bench results as one figure. Runs in bench/.venv-tools (matplotlib)."""

from __future__ import annotations

import json
import sys
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

SYSTEMS = [("direct", "#999999"), ("mcp-proxy", "#4c72b0"), ("gateway", "#dd8452"), ("gateway-h11", "#f2c49b")]


def _bars(ax: Any, groups: list[str], series: dict[str, list[float]], colors: dict[str, str]) -> None:
    width = 0.8 / max(1, len(series))
    for index, (name, values) in enumerate(series.items()):
        xs = [g + (index - (len(series) - 1) / 2) * width for g in range(len(groups))]
        ax.bar(xs, [v or 0 for v in values], width, label=name, color=colors.get(name))
    ax.set_xticks(range(len(groups)), groups)
    ax.legend(fontsize=8)


def main() -> None:
    """Draw read latency, read throughput, write throughput and scale into one PNG."""
    with open(sys.argv[1]) as file:
        results = json.load(file)
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    colors = dict(SYSTEMS)
    read = results.get("read", {}).get("levels", {})
    if read:
        levels = list(read)
        groups = [f"{c} client{'s' if c != '1' else ''}" for c in levels]
        names = [n for n, _ in SYSTEMS if n in read[levels[0]]]
        _bars(axes[0][0], groups, {n: [read[c][n]["median_ms"] for c in levels] for n in names}, colors)
        axes[0][0].set_title("read: median latency (ms), lower is better")
        _bars(axes[0][1], groups, {n: [read[c][n]["calls_per_s"] for c in levels] for n in names}, colors)
        axes[0][1].set_title("read: calls per second, higher is better")
    write = results.get("write", {})
    if write:
        labels = list(next(iter(write.values())))
        _bars(
            axes[1][0],
            labels,
            {store: [runs[label]["ops_per_s"] for label in labels] for store, runs in write.items()},
            {},
        )
        axes[1][0].set_title("write: preview + confirmed reset per second, by store")
        axes[1][0].tick_params(axis="x", labelsize=8)
    scale = results.get("scale", {})
    if scale:
        sizes = list(scale)
        ax = axes[1][1]
        for key, label in (
            ("first_page", "fresh first page"),
            ("walk", "page while walking all"),
            ("preview", "preview"),
        ):
            ax.plot(sizes, [scale[s][key]["median_ms"] for s in sizes], marker="o", label=label)
        ax.set_yscale("log")
        ax.set_xlabel("tenants in the backend")
        ax.set_title("scale: median latency (ms, log)")
        ax.legend(fontsize=8)
    machine = results.get("machine", {})
    fig.suptitle(
        f"mcp-safety-gateway bench - {machine.get('nproc')} cores, {machine.get('cpu')}, Python "
        f"{machine.get('python')}, {machine.get('date')}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=100)


if __name__ == "__main__":
    main()
