"""The published tools: names, annotations, strict input schemas and bounded output schemas, from config.

Each tool's kind answers with its face (gateway.config.kinds: schemas and hints); this module gathers what a face
is built from, makes its schemas portable and gives it validators; the tool's ``_meta`` carries its risk
(gateway.catalog.risk). The low-level MCP server validates nothing, so
each tool carries compiled validators for both directions: a compiled validator (gateway.catalog.schemas) that
answers valid / not valid, and ``jsonschema`` for what it cannot compile and for the message when a check fails.
``fits`` checks one field of a tool's output on its own, so that values from the backend (a version, a summary
number, an id) are checked where they enter, before they are planned, recorded or returned.

Some schemas need the backends: an input enum read from a lookup, a pass-through tool's schemas from its
backend's ``tools/list``. A ``Catalog`` holds the tools that could be built and, for the others, why not (their
backend is down, or a pass-through tool does not fit what its backend offers, which includes schemas whose patterns
could not be checked in linear time: gateway.catalog.patterns): a backend that is down takes only its own tools
away.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import mcp_types as types

from gateway.catalog import patterns
from gateway.catalog.risk import RISK_META, risk_of
from gateway.catalog.schemas import Check, check_of, compile_check, published, validator
from gateway.config import GatewayConfig, Limits, ToolConfig
from gateway.config.face import IDEMPOTENCY_KEY as IDEMPOTENCY_KEY  # named here for the write package
from gateway.config.face import PLAN_ID as PLAN_ID
from gateway.config.face import Misfit
from gateway.config.kinds import Sources
from gateway.errors import Code, ToolError
from gateway.text import escaped, is_plain, quoted

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublishedTool:
    """One tool as clients see it, with its config and validators (jsonschema's built on first need)."""

    name: str
    config: ToolConfig
    tool: types.Tool
    inputs_valid: Check | None = None
    outputs_valid: Check | None = None
    field_checks: dict[str, Check] = field(default_factory=dict)

    @cached_property
    def inputs(self) -> Validator:
        return validator(dict(self.tool.input_schema))

    @cached_property
    def outputs(self) -> Validator:
        return validator(dict(self.tool.output_schema or {}))

    def validate_arguments(self, arguments: dict[str, Any]) -> None:
        """Raise invalid_arguments naming the first problem; nothing is coerced."""
        if self.inputs_valid is not None and self.inputs_valid(arguments):
            return
        error = next(iter(sorted(self.inputs.iter_errors(arguments), key=lambda e: list(e.path))), None)
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "arguments"
            raise ToolError(
                Code.INVALID_ARGUMENTS,
                f"{self.name}: {where}: {_short(error.message)}. Fix the arguments to match the inputSchema.",
            )

    def validate_output(self, body: dict[str, Any]) -> None:
        """Raise ValueError when a structured result does not match the declared outputSchema."""
        if self.outputs_valid is not None and self.outputs_valid(body):
            return
        error = next(iter(self.outputs.iter_errors(body)), None)
        if error is not None:
            raise ValueError(f"{self.name} output does not match its outputSchema: {_short(error.message)}")

    def fits(self, name: str, value: Any) -> bool:
        """Whether one field of this tool's output may hold ``value`` (a field the output does not declare: no)."""
        check = self.field_checks.get(name)
        return check is not None and check(value)


@dataclass(frozen=True)
class Catalog:
    """The tools that are published now, and why each other configured tool is not."""

    tools: dict[str, PublishedTool]
    unavailable: dict[str, ToolError] = field(default_factory=dict)
    misfits: dict[str, Misfit] = field(default_factory=dict)


def needs(config: GatewayConfig, name: str) -> list[str]:
    """What a tool's schemas are built from: ``lookups.NAME`` (input enums) and ``backends.NAME`` (a pass-through
    tool's definition on its backend)."""
    if config.tools[name].relays:
        return [f"backends.{config.backend_of(name)}"]
    preview = config.preview_for(name)
    return [f"lookups.{lookup}" for lookup in preview.enum_lookups()] if preview is not None else []


def build_catalog(
    config: GatewayConfig,
    lookups: Mapping[str, Mapping[str, Any]],
    listings: Mapping[str, list[types.Tool]] | None = None,
    failures: Mapping[str, ToolError] | None = None,
    actions: Mapping[str, list[str]] | None = None,
) -> Catalog:
    """Every configured tool that can be built, ready to list and validate against. ``lookups`` supplies enum values,
    ``listings`` each backend's own tools; ``failures`` says which of those could not be read, and why; ``actions``
    the god-tool actions a backend stated are all it has (its refusal of an action that cannot exist)."""
    tools, unavailable, misfits = {}, {}, {}
    unknown = unknown_actions(config, actions or {})
    for name in config.tools:
        failed = [(failures or {})[need] for need in needs(config, name) if need in (failures or {})]
        if failed:
            unavailable[name] = failed[0]
            continue
        try:
            if name in unknown:
                raise unknown[name]
            tools[name] = publish(config, name, lookups, listings or {})
        except Misfit as misfit:
            log.error("%s is not published: %s", name, misfit)
            misfits[name] = misfit
            sentence = f" ({misfit})" if name in unknown else ""
            unavailable[name] = ToolError(
                Code.BACKEND_ERROR,
                f"{name} does not fit what its backend offers{sentence}; the operator must fix its config.",
            )
    return Catalog(tools, unavailable, misfits)


def unknown_actions(config: GatewayConfig, actions: Mapping[str, list[str]]) -> dict[str, Misfit]:
    """The planned writes whose god-tool action their backend says it does not have, and their previews: neither
    is published, so no plan is issued and nobody is asked to approve a write that can only fail."""
    found: dict[str, Misfit] = {}
    for name, tool in config.tools.items():
        preview, valid = tool.plans_from(), actions.get(config.backend_of(name))
        if not tool.writes or tool.relays or preview is None or valid is None:
            continue
        action = tool.backend_action(name)
        if action not in valid:
            listed = ", ".join(quoted(known) for known in valid[:20])
            misfit = Misfit(
                f"tools.{name}.call.action", f"{quoted(action)} is not one of the backend's actions: {listed}"
            )
            found[name] = found[preview] = misfit
    return found


def publish(
    config: GatewayConfig,
    name: str,
    lookups: Mapping[str, Mapping[str, Any]],
    listings: Mapping[str, list[types.Tool]],
) -> PublishedTool:
    """One configured tool as clients see it, with its validators (Misfit for a pass-through tool that does not fit)."""
    tool_config = config.tools[name]
    preview = config.preview_for(name)
    enums = {lookup: offered(lookup, lookups[lookup]) for lookup in (preview.enum_lookups() if preview else [])}
    face = tool_config.face(name, Sources(preview, enums, listings.get(config.backend_of(name), []), config))
    hints = face.hints
    tool = types.Tool(
        name=name,
        title=face.title,
        description=face.description,
        input_schema=published(face.input_schema),
        output_schema=published(face.output_schema),
        annotations=types.ToolAnnotations(
            title=face.title,
            read_only_hint=hints.read_only,
            destructive_hint=hints.destructive,
            idempotent_hint=hints.idempotent,
            open_world_hint=hints.open_world,
        ),
        _meta={RISK_META: risk_of(tool_config, hints)},
    )
    assert tool.output_schema is not None
    input_schema, output_schema = dict(tool.input_schema), dict(tool.output_schema)
    for side, schema in (("input", input_schema), ("output", output_schema)):
        if (why := patterns.refusal(schema)) is not None:  # a backend's schema is untrusted: never backtrack
            raise Misfit(f"tools.{name}", f"its {side} schema cannot be checked safely: {why}")
    return PublishedTool(
        name=name,
        config=tool_config,
        tool=tool,
        inputs_valid=compile_check(input_schema),
        outputs_valid=compile_check(output_schema),
        field_checks={name: check_of(schema) for name, schema in output_schema.get("properties", {}).items()},
    )


def named_version(body: dict[str, Any], name: str) -> dict[str, Any]:
    """A preview's or a write's answer with its version under the configured output name (``target.version_output``,
    the same for both). Plans and idempotency records keep it as ``version``: only what a client sees is renamed."""
    if name == "version" or "version" not in body:
        return body
    return {name if key == "version" else key: value for key, value in body.items()}


def offered(lookup: str, table: Mapping[str, Any]) -> list[str]:
    """The keys of a lookup a caller may choose: only names a person can read as they are (gateway/text.py).
    A key with control, bidi or format characters is the backend trying to make a prompt say something else."""
    hostile = [key for key in table if not is_plain(key)]
    if hostile:
        log.warning(
            "lookup %s: %d name(s) with invisible characters are not offered, e.g. %s",
            lookup,
            len(hostile),
            quoted(hostile[0], 80),
        )
    return sorted(key for key in table if is_plain(key))


def _short(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True)
class Oversize:
    """Where a JSON value passes a ``[limits]`` cap: ``cap`` is depth, elements or string; ``path`` the value's
    place (``cursor``, ``payload.items[3]``; empty for the whole), ``limit`` the cap's number."""

    cap: str
    path: str
    limit: int

    @property
    def setting(self) -> str:
        return f"limits.max_{self.cap}" + ("_bytes" if self.cap == "string" else "")


def refuse_oversized(arguments: Any, limits: Limits) -> None:
    """Refuse arguments past the configured caps with request_too_large, before any other work: the message names
    the argument and the limit, and so do the details."""
    past = oversized(arguments, limits)
    if past is None:
        return
    where = f"`{escaped(past.path, 120)}`" if past.path else "the arguments"
    said = {
        "string": f"The string at {where} is longer than {past.limit} bytes",
        "depth": f"The value at {where} is nested deeper than {past.limit} levels",
        "elements": f"The arguments hold more than {past.limit} values (objects, arrays, keys and items)",
    }[past.cap]
    raise ToolError(
        Code.REQUEST_TOO_LARGE,
        f"{said}, the most this gateway accepts ({past.setting}). Nothing was changed; send less.",
        details={"field": past.path or None, "limit": past.limit, "setting": past.setting},
    )


def beyond_limits(value: Any, limits: Limits) -> str | None:
    """Which of the ``[limits]`` caps a JSON value passes (``"depth"``, ``"elements"``, ``"string"``), or None.
    The same caps bound what a caller sends and what a pass-through tool's backend answers."""
    past = oversized(value, limits)
    return None if past is None else past.cap


Place = tuple[Any, str] | None
"""Where a value stands, as a linked list (the parent's place, this step): built in constant time per value, and
spelled out only for the one reported."""


def oversized(value: Any, limits: Limits) -> Oversize | None:
    """The first place a JSON value passes one of the ``[limits]`` caps, or None."""
    elements = 0
    stack: list[tuple[Any, int, Place]] = [(value, 1, None)]
    while stack:
        item, depth, place = stack.pop()
        elements += 1
        if depth > limits.max_depth:
            return Oversize("depth", _spelled(place), limits.max_depth)
        if elements > limits.max_elements:
            return Oversize("elements", "", limits.max_elements)
        if isinstance(item, str) and len(item.encode("utf-8", "surrogatepass")) > limits.max_string_bytes:
            return Oversize("string", _spelled(place), limits.max_string_bytes)
        if isinstance(item, dict):
            stack.extend((key, depth + 1, (place, " (a key)")) for key in item)
            stack.extend((inner, depth + 1, (place, f".{key}")) for key, inner in item.items())  # looked at first
        elif isinstance(item, list):
            stack.extend((inner, depth + 1, (place, f"[{index}]")) for index, inner in enumerate(item))
    return None


def _spelled(place: Place) -> str:
    steps = []
    while place is not None:
        place, step = place
        steps.append(step)
    return "".join(reversed(steps)).removeprefix(".")
