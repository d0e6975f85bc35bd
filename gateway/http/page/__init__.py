"""The approval page: people sign in and approve or reject writes that wait for them (``confirm = "url"``).

    session    the approver's signed-in session: kept in the store, named by a signed ``__Host-`` cookie bound to
               the page's public URL, checked against the config on every request; a CSRF token
    login      signing approvers in: OAuth 2.1 authorization code + PKCE against the identity provider, or an
               approver token from the config
    routes     /approvals (the list, by filter), /approvals/{id} (one write, Approve / Reject, then whether it
               ran), login, logout; the one CSRF + Origin guard, the one answer to a store failure
    views      what the page shows of an approval: where the write stands, the requester as a person, times
    api        /approvals/api: the same list and decisions as JSON, for ``mcp-safety-gateway approvals``
    passkeys   /approvals/passkeys: a person enrols passkeys; what a decision form asks the authenticator to sign
    decisions  what both share: the security headers, the open rows, approver tokens under their attempt limits,
               recording one decision (compare-and-set)
    templates  server-rendered HTML (Jinja2, autoescaped); forms without JavaScript, a static script (page.js)
               that adds each time in the viewer's own zone, and passkey.js where WebAuthn is needed

Mounted by gateway.http.app only where approvals are configured; the approval's lifecycle is gateway.approvals.
"""
