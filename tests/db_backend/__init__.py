"""A third legacy server, written with the SDK's low-level ``Server`` and shaped unlike the other two; tests only.

``manage_db(command, params)`` restores and drops databases. Its input schema enumerates the commands; results
are JSON under ``"result"``; a database's version is ``generation`` and its protection flag ``frozen``; a
missing one is an "unknown database"; the restore templates come as a list of objects
(``[{"id": "blank", "rows": 0}, ...]``). Beside it sit ordinary tools: ``server_status`` (fully annotated, with
an ``outputSchema``) and ``vacuum_database`` (no annotations at all), as real servers have them. Every
``tools/list`` and ``tools/call`` is logged in its ``requests`` table.
"""
