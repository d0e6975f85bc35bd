"""The planned pair's links, as their models: the preview that issues a write's plans, the write that applies a
preview's. The config finds them by name (``WriteTool.plans_from``) and checked them when it loaded; this module
of the kind registry hands them over typed, to the write kind and to the preview (gateway.tools.preview).
"""

from __future__ import annotations

from gateway.config import ConfigError, GatewayConfig, PreviewTool, WriteTool
from gateway.tools.kinds.kind import narrowed


def preview_of(config: GatewayConfig, write: WriteTool) -> PreviewTool:
    """The preview tool that issues a write tool's plans."""
    return narrowed(config.tools[write.preview], PreviewTool)


def write_of(config: GatewayConfig, preview: str) -> tuple[str, WriteTool]:
    """The write tool whose plans the named preview issues, by name."""
    for name, tool in config.tools.items():
        if tool.plans_from() == preview:
            return name, narrowed(tool, WriteTool)
    raise ConfigError(f"no write tool names {preview!r} as its preview")
