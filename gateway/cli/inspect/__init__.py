"""``mcp-safety-gateway inspect``: look at any MCP server and draft the config that wraps it.

findings   what each tool's definition says (pure): hints left to the spec's defaults, no outputSchema,
           free-form object arguments, god-tool signals, and each action's risk
draft      the config a person completes (pure): TOML with ``TODO`` strings where a decision is needed;
           the gateway refuses to load a file that still has one
probe      the I/O: connect (stdio command or URL with headers), ``initialize`` and ``tools/list`` only,
           print the findings, write the draft
"""
