"""The published tools as the MCP surface shows them, built from the config and the backends' own listings.

    published  one ``PublishedTool`` per configured tool: its ``Tool`` (the face its kind gives), argument checks
    schemas    JSON Schema checks, strict (no coercion), compiled once, and their published, portable form

Pure apart from reading the config: the runtime builds the catalog, the tools and the write package read it.
"""
