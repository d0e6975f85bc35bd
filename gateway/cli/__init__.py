"""The subcommands of ``mcp-safety-gateway``: the edge a person types at. Nothing in ``gateway`` imports this folder.

main       the argument parser, and the subcommands that take a line or two
serve      ``serve``: HTTP or stdio, the approval page beside stdio, the refusals and warnings before it starts
           (start-up recovery is a step of ``serve`` only)
workers    ``serve --workers N``: the supervisor that forks N HTTP workers on one socket (Redis, PostgreSQL only)
check      ``check``: a config against its backend, the published tool table, ``--explain``
init       ``init``: the built-in config written out to edit
audit      ``audit list | verify | export | head | trim``; ``verify --bundle`` checks exported evidence offline
approvals  ``approvals list | approve | reject``: the approval API from a terminal
sessions   ``approvals sessions [--revoke ID] [--person P]``: the operator's list of approver sessions, in the store
passkeys   ``approvals passkeys [--revoke ID] [--person P]``: the operator's list of enrolled passkeys, revoking
call/      ``call`` and ``tools``: a terminal MCP client that answers prompts at the keyboard
inspect/   ``inspect``: look at any MCP server and draft the config that wraps it
migrate    ``migrate``: a PostgreSQL store's schema, and the schema check ``serve``, ``check`` and ``audit`` make
"""
