"""A second legacy god-tool server, shaped differently from legacy_backend, used only by the tests.

``manage_flags(op, args)`` keeps feature flags in SQLite. Its results are nested (``{"ok", "data": {...}}``),
its version field is ``meta.rev``, its protection flag is ``meta.locked``, and a missing flag is reported as
"does not exist". The gateway wraps it with config/flags.toml alone.
"""
