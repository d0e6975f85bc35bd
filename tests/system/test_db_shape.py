"""A third god-tool shape served for real (`serve` over HTTP, the low-level-SDK backend as its stdio child): error
codes in the target's own noun, a lookup read from a list of objects, and the version under another name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.clients import ERAS, Answers, applied_body, error_code, new_key, preview
from tests.support.configs import write_config
from tests.support.processes import free_port, serve
from tests.support.profiles import DATABASES as DB

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[tuple[str, Path]]:
    """One real gateway over the database backend for the module: its URL and the backend's database file."""
    tmp = tmp_path_factory.mktemp("db_shape")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    async with serve(write_config(DB, tmp), port):
        async with client(url, "2026-07-28") as session:
            await session.list_tools()  # the backend has started and seeded its database
        yield url, tmp / "backend.db"


def client(url: str, era: str, answers: Answers | None = None) -> Client:
    if era == "2025-11-25":
        return Client(streamable_http_client(url), mode="legacy", elicitation_callback=answers)
    return Client(url, elicitation_callback=answers)


@pytest.mark.parametrize("era", ERAS)
async def test_a_missing_or_frozen_database_is_refused_in_the_databases_own_noun(
    served: tuple[str, Path], era: str
) -> None:
    url, db = served
    before = DB.write_count(db), DB.snapshot(db, DB.protected)
    async with client(url, era) as session:
        absent = await session.call_tool(DB.preview_tool, DB.preview_args(DB.absent))
        frozen = await session.call_tool(DB.preview_tool, DB.preview_args(DB.protected))
    assert error_code(absent) == "database_not_found"
    assert error_code(frozen) == "database_protected"
    assert (DB.write_count(db), DB.snapshot(db, DB.protected)) == before


@pytest.mark.parametrize("era", ERAS)
async def test_a_database_frozen_after_its_preview_is_refused_as_database_protected(
    served: tuple[str, Path], era: str
) -> None:
    url, db = served
    async with client(url, era, Answers()) as session:
        plan = await preview(session, DB, target=DB.spare)
        DB.set_protected(db, DB.spare, True)
        try:
            before = DB.write_count(db)
            result = await session.call_tool(DB.write_tool, {"planId": plan["planId"], "idempotencyKey": new_key()})
        finally:
            DB.set_protected(db, DB.spare, False)
    assert error_code(result) == "database_protected"
    assert DB.write_count(db) == before


async def test_the_templates_come_from_a_list_of_objects(served: tuple[str, Path]) -> None:
    url, _ = served
    async with client(url, "2026-07-28") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        plan = await preview(session, DB, variant=1)
        refused = await session.call_tool(DB.preview_tool, {**DB.preview_args(), "template": "rows"})
    assert tools[DB.preview_tool].input_schema["properties"]["template"]["enum"] == ["blank", "full", "sample"]
    assert plan["rowsInserted"] == 40
    assert error_code(refused) == "invalid_arguments"


@pytest.mark.parametrize("era", ERAS)
async def test_the_version_is_called_generation_in_the_preview_and_the_write_alike(
    served: tuple[str, Path], era: str
) -> None:
    url, db = served
    target = DB.main if era == ERAS[0] else DB.other
    answers = Answers()
    async with client(url, era, answers) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        generation = DB.version(db, target)
        plan = await preview(session, DB, target=target, variant=1)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        first = await session.call_tool(DB.write_tool, args)
        retry = await session.call_tool(DB.write_tool, args)
    for name in (DB.preview_tool, DB.write_tool):
        output = tools[name].output_schema or {}
        assert "generation" in output["properties"] and "version" not in output["properties"], name
    assert plan["generation"] == generation and "version" not in plan
    expected = {key: value for key, value in applied_body(plan, 0).items() if key != "version"}
    assert first.structured_content == {**expected, "generation": generation + 1}
    assert retry.structured_content == {**expected, "generation": generation + 1, "replayed": True}
    assert DB.applied(db, target, DB.choices[1]) and DB.version(db, target) == generation + 1
    assert answers.messages == [DB.message(plan)]
