"""A server that lies and stalls, written with the SDK's low-level ``Server``; tests and benchmarks only.

Its name, version, tool names, descriptions and schemas hold newlines, quotes, brackets, control and bidi
characters (text meant to add a table to a draft config, or to repaint the terminal of whoever inspects it),
and every tool claims every hint and declares an ``outputSchema``, ``flush_cache`` included, which empties a
cache. ``--hang-list`` answers ``initialize`` and pings but never ``tools/list``. Every request it hears (its MCP
method, and over HTTP its headers) is appended to ``--log`` as a JSON line, so a test can assert what a gateway
or ``check`` sent it.
"""
