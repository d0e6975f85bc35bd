"""The approval page: people sign in and approve or reject writes that wait for them (``confirm = "url"``).

    session    the approver's signed-in session: kept in the store, named by a signed ``__Host-`` cookie bound to
               the page's public URL, checked against the config on every request; a CSRF token
    login      signing approvers in: OAuth 2.1 authorization code + PKCE against the identity provider, or an
               approver token from the config
    routes     /approvals (the list), /approvals/{id} (one write, Approve / Reject), login, logout; the one
               CSRF + Origin guard, the one answer to a store failure
    api        /approvals/api: the same list and decisions as JSON, for ``mcp-safety-gateway approvals``
    decisions  what both share: the security headers, the open rows, approver tokens under their attempt limits,
               recording one decision (compare-and-set)
    templates  server-rendered HTML (Jinja2, autoescaped, no JavaScript)

Mounted by gateway.http.app only where approvals are configured; the approval's lifecycle is gateway.approvals.
"""
