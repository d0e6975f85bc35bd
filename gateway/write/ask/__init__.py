"""Asking before a write, in both protocol eras.

yes     the yes a write's mode asks for, from one of the two below, noted in the write's audit entry
form    the client's confirmation form: pushed ``elicitation/create`` (2025-11-25) or ``InputRequiredResult``
        with a sealed, single-use ``requestState`` (2026-07-28)
people  people on the approval page (``confirm = "url"``): the approval's creation, the link, the wait (the page
        itself is gateway/http/page/)
task    the same, for a client that declared the tasks extension: answered at once with a task to follow

Imported by the write package above it (planned, passthrough through ``yes``); imports the write's driver, steps,
parts and progress, approvals, identity, stores and the protocol's facts (gateway.protocol).
"""
