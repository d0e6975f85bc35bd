"""What every tool kind's config model answers, and how the kinds that write are confirmed.

A kind's config model is its TOML table: ``ReadTool`` (gateway.config.read), the planned pair ``PreviewTool`` and
``WriteTool`` (gateway.config.planned), ``PassthroughTool`` (gateway.config.passthrough), and the statement kinds
``StatementQueryTool``, ``StatementPreviewTool``, ``StatementExecuteTool`` (gateway.config.statements). The model
answers what is data about its tool, so that no caller tests its class:

    writes, relays                          asks and is recorded like a write; relays a backend's own tool
    default_scopes                          the scopes a caller needs when the tool states none
    face                                    title, description, schemas and hints (gateway.config.face)
    modes, prompt_seconds, write_timeout    the confirmation and the timeouts it configures
    lookups_named, plans_from               what it refers to: lookups, the tool whose plans it applies
    schema_preview                          the tool whose inputs and plan its schemas show
    template_names, summary_names,          what a plan it issues holds (a preview): the names a write's payload
    plan_fields, enum_lookups               may use, its numbers, the fields a client sees, the lookups offered
    relayed, republishes_god_tool           the backend tool it relays; the override that lets it be a god-tool
    statements_named                        the ``[statements.NAME]`` it holds statements to
    stated_risk, approval_recommendation    its risk beyond its hints, and how many people it asks (SEP-2793)
    backend_action                          what ``check``'s table says it calls
    check_references                        its references, held against the whole config when it loads

``ToolKind`` asks each question with the answer most kinds give; a kind overrides what differs. What a kind does
(its ``check`` step, its calls) needs the backends and the running gateway, above the config: each kind is one
object of the kind registry (gateway.tools.kinds), which holds its model and is the one place that tells the
models apart. A new kind is its model, its entry in ``gateway.config.ToolConfig`` and its module in the registry.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

from pydantic import Field, model_validator

from gateway.config.approvals import ApprovalRule, ApprovalsSection, passkey_refusal
from gateway.config.face import Face
from gateway.config.identities import space_refusal
from gateway.config.risk import NOTHING_STATED, Recommendation, StatedRisk
from gateway.config.sections import AuthSection, Model, RateLimit

if TYPE_CHECKING:  # a backend's listing, for annotations only: the config loads no MCP types
    from mcp_types import Tool

READ_SCOPES = ["tenants:read"]
WRITE_SCOPES = ["tenants:reset"]


@dataclass(frozen=True)
class Sources:
    """What a tool's face is built from beyond its own table; the catalog gathers it (gateway.catalog.published)."""

    preview: ToolKind | None
    """The tool whose inputs and plan the tool shows (``schema_preview``)."""
    enums: Mapping[str, list[str]]
    """The names offered of each lookup an input enum reads."""
    listing: Sequence[Tool]
    """The tools of the backend that serves it, as its ``tools/list`` says."""
    whole: Whole | None = None
    """The whole config, for a tool whose face names its partners or a top-level table (statements)."""


class Whole(Protocol):
    """The whole config, as a tool's references are held against it (gateway.config.GatewayConfig)."""

    @property
    def tools(self) -> Mapping[str, ToolKind]: ...

    @property
    def lookups(self) -> Mapping[str, object]: ...

    @property
    def statements(self) -> Mapping[str, object]: ...

    @property
    def approvals(self) -> ApprovalsSection: ...

    @property
    def auth(self) -> AuthSection: ...

    def oidc_issuer(self) -> str | None: ...


class ToolKind(Model):
    """What every kind of tool answers; the access fields (backend, scopes, visibility, rate limit) are shared."""

    backend: str | None = None
    scopes: list[str] | None = None
    hidden_when_unauthorized: bool = True
    rate_limit: RateLimit | None = None

    @property
    def writes(self) -> bool:
        """Whether a call asks the user and is recorded like a planned write."""
        return False

    @property
    def relays(self) -> bool:
        """Whether it relays one of its backend's own tools (whose listing its face needs) instead of the god-tool."""
        return False

    def default_scopes(self) -> list[str]:
        """The scopes a caller needs when the tool states none."""
        return READ_SCOPES

    def modes(self) -> set[str]:
        """Every confirmation mode a call can get (``form``, ``typed``, ``url``); none for a tool that never asks."""
        return set()

    def own_passkey(self) -> str | None:
        """Its own ``passkey`` setting (None: ``[approvals] passkey`` decides, or it never asks people)."""
        return None

    def prompt_seconds(self) -> float | None:
        """How long a prompt for this tool may wait, when its kind configures one."""
        return None

    def write_timeout(self) -> tuple[str, float] | None:
        """The key and seconds of this tool's own timeout for a call that writes, when it sets one."""
        return None

    def lookups_named(self) -> dict[str, str]:
        """The lookups it reads, by the key (under ``tools.NAME``) that names each."""
        return {}

    def plans_from(self) -> str | None:
        """The tool whose plans it applies (a write: its preview), whose backend serves it when it names none."""
        return None

    def schema_preview(self, name: str) -> str | None:
        """The preview tool whose inputs and plan its schemas show (a preview: itself, named ``name``)."""
        return None

    def template_names(self) -> set[str] | None:
        """The names a plan it issues offers a write's payload and message; None for a tool that issues none."""
        return None

    def summary_names(self) -> set[str]:
        """The numbers a plan it issues states (a write's ``result`` may name them)."""
        return set()

    def plan_fields(self, enums: Mapping[str, list[str]]) -> tuple[dict[str, Any], list[str]] | None:
        """The fields a plan it issues shows a client, and those always present; None for a tool that issues none."""
        return None

    def enum_lookups(self) -> list[str]:
        """The lookups whose names an input offers as its enum."""
        return []

    def relayed(self, name: str) -> str | None:
        """The backend's own tool it relays when published as ``name``, or None (it calls the god-tool)."""
        return None

    def statements_named(self) -> str | None:
        """The ``[statements.NAME]`` whose statements it runs or plans (gateway.config.statements), or None."""
        return None

    def republishes_god_tool(self) -> bool:
        """Whether the operator insists on publishing a god-tool through it (gateway.config.passthrough)."""
        return False

    def stated_risk(self) -> StatedRisk:
        """What the config says of its risk beyond its four hints (gateway.config.risk): nothing, unless its kind
        knows more (a planned write reaches one target) or the operator stated it (a pass-through tool)."""
        return NOTHING_STATED

    def approval_recommendation(self) -> Recommendation:
        """How many people its calls are put to: none for a tool that never asks."""
        return "none"

    def check_references(self, name: str, whole: Whole) -> None:
        """Raise ValueError naming the key when something it refers to is not in the config as it needs it."""
        for key, lookup in self.lookups_named().items():
            if lookup not in whole.lookups:
                raise ValueError(f"tools.{name}.{key}: no lookup named {lookup!r}")

    @abstractmethod
    def backend_action(self, name: str) -> str:
        """What it calls on its backend, as ``check``'s tool table shows it."""

    @abstractmethod
    def face(self, name: str, sources: Sources) -> Face:
        """Its title, description, schemas and hints (Misfit when it cannot fit what its backend offers)."""


class ConfirmedTool(ToolKind):
    """How a tool's writes are confirmed: the tool's own ``confirm`` and its ordered approval rules (planned writes
    and pass-through tools that write alike; gateway.approvals.policy decides with them)."""

    confirm: Literal["form", "typed", "url"] = "form"
    approvers: int = Field(1, ge=1, le=10)
    four_eyes: bool = False
    approval: list[ApprovalRule] = []
    """Ordered rules choosing each write's mode; none holding (or none given) leaves ``confirm``."""
    prompt_timeout_seconds: float = Field(300.0, gt=0)
    idempotency_retention_seconds: int = Field(86_400, ge=60)
    passkey: Literal["off", "required"] | None = None
    """``required``: people approve its writes on the page only with a passkey signature (unset: ``[approvals]
    passkey``)."""

    @model_validator(mode="after")
    def _approvers_need_the_page(self) -> ConfirmedTool:
        if self.confirm != "url" and (self.approvers != 1 or self.four_eyes):
            raise ValueError("approvers and four_eyes need confirm = 'url' (people approve on the approval page)")
        names = [rule.name for rule in self.approval]
        if len(names) != len(set(names)):
            raise ValueError("every approval rule needs its own name")
        return self

    def approval_recommendation(self) -> Recommendation:
        """``multi`` when its own confirm or any of its rules puts a write to more than one person or to four
        eyes (the most a call can meet), else ``single``: every write is confirmed by a person."""
        if not self.writes:
            return "none"
        asks = [(self.approvers, self.four_eyes)] if self.confirm == "url" else []
        asks += [(rule.approvers, rule.four_eyes) for rule in self.approval if rule.mode == "url"]
        return "multi" if any(approvers > 1 or four_eyes for approvers, four_eyes in asks) else "single"

    def policy_of(self, rule: str | None) -> dict[str, Any]:
        """The definition of the rule named (or, for None, of the tool's own confirm) as a person's approval binds
        it (gateway.approvals.digest: its version is part of what they approve)."""
        for each in self.approval:
            if each.name == rule:
                return each.model_dump(mode="json")
        return {"confirm": self.confirm, "approvers": self.approvers, "four_eyes": self.four_eyes}

    def own_passkey(self) -> str | None:
        return self.passkey

    def modes(self) -> set[str]:
        """Every confirmation mode a write of this tool can get."""
        on_error = {rule.on_error for rule in self.approval if rule.on_error is not None}
        return {self.confirm, *(rule.mode for rule in self.approval), *on_error}

    def check_references(self, name: str, whole: Whole) -> None:
        """Its rules' webhooks, and for url mode the approvers who can sign in (and tell themselves apart from the
        caller, for four eyes)."""
        super().check_references(name, whole)
        if not self.writes:  # a tool whose calls do not write is never confirmed (its own validator says so)
            return
        approvals, auth, issuer = whole.approvals, whole.auth, whole.oidc_issuer()
        for index, rule in enumerate(self.approval):
            if rule.notify is not None and rule.notify not in approvals.webhooks:
                named = ", ".join(sorted(approvals.webhooks)) or "none is configured"
                raise ValueError(
                    f"tools.{name}.approval.{index}.notify: rule {rule.name!r} notifies {rule.notify!r}, which is not "
                    f"a webhook of [approvals.webhooks] ({named}); name one of them, or add that table"
                )
        four_eyes = self.four_eyes or any(rule.four_eyes for rule in self.approval)
        if "url" not in self.modes():
            return
        if self.passkey == "required":
            passkeys = passkey_refusal(approvals.public_url)
            if passkeys is not None:
                raise ValueError(f"tools.{name}.passkey {passkeys}")
        if not approvals.configured:
            raise ValueError(
                f"tools.{name}.confirm 'url' needs approvers who can sign in: [[approvals.tokens]] or [approvals.oidc]"
            )
        if approvals.login == "oidc" and not approvals.approvers.configured:
            raise ValueError(
                f"tools.{name}.confirm 'url' with approvals.login 'oidc' needs [approvals.approvers] (subjects, emails,"
                " or claim and values): otherwise everyone the identity provider signs in could approve"
            )
        if four_eyes and auth.verifier == "none":
            raise ValueError(
                f"tools.{name}.four_eyes needs an [auth] verifier: without one the gateway cannot tell the caller apart"
            )
        if approvals.login == "oidc" and issuer is None:
            raise ValueError("approvals.oidc.issuer is needed: no [auth.jwt] issuer or auth.authorization_servers")
        needed = max([self.approvers, *(rule.approvers for rule in self.approval)])
        refusal = space_refusal(name, four_eyes, needed, auth, approvals, issuer)
        if refusal is not None:
            raise ValueError(refusal)


def tags_of(models: Sequence[type[ToolKind]]) -> tuple[str, ...]:
    """The ``kind`` each model declares, in order: what a tool's table may say it is."""
    return tuple(tag for model in models for tag in get_args(model.model_fields["kind"].annotation))
