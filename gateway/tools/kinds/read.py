"""The read kind (``kind = "read"``): one bounded page of a backend list (gateway.tools.listing).

Its check calls the mapped list action, says how many items it listed, and finds the sort key and every projected
field in the first; that item is what the target reads of the previews are then tried with.
"""

from __future__ import annotations

from typing import Any

from gateway.config import ReadTool
from gateway.config.expressions import MISSING, at_path
from gateway.errors import ToolError
from gateway.tools.kinds.checking import Checking, backend_says, peek
from gateway.tools.kinds.kind import Reads, ToolCall
from gateway.tools.listing import list_page
from gateway.write.audited import Answer


class Read(Reads[ReadTool]):
    model = ReadTool
    checked_before_lookups = True

    async def check(self, checking: Checking, name: str, config: ReadTool) -> None:
        """The list action answers with items that have the sort key and every projected field."""
        probe, report = checking.probe, checking.report
        try:
            items = await probe.reader.items(config.call)
        except ToolError as err:
            report.problem(f"tools.{name}.call", await backend_says(probe, err, config.call.action, {}))
            return
        report.notes.append(f"tools.{name}: {config.call.action!r} lists {len(items)} items")
        if not items:
            return
        first = items[0]
        if at_path(first, config.sort_key) is MISSING:
            report.problem(f"tools.{name}.sort_key", f"the backend's items have no {config.sort_key!r}")
        for field_name, output in config.fields.items():
            if at_path(first, output.source) is MISSING:
                report.problem(
                    f"tools.{name}.fields.{field_name}.from",
                    f"the backend's items have no {output.source!r} (an item looks like {peek(first)})",
                )
        if isinstance(first, dict) and first:
            checking.sample = first

    async def call(self, request: ToolCall[None], arguments: dict[str, Any]) -> Answer:
        """One page of the backend's list."""
        return await list_page(request.gw, request.published.name, self.typed(request.published.config), arguments)


READ = Read()
