"""Many callers previewing and resetting the same few targets at once: the backend's own write log ends
exactly equal to the gateway's audit of applied writes, and every target moved once per applied write."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import anyio
import pytest

from tests.support.clients import ERAS, Answers, connect, error_code, new_key, running_gateway
from tests.support.configs import gateway_config
from tests.support.profiles import Profile

pytestmark = pytest.mark.anyio
WORKERS, ROUNDS = 8, 5


async def test_a_load_run_writes_exactly_what_the_audit_says(tmp_path: Path, profile: Profile) -> None:
    db = tmp_path / "backend.db"
    targets = [profile.main, profile.other, profile.spare]
    config = gateway_config(profile, db, *profile.seed_demo, store=f"sqlite:{tmp_path}/gateway.db", state_dir=tmp_path)
    outcomes: Counter[str] = Counter()
    applied_per_target: Counter[str] = Counter()
    async with running_gateway(config, backend_in_process=True) as gw:
        before = {target: profile.version(db, target) for target in targets}

        async def worker(number: int) -> None:
            era = ERAS[number % 2]
            async with connect(gw, era, Answers()) as client:
                for round_ in range(ROUNDS):
                    target = targets[(number + round_) % len(targets)]
                    planned = await client.call_tool(profile.preview_tool, profile.preview_args(target, round_ % 2))
                    assert planned.structured_content is not None, planned.content
                    args = {"planId": planned.structured_content["planId"], "idempotencyKey": new_key()}
                    first = await client.call_tool(profile.write_tool, args)
                    if first.is_error:
                        outcomes[error_code(first)] += 1
                        continue
                    outcomes["applied"] += 1
                    applied_per_target[target] += 1
                    retry = await client.call_tool(profile.write_tool, args)
                    assert retry.structured_content == {**first.structured_content, "replayed": True}

        with anyio.fail_after(120):
            async with anyio.create_task_group() as tasks:
                for number in range(WORKERS):
                    tasks.start_soon(worker, number)
        audit = Counter([entry.outcome async for entry in gw.store.audit_entries()])
    assert set(outcomes) <= {"applied", "plan_stale"}
    assert outcomes["applied"] > 0
    assert profile.write_count(db) == audit["applied"] == outcomes["applied"]
    assert audit["replayed"] == outcomes["applied"]
    for target in targets:
        assert profile.version(db, target) == before[target] + applied_per_target[target]
