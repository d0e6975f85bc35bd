"""Approval by people on the gateway's own page (``confirm = "url"``): a write waits until enough approvers
have signed in and said yes to exactly what the plan says; an agent cannot answer this for its user.

    rules     the pure part: an approval's state, who may decide, a decision's effect, the facts it binds
    session   the approver's signed-in session: a signed ``__Host-`` cookie with a CSRF token
    login     signing approvers in: OAuth 2.1 authorization code + PKCE against the identity provider, or an
              approver token from the config
    page      the routes: /approvals (the list), /approvals/{id} (one write, Approve / Reject), login, logout
    templates server-rendered HTML (Jinja2, autoescaped, no JavaScript)

The write path's side (creating the approval, telling the client, waiting for the decision) is
gateway/tools/approval.py; approvals live in the store, so any replica serves the page and the retry.
"""
