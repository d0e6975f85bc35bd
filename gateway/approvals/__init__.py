"""Approval by people (``confirm = "url"``): what an approval is, which rule picks a write's mode, who is told.

    lifecycle  the pure part: an approval's state, who may decide, a decision's effect, the facts it binds
    policy     approval rules in CEL: which mode (form, typed, url, deny) a write takes, from its facts
    notify     webhooks that tell people an approval waits (Slack or plain JSON), signed, in the background
    results    what became of an approved write (ran, refused with its code), kept on the approval for the page
    digest     one SHA-256 over the canonical facts a person approves, checked again when the write runs
    passkeys   a decision signed by the approver's own passkey over those facts: enrolment, the challenge, the
               assertion's checks (at the decision, at the write and in ``audit verify``)
    evidence   passkey approvals checked from audit entries alone, offline, and one plan's evidence bundle

The write path's side (creating the approval, telling the client, waiting for the decision) is
gateway/write/ask/people.py; the page people use is gateway/http/page/. Approvals live in the store, so any
replica serves the page and the retry.

Imported by the write package, the tools, the MCP surface (gateway.mcp), the HTTP page, the runtime and the CLI;
imports config, identity, stores, the audit (evidence reads its entries), records, errors, signing and text, never
the write package or an edge.
"""
