"""A write reports its steps (asking the user, calling the backend, done) to a client that sent a
progressToken, in both eras; a replay reports none, and a client that sent no token gets no notifications."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.runtime import Gateway
from gateway.write.progress import ASKING, CALLING, DONE
from tests.support.clients import Answers, connect, new_key, preview
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio


class Seen:
    """A progress callback that records (progress, message)."""

    def __init__(self) -> None:
        self.steps: list[tuple[float, str | None]] = []

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.steps.append((progress, message))

    @property
    def messages(self) -> list[str | None]:
        return [message for _, message in self.steps]


async def test_a_confirmed_write_reports_its_steps_and_a_replay_none(
    gw: Gateway, profile: Profile, db: Path, era: str
) -> None:
    seen, replay = Seen(), Seen()
    async with connect(gw, era, Answers()) as client:
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        before = profile.write_count(db)
        done = await client.call_tool(profile.write_tool, args, progress_callback=seen)
        again = await client.call_tool(profile.write_tool, args, progress_callback=replay)
    assert not done.is_error and not again.is_error
    assert profile.write_count(db) == before + 1
    # 2026-era clients are asked in a first round of their own, so "asking" comes once more there.
    assert seen.messages[-3:] == [ASKING, CALLING, DONE] and set(seen.messages[:-3]) <= {ASKING}
    last_round = [progress for progress, _ in seen.steps[-3:]]
    assert last_round == sorted(set(last_round))
    assert replay.steps == []


async def test_a_declined_write_stops_reporting_after_the_question(gw: Gateway, profile: Profile, era: str) -> None:
    seen = Seen()
    async with connect(gw, era, Answers("decline")) as client:
        args = {"planId": (await preview(client, profile))["planId"], "idempotencyKey": new_key()}
        await client.call_tool(profile.write_tool, args, progress_callback=seen)
    assert set(seen.messages) == {ASKING}
