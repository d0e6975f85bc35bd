"""The approval page: server-rendered HTML; its forms need no JavaScript (a static script adds local times), but
where passkeys are required a decision is signed by the authenticator through passkey.js.

    GET  /approvals              the writes waiting (signed in), each with a box to select it; ``?show=`` the
                                 approved, applied, not applied, rejected or expired ones, or all, newest first
    POST /approvals              a batch decision on the selected ones (each its own decision and audit entry);
                                 a Reject asks once more (``confirmed=yes``) before it is recorded
    GET  /approvals/{id}         one write's facts in the gateway's own words and where it stands: Approve /
                                 Reject while it waits, then whether the write ran (gateway/http/page/views.py)
    POST /approvals/{id}         a decision: the session's CSRF token, from this page's own origin; Reject asks
                                 once more
    GET  /approvals/page.css, page.js   the stylesheet, and the script that shows each time in the viewer's zone
    GET  /approvals/passkey.js   the script that asks the authenticator (gateway/http/page/passkeys.py)
    GET  /approvals/passkeys     the person's passkeys and a form that registers one
    POST /approvals/passkeys     a registration, checked and stored
    GET  /approvals/api/open     the same list as JSON, for ``mcp-safety-gateway approvals`` (approver token)
    POST /approvals/api/{id}     a decision as JSON ``{"decision"}``; these two are gateway/http/page/api.py
    GET  /approvals/login        approver token form, or off to the identity provider
    POST /approvals/login        an approver token
    GET  /approvals/callback     back from the identity provider
    POST /approvals/logout

Every answer, the JSON API's and a store failure's (one exception handler, ``store_unavailable``) included, is
``no-store`` with a Content-Security-Policy that allows nothing but this origin's stylesheet, script and forms
(no inline script)
(``frame-ancestors 'none'``: no other page can frame it and trick a click). Every form POST passes one guard
(``_form_from_page``): this page's own origin and the CSRF token it was given. Every value that came from the
backend or the caller is HTML-escaped by the templates and shown quoted, with invisible characters spelled out
(gateway/text.py). Decisions from the forms and the API are recorded the same way (gateway/http/page/decisions.py).
"""

from __future__ import annotations

import hmac
import logging
import secrets
from functools import partial
from math import ceil
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote, urlsplit

from fido2.utils import websafe_encode
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from gateway.approvals.lifecycle import Refused, Shown, State, approval_url, approved_by, may_decide, shown, state
from gateway.http.page import passkeys as passkey_page
from gateway.http.page.api import ApprovalApi, api_answer
from gateway.http.page.decisions import HEADERS, TooManyAttempts, approver_by_token, record, source_of
from gateway.http.page.login import Approver, LoginFailed, OidcClient
from gateway.http.page.session import LOGIN_COOKIE, LOGIN_SECONDS, SESSION_COOKIE, Sessions, Signer
from gateway.http.page.views import FILTERS, REFUSALS, TOO_MANY, VERDICTS, Row, headline, label, rows, tool_facts
from gateway.http.page.views import filters as view_filters
from gateway.records import Approval, ApproverSession, Passkey
from gateway.runtime import Gateway
from gateway.text import quoted, rfc3339
from gateway.text import shown as shown_value

log = logging.getLogger(__name__)
TEMPLATES = Path(__file__).resolve().parent / "templates"


class ApprovalPage:
    """The page's handlers, sharing the templates, the session signer and the login client."""

    def __init__(self, gw: Gateway) -> None:
        self.gw = gw
        config = gw.config.approvals
        self.sessions = Sessions(gw)
        self.login_state = Signer(gw.keys, f"login:{gw.approvals_url}")
        self.enrolment = Signer(gw.keys, f"passkey-enrol:{gw.approvals_url}")
        self.api = ApprovalApi(gw)
        self.oidc: OidcClient | None = None
        issuer = gw.config.oidc_issuer()
        if config.login == "oidc" and config.oidc is not None and issuer is not None:
            callback = f"{gw.approvals_url}/approvals/callback"
            self.oidc = OidcClient(config.oidc, issuer, callback, config.approvers.kept_claims, config.display_claim)
        self.templates = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(default=True))
        self.templates.filters.update(
            shown=shown_value,
            when=rfc3339,
            quoted_value=_quoted_value,
            approval_path=partial(approval_url, ""),
            **view_filters(),
        )

    def routes(self) -> list[Route]:
        """Every route of the page."""
        return [
            Route("/approvals", self.listing, methods=["GET"]),
            Route("/approvals", self.batch, methods=["POST"]),
            *self.api.routes(),
            Route("/approvals/page.css", self.stylesheet, methods=["GET"]),
            Route("/approvals/page.js", self.script, methods=["GET"]),
            Route("/approvals/passkey.js", self.script, methods=["GET"]),
            Route("/approvals/passkeys", self.passkeys, methods=["GET"]),
            Route("/approvals/passkeys", self.enrol, methods=["POST"]),
            Route("/approvals/login", self.login_form, methods=["GET"]),
            Route("/approvals/login", self.login_with_token, methods=["POST"]),
            Route("/approvals/callback", self.callback, methods=["GET"]),
            Route("/approvals/logout", self.logout, methods=["POST"]),
            Route("/approvals/{approval_id}", self.detail, methods=["GET"]),
            Route("/approvals/{approval_id}", self.decision, methods=["POST"]),
        ]

    async def listing(self, request: Request) -> Response:
        session = await self._session(request)
        if session is None:
            return self._to_login("/approvals")
        return await self._list(session, request.query_params.get("show", "waiting"), None)

    async def batch(self, request: Request) -> Response:
        """Several selected approvals decided in one step; each is still its own decision and audit entry. A Reject
        asks once more first (it ends the plans)."""
        posted = await self._signed_in_form(request)
        if posted is None:
            return self._forged()
        session, form = posted
        verdict = form.get("decision")
        chosen = list(dict.fromkeys(value for value in form.getlist("approval") if isinstance(value, str)))
        if verdict not in ("approve", "reject") or not chosen:
            return self._message(session, "Nothing decided", "Select approvals, then Approve or Reject.", 400)
        if verdict == "reject" and form.get("confirmed") != "yes":
            return await self._confirm_reject(session, "/approvals", chosen)
        answer: Literal["approve", "reject"] = "approve" if verdict == "approve" else "reject"
        results = []
        for approval_id in chosen:
            approval, refused = await record(self.gw, approval_id, session, answer)
            done = "approved" if answer == "approve" else "rejected"
            outcome = "no such approval" if approval is None else REFUSALS[refused] if refused else done
            results.append((approval_id, outcome))
        return await self._list(session, "waiting", results)

    async def detail(self, request: Request) -> Response:
        session = await self._session(request)
        approval_id = request.path_params["approval_id"]
        if session is None:
            return self._to_login(approval_url("", approval_id))
        approval = await self.gw.store.get_approval(approval_id)
        if approval is None:
            return self._message(session, "No such approval", "There is no approval by that id.", 404)
        notice = request.query_params.get("notice")
        return await self._detail(session, approval, REFUSALS.get(Refused(notice)) if notice in set(Refused) else None)

    async def decision(self, request: Request) -> Response:
        posted = await self._signed_in_form(request)
        if posted is None:
            return self._forged()
        session, form = posted
        verdict = form.get("decision")
        if verdict not in ("approve", "reject"):
            return self._message(session, "Refused", "Choose Approve or Reject.", 400)
        approval_id = request.path_params["approval_id"]
        if verdict == "reject" and form.get("confirmed") != "yes":
            return await self._confirm_reject(session, approval_url("", approval_id), [approval_id])
        answer: Literal["approve", "reject"] = "approve" if verdict == "approve" else "reject"
        approval, refused = await record(self.gw, approval_id, session, answer, passkey_page.assertion_of(form))
        if approval is None:
            return self._message(session, "No such approval", "There is no approval by that id.", 404)
        suffix = f"?notice={refused.value}" if refused is not None else ""
        return self._redirect(approval_url("", approval_id) + suffix)

    async def passkeys(self, request: Request, notice: str | None = None, status: int = 200) -> Response:
        """The person's passkeys and a form that registers one more (its challenge signed into the form)."""
        session = await self._session(request)
        if session is None:
            return self._to_login("/approvals/passkeys")
        keys = await passkey_page.own_passkeys(self.gw, session.person)
        challenge = passkey_page.new_challenge()
        kept = {"session": session.session_id, "challenge": websafe_encode(challenge)}
        state = self.enrolment.sign({**kept, "exp": self.gw.clock() + passkey_page.ENROL_SECONDS})
        options = passkey_page.registration_options(self.gw, session, keys, challenge)
        if notice is None and not passkey_page.fresh(self.gw, session):
            notice = passkey_page.STALE_SIGN_IN
        response = self._render(
            "passkeys.html", session, keys=keys, options=options, state=state, notice=notice, passkeys=True
        )
        response.status_code = status
        return response

    async def enrol(self, request: Request) -> Response:
        posted = await self._signed_in_form(request)
        if posted is None:
            return self._forged()
        session, form = posted
        kept = self.enrolment.unsign(str(form.get("state") or ""), self.gw.clock())
        if kept is None:
            return await self.passkeys(request, "That registration form expired; register again.", 400)
        key, said = await passkey_page.enrol(self.gw, session, kept, form)
        return await self.passkeys(request, said, 200 if key is not None else 400)

    async def login_form(self, request: Request) -> Response:
        target = _safe_next(request.query_params.get("next"))
        if self.oidc is not None:
            try:
                location, kept = await self.oidc.start()
            except LoginFailed as exc:
                log.warning("approver login could not start: %s", exc)
                return self._message(None, "Sign-in unavailable", "The identity provider cannot be reached.", 503)
            redirect = self._redirect(location)
            self._set_login_state(redirect, {**kept, "next": target})
            return redirect
        csrf = secrets.token_urlsafe(24)
        form = self._render("login.html", None, csrf=csrf, next=target, notice=None)
        self._set_login_state(form, {"csrf": csrf, "next": target})
        return form

    async def login_with_token(self, request: Request) -> Response:
        kept = self.login_state.unsign(request.cookies.get(LOGIN_COOKIE), self.gw.clock())
        form = await self._form_from_page(request, kept.get("csrf") if kept is not None else None)
        if kept is None or form is None:
            return self._forged("the sign-in page")
        token = form.get("token")
        try:
            approver = await approver_by_token(self.gw, source_of(request), token) if isinstance(token, str) else None
        except TooManyAttempts as slow:
            response = self._message(None, "Too many attempts", TOO_MANY.format(seconds=ceil(slow.retry_after)), 429)
            response.headers["Retry-After"] = str(ceil(slow.retry_after))
            return response
        if approver is None:
            csrf = secrets.token_urlsafe(24)
            response = self._render(
                "login.html", None, csrf=csrf, next=kept.get("next", "/approvals"), notice="That token is not valid."
            )
            self._set_login_state(response, {"csrf": csrf, "next": kept.get("next", "/approvals")})
            response.status_code = 401
            return response
        return await self._signed_in(approver, _safe_next(kept.get("next")))

    async def callback(self, request: Request) -> Response:
        kept = self.login_state.unsign(request.cookies.get(LOGIN_COOKIE), self.gw.clock())
        code, state_param = request.query_params.get("code"), request.query_params.get("state")
        if self.oidc is None or kept is None or not code or not state_param:
            return self._message(None, "Sign-in failed", "Start again from the approval link.", 400)
        try:
            approver = await self.oidc.finish(code, state_param, kept)
        except LoginFailed as exc:
            log.warning("approver login refused: %s", exc)
            return self._message(None, "Sign-in failed", "The identity provider's answer did not hold.", 401)
        return await self._signed_in(approver, _safe_next(kept.get("next")))

    async def logout(self, request: Request) -> Response:
        if await self._signed_in_form(request) is None:
            return self._forged()
        await self.sessions.end(request.cookies.get(SESSION_COOKIE))  # revoked in the store, for every replica
        response = self._message(None, "Signed out", "You are signed out.", 200)
        response.delete_cookie(SESSION_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
        return response

    async def stylesheet(self, request: Request) -> Response:
        css = (TEMPLATES / "page.css").read_text()
        return Response(css, media_type="text/css", headers={**HEADERS, "Cache-Control": "max-age=300"})

    async def script(self, request: Request) -> Response:
        """The page's scripts: page.js adds each time in the viewer's own zone (the page works without it);
        passkey.js asks the authenticator where a passkey is required or being registered."""
        js = (TEMPLATES / request.url.path.rpartition("/")[2]).read_text()
        return Response(js, media_type="text/javascript", headers={**HEADERS, "Cache-Control": "max-age=300"})

    async def store_unavailable(self, request: Request, exc: Exception) -> Response:
        """The one answer of every page route whose store cannot be reached: 503 with the page's headers."""
        log.warning("approval page: the store is unavailable (%s)", type(exc).__name__)
        if request.url.path.startswith("/approvals/api/"):
            return api_answer({"error": "the gateway's store cannot be reached right now; try again"}, 503)
        text = "The gateway's store cannot be reached right now."
        return self._message(None, "Try again", text, 503)

    async def _list(self, session: ApproverSession, show: str, results: list[tuple[str, str]] | None) -> Response:
        show = show if show in FILTERS else "waiting"
        found = await rows(self.gw, session.person, show)
        return self._render("list.html", session, rows=found, results=results, show=show, filters=FILTERS)

    async def _confirm_reject(self, session: ApproverSession, action: str, chosen: list[str]) -> Response:
        """Reject asks once more: the writes it would end, with a button that says so."""
        now, found = self.gw.clock(), []
        for approval_id in chosen:
            approval = await self.gw.store.get_approval(approval_id)
            if approval is not None:
                found.append(Row(approval, shown(approval, now), not may_decide(approval, session.person)))
        if not found:
            return self._message(session, "No such approval", "There is no approval by that id.", 404)
        keys = await self._own_passkeys(session, found[0].approval)
        sign = passkey_page.signing(self.gw, found[0].approval, "reject", keys, session.person)
        sign = sign if len(found) == 1 else None  # several at once cannot be signed: each on its own page
        return self._render("confirm.html", session, rows=found, action=action, sign=sign, passkeys=sign is not None)

    async def _detail(self, session: ApproverSession, approval: Approval, notice: str | None) -> Response:
        now = self.gw.clock()
        keys = await self._own_passkeys(session, approval)
        sign = {verdict: passkey_page.signing(self.gw, approval, verdict, keys, session.person) for verdict in VERDICTS}
        current, where = state(approval, now), shown(approval, now)
        own = not may_decide(approval, session.person)
        decided = any(decision.approver == session.person for decision in approval.decisions)
        authorized = self.gw.config.approvals.approvers.admits(session.facts)
        if not authorized:
            notice = notice or REFUSALS[Refused.NOT_AN_APPROVER]
        return self._render(
            "detail.html",
            session,
            approval=approval,
            approved=approved_by(approval),
            state=label(where),
            shown=where.value,
            headline=headline(approval, now),
            tool=tool_facts(self.gw, approval.tool),
            refresh=where in (Shown.APPROVED, Shown.RUNNING),
            own=own,
            can_decide=current is State.PENDING and authorized and not own and not decided,
            notice=notice,
            notice_kind="refused" if notice else "",
            sign=sign,
            passkeys=sign["approve"] is not None,
        )

    async def _own_passkeys(self, session: ApproverSession, approval: Approval) -> list[Passkey]:
        """The person's passkeys, read only where this approval needs one."""
        if not self.gw.config.passkey_required(approval.tool):
            return []
        return await passkey_page.own_passkeys(self.gw, session.person)

    async def _signed_in(self, approver: Approver, target: str) -> Response:
        _, cookie = await self.sessions.start(approver)
        response = self._redirect(target)
        response.set_cookie(
            SESSION_COOKIE,
            cookie,
            max_age=int(self.gw.config.approvals.session_seconds),
            path="/",
            secure=True,
            httponly=True,
            samesite="lax",
        )
        response.delete_cookie(LOGIN_COOKIE, path="/", secure=True, httponly=True, samesite="lax")
        return response

    def _set_login_state(self, response: Response, data: dict[str, Any]) -> None:
        value = self.login_state.sign({**data, "exp": self.gw.clock() + LOGIN_SECONDS})
        response.set_cookie(
            LOGIN_COOKIE, value, max_age=LOGIN_SECONDS, path="/", secure=True, httponly=True, samesite="lax"
        )

    async def _session(self, request: Request) -> ApproverSession | None:
        return await self.sessions.read(request.cookies.get(SESSION_COOKIE))

    async def _signed_in_form(self, request: Request) -> tuple[ApproverSession, FormData] | None:
        """The signed-in session and the form it POSTed from this page, or None."""
        session = await self._session(request)
        form = await self._form_from_page(request, session.csrf if session is not None else None)
        return (session, form) if session is not None and form is not None else None

    async def _form_from_page(self, request: Request, csrf: str | None) -> FormData | None:
        """The POSTed form when it came from this page: its own origin, with the CSRF token it was given."""
        form = await request.form()
        return form if self._same_origin(request) and _token_matches(form.get("csrf"), csrf) else None

    def _same_origin(self, request: Request) -> bool:
        """A POST from a page of another origin is refused (the CSRF token is the main guard; this is a second)."""
        origin = request.headers.get("origin")
        if origin is None or origin == "null":
            return origin is None
        base = self.gw.approvals_url
        return base is not None and _origin(origin) == _origin(base)

    def _render(self, template: str, session: ApproverSession | None, **values: Any) -> HTMLResponse:
        html = self.templates.get_template(template).render(
            gateway_name=self.gw.config.gateway.name, session=session, **values
        )
        return HTMLResponse(html, headers=HEADERS)

    def _message(self, session: ApproverSession | None, title: str, text: str, status: int) -> HTMLResponse:
        response = self._render("message.html", session, title=title, text=text)
        response.status_code = status
        return response

    def _redirect(self, location: str) -> RedirectResponse:
        return RedirectResponse(location, status_code=303, headers=HEADERS)

    def _to_login(self, target: str) -> RedirectResponse:
        return self._redirect(f"/approvals/login?next={quote(target, safe='/')}")

    def _forged(self, page: str = "your signed-in page") -> HTMLResponse:
        return self._message(None, "Refused", f"This form did not come from {page}.", 403)


def _token_matches(sent: Any, expected: Any) -> bool:
    return isinstance(sent, str) and isinstance(expected, str) and hmac.compare_digest(sent, expected)


def _safe_next(target: Any) -> str:
    """Only a path of this page is a place to return to after signing in (no open redirect)."""
    if isinstance(target, str) and target.startswith("/approvals") and "//" not in target and "\\" not in target:
        return target
    return "/approvals"


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme, parts.netloc


def _quoted_value(value: Any) -> str:
    return quoted(value) if isinstance(value, str) else shown_value(value)
