"""The kind registry: each kind of tool as one object, found by its config's ``kind`` (the only code in
``gateway`` that tells the config models apart; tests/unit/test_layout.py keeps it so).

    registry     ``KINDS``: the one dict of every kind, by the config's ``kind``; ``kind_of`` and ``routed``
    kind         what a kind is (its config model, ``check`` step, ``opened`` and ``call``), a ``Split``, and
                 ``ToolCall``, one call routed to its kind
    read         a page of a backend list (gateway.tools.listing)
    preview      a plan for a write (gateway.tools.preview)
    write        a planned write (gateway.write.planned)
    passthrough  a backend's own tool: relayed when it only reads (gateway.tools.passthrough), confirmed and keyed
                 when it writes (gateway.write.passthrough)
    statement_query    a read relayed to a statement-executing server, bounded (gateway.tools.statement_query)
    statement_preview  a statement write classified and measured: a plan (gateway.tools.statement_preview)
    statement_execute  a planned statement, run once after a person's yes (gateway.write.statement)
    plans        the planned pairs' links, as their models: a write's preview, a preview's write
    checking     what a kind's ``check`` step reads a backend through and reports to

A kind's config model (gateway.config) answers what is data about a tool of it (its face, default scopes, hints,
whether it writes): the catalog, the identity checks and the HTTP surface, below this package, ask the model, and
the write package types its calls by it. What needs the backends or the running gateway (``check``, a call) is the
kind object's.

Adding a kind: its model in gateway.config, answering the questions gateway.config.kinds lists (a tool that relays
one of its backend's own tools says ``relays``; one that writes says ``writes`` and is a ``ConfirmedTool``; one
that applies the plans another issues names it in ``plans_from``, and the other answers ``template_names``), listed
in ``gateway.config.ToolConfig``; then its module here, a ``Kind`` with its ``check`` and ``call`` (a kind that
writes opens its ``ClaimedWrite`` of the write package in ``opened``, and the chain audits it), and its line in
``registry.KINDS``. tests/unit/test_kind_registry.py fails until the union and the registry agree. Nothing that
serves or checks a tool tells the kinds apart: the MCP surface, ``check`` and the catalog ask the kind or its model.

Imported by the MCP surface (gateway.mcp), ``check`` (gateway.cli) and, for ``plans``, the preview tool; imports
the tools, the write package and everything below them, never the MCP surface or the CLI. This module imports
nothing, so that a module of the package can be imported without the registry.
"""
