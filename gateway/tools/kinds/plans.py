"""The planned pairs' links, as their models: the preview that issues a write's plans, the write that applies a
preview's (and the same for a statement preview and its execute tool). The config finds them by name
(``plans_from``) and checked them when it loaded; this module of the kind registry hands them over typed, to the
write kinds and to the previews (gateway.tools.preview, gateway.tools.kinds.statement_preview).
"""

from __future__ import annotations

from gateway.config import (
    ConfigError,
    GatewayConfig,
    PreviewTool,
    StatementExecuteTool,
    StatementPreviewTool,
    WriteTool,
)
from gateway.tools.kinds.kind import M, narrowed


def preview_of(config: GatewayConfig, write: WriteTool) -> PreviewTool:
    """The preview tool that issues a write tool's plans."""
    return narrowed(config.tools[write.preview], PreviewTool)


def write_of(config: GatewayConfig, preview: str) -> tuple[str, WriteTool]:
    """The write tool whose plans the named preview issues, by name."""
    return applier(config, preview, WriteTool)


def statement_preview_of(config: GatewayConfig, execute: StatementExecuteTool) -> StatementPreviewTool:
    """The statement preview that issues a statement execute tool's plans."""
    return narrowed(config.tools[execute.preview], StatementPreviewTool)


def statement_write_of(config: GatewayConfig, preview: str) -> tuple[str, StatementExecuteTool]:
    """The statement execute tool whose plans the named statement preview issues, by name."""
    return applier(config, preview, StatementExecuteTool)


def applier(config: GatewayConfig, preview: str, model: type[M]) -> tuple[str, M]:
    """The tool (of ``model``) whose plans the named preview issues, by name."""
    for name, tool in config.tools.items():
        if tool.plans_from() == preview:
            return name, narrowed(tool, model)
    raise ConfigError(f"no tool names {preview!r} as its preview")
