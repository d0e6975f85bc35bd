"""A deliberately unsafe legacy MCP server: one god-tool, `manage_tenant`, over a SQLite file."""
