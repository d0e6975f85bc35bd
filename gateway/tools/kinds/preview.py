"""The preview kind (``kind = "preview"``): reads the target, states the change, issues a plan
(gateway.tools.preview).

Its check reads a target that cannot exist (the read must answer 'not found'), then, when a read tool listed an
item, reads that item as a target and finds the id, version, summary and protection fields in it.
"""

from __future__ import annotations

from typing import Any

from gateway.catalog.published import named_version
from gateway.config import PreviewTool
from gateway.config.expressions import MISSING, at_path
from gateway.errors import Code, ToolError
from gateway.tools.kinds.checking import PROBE_ID, Checking, backend_says, explained
from gateway.tools.kinds.kind import Reads, ToolCall
from gateway.tools.preview import preview
from gateway.write.audited import Answer


class Preview(Reads[PreviewTool]):
    model = PreviewTool

    async def check(self, checking: Checking, name: str, config: PreviewTool) -> None:
        """The target read answers 'not found' for an absent id, and finds every configured field in a listed one."""
        probe, report, target = checking.probe, checking.report, config.target
        try:
            await probe.reader.get(target, PROBE_ID)
            report.problem(f"tools.{name}.target.get", f"reading a target that cannot exist ({PROBE_ID}) succeeded")
        except ToolError as err:
            if err.code != Code.TARGET_NOT_FOUND:
                report.problem(
                    f"tools.{name}.target.get.action",
                    f"{target.get.action!r} did not answer 'not found' for an absent id "
                    f"({await backend_says(probe, err, target.get.action, {})}); "
                    f"check the action name and target.not_found_text",
                )
                return
        report.notes.append(f"tools.{name}: {target.get.action!r} answers 'not found' for an absent {target.noun}")
        sample = checking.sample
        if sample is None:
            return
        for key in ("id", "key", "name"):
            if isinstance(sample.get(key), str):
                break
        else:
            return
        try:
            state = await probe.reader.get(target, sample[key])
        except ToolError as err:
            report.problem(f"tools.{name}.target.get", f"reading {sample[key]!r} failed: {explained(err)}")
            return
        if target.id_in(state) is MISSING:
            report.problem(f"tools.{name}.target.id_field", f"the {target.noun} has no string {target.id_field!r}")
        if target.version_in(state) is MISSING:
            report.problem(f"tools.{name}.target.version_field", f"the {target.noun} has no {target.version_field!r}")
        for field_name, summary in config.summary.items():
            if summary.target is not None and at_path(state, summary.target) is MISSING:
                report.problem(
                    f"tools.{name}.summary.{field_name}.target", f"the {target.noun} has no {summary.target!r}"
                )
        if target.protected_field is not None and at_path(state, target.protected_field) is MISSING:
            report.problem(
                f"tools.{name}.target.protected_field", f"the {target.noun} has no {target.protected_field!r}"
            )

    async def call(self, request: ToolCall[None], arguments: dict[str, Any]) -> Answer:
        """A caller-bound plan, its version under the configured name."""
        config = self.typed(request.published.config)
        body = await preview(request.gw, request.published.name, config, arguments, request.caller)
        return named_version(body, config.target.version_output)


PREVIEW = Preview()
