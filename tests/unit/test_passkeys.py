"""Passkey approvals in process, both eras: a yes counts only when the approver's own enrolled passkey signed the
exact write, and every forgery leaves the backend database as it was.

The gateway runs here with its backend; the agent is a real SDK client in memory; the approver uses the page
through its ASGI app with a software authenticator (tests/support/authenticator.py) that answers the challenge the
page's forms carry, as passkey.js hands it to the browser. Chromium's virtual authenticator drives the same page in
tests/system/test_passkeys_browser.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from fido2.utils import websafe_decode

from gateway.approvals import evidence, passkeys
from gateway.approvals.lifecycle import approval_id_for
from gateway.audit import entries
from gateway.config import parse_config
from gateway.http.app import build_app
from gateway.identity.person import person_id
from gateway.records import Approval, Decision, Passkey
from gateway.runtime import Gateway
from tests.support.approvals import PageUser, approvals_section, csrf_of, url_mode
from tests.support.authenticator import SoftAuthenticator
from tests.support.clients import Clock, connect, error_body, error_code, new_key, preview, running_gateway
from tests.support.configs import config_data, write_toml
from tests.support.profiles import TENANTS

pytestmark = pytest.mark.anyio
PAGE = "https://localhost:8443"
ERAS = ["2025-11-25", "2026-07-28"]
BOB = person_id("static", "bob")


@dataclass
class World:
    gw: Gateway
    db: Path
    app: Any
    clock: Clock


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async for made in world_with(tmp_path, "required"):
        yield made


async def world_with(tmp_path: Path, passkey: str) -> AsyncIterator[World]:
    db = tmp_path / "backend.db"
    data = config_data(
        TENANTS, db, *TENANTS.seed_demo, state_dir=tmp_path / "state", tools=url_mode(TENANTS.write_tool, timeout=2)
    )
    data["approvals"] = {**approvals_section(PAGE), "passkey": passkey}
    data["http"] = {"allowed_origins": [PAGE]}
    clock = Clock()
    async with running_gateway(parse_config(data), clock, backend_in_process=True) as gw:
        yield World(gw, db, build_app(gw), clock)


class Approver:
    """One person on the page with a browser session and an authenticator."""

    def __init__(self, world: World, who: str) -> None:
        self.user = PageUser(httpx.AsyncClient(transport=httpx.ASGITransport(app=world.app), base_url=PAGE), PAGE)
        self.who = who
        self.key = SoftAuthenticator("localhost", PAGE)

    async def __aenter__(self) -> Approver:
        assert (await self.user.sign_in(self.who)).status_code == 303
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.user.http.aclose()

    async def enrol(
        self, label: str = "laptop", new: SoftAuthenticator | None = None, step_up: SoftAuthenticator | None = None
    ) -> httpx.Response:
        """Register ``new`` (the person's own key by default), with ``step_up`` signing the form first."""
        page = await self.user.http.get("/approvals/passkeys")
        options = json.loads(_attribute(page.text, "data-enrol"))
        state = re.search(r'name="state" value="([^"]+)"', page.text)
        assert state is not None
        challenge = websafe_decode(options["challenge"])
        credential = (new or self.key).register(challenge)
        form = {"csrf": csrf_of(page.text), "state": state.group(1), "label": label}
        form["credential"] = json.dumps(credential)
        if step_up is not None:
            form["assertion"] = json.dumps(step_up.sign(challenge))
        return await self.user.post("/approvals/passkeys", form)

    async def sign_form(self, approval_id: str) -> dict[str, Any]:
        """The Approve form's signing data, as passkey.js reads it."""
        page = await self.user.http.get(f"/approvals/{approval_id}")
        return dict(json.loads(_attribute(page.text, "data-sign")), csrf=csrf_of(page.text))

    async def approve(self, approval_id: str, assertion: dict[str, Any] | None) -> httpx.Response:
        page = await self.user.http.get(f"/approvals/{approval_id}")
        form = {"csrf": csrf_of(page.text), "decision": "approve"}
        if assertion is not None:
            form["assertion"] = json.dumps(assertion)
        return await self.user.post(f"/approvals/{approval_id}", form)

    async def signed_approve(self, approval_id: str) -> httpx.Response:
        sign = await self.sign_form(approval_id)
        return await self.approve(approval_id, self.key.sign(websafe_decode(sign["challenge"])))


def _attribute(html: str, name: str) -> str:
    found = re.search(name + r"='([^']+)'", html)
    assert found is not None, html[:600]
    return found.group(1).replace("&#34;", '"').replace("&amp;", "&")


async def waiting_write(gw: Gateway, era: str, target: str | None = None) -> tuple[str, dict[str, str]]:
    """A write waiting on the page (its client cannot open links): its approval id and the write's arguments."""
    async with connect(gw, era) as client:
        plan = await preview(client, TENANTS, target)
        args = {"planId": plan["planId"], "idempotencyKey": new_key()}
        assert error_code(await client.call_tool(TENANTS.write_tool, args)) == "approval_pending"
    return approval_id_for(plan["planId"]), args


async def retry(gw: Gateway, era: str, args: dict[str, str]) -> Any:
    async with connect(gw, era) as client:
        return await client.call_tool(TENANTS.write_tool, args)


async def audit(gw: Gateway) -> list[Any]:
    return [entry async for entry in gw.store.audit_entries()]


@pytest.mark.parametrize("era", ERAS)
async def test_an_enrolled_passkeys_signature_over_the_exact_write_lets_it_run_once(world: World, era: str) -> None:
    approval_id, args = await waiting_write(world.gw, era)
    async with Approver(world, "bob") as bob:
        assert (await bob.enrol()).status_code == 200
        sign = await bob.sign_form(approval_id)
        approval = await world.gw.store.get_approval(approval_id)
        assert approval is not None
        facts = passkeys.signed_facts(approval, approval.digest, PAGE, "approve")
        assert websafe_decode(sign["challenge"]) == passkeys.challenge_of(facts)  # what the page asks to sign
        assert sign["rpId"] == "localhost" and sign["credentials"] == [bob.key.credential]
        assert (await bob.signed_approve(approval_id)).status_code == 303
    done = await retry(world.gw, era, args)
    assert not done.is_error, done.content
    assert TENANTS.write_count(world.db) == 1
    trail = await audit(world.gw)
    enrolled = [entry for entry in trail if entry.outcome == entries.PASSKEY]
    assert [(entry.confirmation, entry.extra["credentialId"]) for entry in enrolled] == [
        ("enrolled", bob.key.credential)
    ]
    decision = next(entry for entry in trail if entry.outcome == entries.APPROVAL)
    assert (
        decision.extra["passkey"]["credentialId"] == bob.key.credential and decision.extra["passkey"]["signed"] == facts
    )
    applied = next(entry for entry in trail if entry.outcome == entries.APPLIED)
    assert applied.extra["passkey"] == "required" and applied.extra["approvers"][0]["passkey"] == bob.key.credential
    assert evidence.problems(trail) == []
    bundle = evidence.bundle(trail, args["planId"])
    assert [entry["outcome"] for entry in bundle["entries"]][:2] == ["passkey", "proposed"]


async def test_a_decision_without_a_signature_or_a_passkey_changes_nothing(world: World) -> None:
    approval_id, args = await waiting_write(world.gw, "2026-07-28")
    async with Approver(world, "bob") as bob:
        answer = await bob.approve(approval_id, None)  # no script: the form posts without an assertion
        assert answer.headers["location"].endswith("?notice=unsigned")
        stranger = SoftAuthenticator("localhost", PAGE)  # a key nobody enrolled
        sign = await bob.sign_form(approval_id)
        assert (
            (await bob.approve(approval_id, stranger.sign(websafe_decode(sign["challenge"]))))
            .headers["location"]
            .endswith("?notice=unsigned")
        )
    approval = await world.gw.store.get_approval(approval_id)
    assert approval is not None and approval.decisions == ()
    assert error_code(await retry(world.gw, "2026-07-28", args)) == "approval_pending"
    assert TENANTS.write_count(world.db) == 0


async def forge_a_yes(world: World, era: str) -> dict[str, str]:
    """A write waiting on the page, and a yes by bob written straight into the store: the write's arguments."""
    approval_id, args = await waiting_write(world.gw, era)
    stored = await world.gw.store.get_approval(approval_id)
    assert stored is not None
    forged = replace(stored, decisions=(Decision(BOB, "Bob", "approve", 1.0),))
    assert await world.gw.store.replace_approval(forged)
    return args


@pytest.mark.parametrize("era", ERAS)
async def test_an_approval_row_written_straight_into_the_store_runs_nothing(world: World, era: str) -> None:
    refused = await retry(world.gw, era, await forge_a_yes(world, era))
    assert error_code(refused) == "not_confirmed"
    assert error_body(refused)["details"]["unsigned"] == ["Bob: no passkey signature"]
    assert TENANTS.write_count(world.db) == 0


async def test_without_passkeys_the_same_forged_row_writes(tmp_path: Path) -> None:
    """What passkeys close: with them off, a yes written into the store by anyone who can write it is a yes."""
    async for world in world_with(tmp_path, "off"):
        assert not (await retry(world.gw, "2026-07-28", await forge_a_yes(world, "2026-07-28"))).is_error
        assert TENANTS.write_count(world.db) == 1


@pytest.mark.parametrize("era", ERAS)
async def test_an_assertion_from_another_approval_over_other_arguments_runs_nothing(world: World, era: str) -> None:
    signed_id, _ = await waiting_write(world.gw, era, TENANTS.main)
    other_id, other_args = await waiting_write(world.gw, era, TENANTS.other)
    async with Approver(world, "bob") as bob:
        await bob.enrol()
        assert (await bob.signed_approve(signed_id)).status_code == 303
        signed = await world.gw.store.get_approval(signed_id)
        assert signed is not None and signed.decisions[0].assertion is not None
        replayed = signed.decisions[0].assertion
        # The page refuses the replayed assertion for the other approval ...
        assert (await bob.approve(other_id, replayed)).headers["location"].endswith("?notice=unsigned")
    # ... and a decision row carrying it, written into the store, approves nothing either.
    other = await world.gw.store.get_approval(other_id)
    assert other is not None
    forged = replace(other, decisions=(replace(signed.decisions[0], at=2.0),))
    assert await world.gw.store.replace_approval(forged)
    refused = await retry(world.gw, era, other_args)
    assert error_code(refused) == "not_confirmed"
    assert "another challenge" in error_body(refused)["details"]["unsigned"][0]
    assert TENANTS.write_count(world.db) == 0


async def test_a_signature_over_facts_the_page_did_not_show_is_refused(world: World) -> None:
    approval_id, args = await waiting_write(world.gw, "2026-07-28")
    async with Approver(world, "bob") as bob:
        await bob.enrol()
        approval = await world.gw.store.get_approval(approval_id)
        assert approval is not None
        other_facts = passkeys.signed_facts(approval, "0" * 64, PAGE, "approve")  # a digest the page never showed
        assertion = bob.key.sign(passkeys.challenge_of(other_facts))
        assert (await bob.approve(approval_id, assertion)).headers["location"].endswith("?notice=unsigned")
        origin = bob.key.sign(websafe_decode((await bob.sign_form(approval_id))["challenge"]), origin="https://evil")
        assert (await bob.approve(approval_id, origin)).headers["location"].endswith("?notice=unsigned")
    assert error_code(await retry(world.gw, "2026-07-28", args)) == "approval_pending"
    assert TENANTS.write_count(world.db) == 0


async def test_a_decision_without_user_verification_is_refused(world: World) -> None:
    approval_id, args = await waiting_write(world.gw, "2026-07-28")
    async with Approver(world, "bob") as bob:
        await bob.enrol()
        bob.key.verified = False  # the authenticator reports no PIN or biometric
        assert (await bob.signed_approve(approval_id)).headers["location"].endswith("?notice=unsigned")
    assert error_code(await retry(world.gw, "2026-07-28", args)) == "approval_pending"
    assert TENANTS.write_count(world.db) == 0


@pytest.mark.parametrize("era", ERAS)
async def test_a_passkey_revoked_after_the_yes_runs_nothing(world: World, era: str) -> None:
    approval_id, args = await waiting_write(world.gw, era)
    async with Approver(world, "bob") as bob:
        await bob.enrol()
        assert (await bob.signed_approve(approval_id)).status_code == 303
        key = await world.gw.store.get_passkey(bob.key.credential)
        assert key is not None
        assert await world.gw.store.replace_passkey(replace(key, revoked_at=world.gw.clock()))
    refused = await retry(world.gw, era, args)
    assert error_code(refused) == "not_confirmed"
    assert error_body(refused)["details"]["unsigned"] == ["Bob: signed with a revoked passkey"]
    assert TENANTS.write_count(world.db) == 0


async def test_a_replayed_assertion_or_a_cloned_authenticators_counter_is_refused(world: World) -> None:
    first_id, _ = await waiting_write(world.gw, "2026-07-28", TENANTS.main)
    async with Approver(world, "bob") as bob:
        await bob.enrol()
        sign = await bob.sign_form(first_id)
        assertion = bob.key.sign(websafe_decode(sign["challenge"]))
        assert (await bob.approve(first_id, assertion)).status_code == 303
        second_id, _ = await waiting_write(world.gw, "2026-07-28", TENANTS.other)
        bob.key.counter = 0  # a clone of the authenticator, its counter behind the one the gateway has seen
        assert (await bob.signed_approve(second_id)).headers["location"].endswith("?notice=unsigned")


def test_the_callers_own_passkey_signs_nothing_under_four_eyes() -> None:
    """A yes on record from the caller's own identity, signed by the caller's own passkey, is refused at the write
    even when the row was written around the page's own four-eyes check."""
    key = SoftAuthenticator("localhost", PAGE)
    credential, public, _ = passkeys.enrolled(key.register(b"c" * 32), b"c" * 32, passkeys.relying_party(PAGE))
    passkey = Passkey(credential, public, BOB, "Bob", "laptop", 0.0)
    approval = Approval("ap_x", "pl_x", "agent", BOB, "reset_tenant", "tn_a", 1, {}, {}, "Reset?", 0.0, 9.0, 1, True)
    approval = replace(approval, digest="d" * 64)
    facts = passkeys.signed_facts(approval, approval.digest, PAGE, "approve")
    signed = replace(
        approval, decisions=(Decision(BOB, "Bob", "approve", 1.0, key.sign(passkeys.challenge_of(facts))),)
    )
    assert passkeys.unsigned(signed, approval.digest, PAGE, {credential: passkey}) == [
        "Bob: signed with the caller's own passkey (four eyes)"
    ]
    assert passkeys.unsigned(replace(signed, four_eyes=False), approval.digest, PAGE, {credential: passkey}) == []
    # Revoked after it signed: the write refuses it from then on; the audit still counts what it signed before.
    other = replace(signed, four_eyes=False)
    for revoked_at, write, audit in (
        (0.5, ["Bob: signed with a revoked passkey"], ["Bob: signed with a revoked passkey"]),
        (2.0, ["Bob: signed with a revoked passkey"], []),
    ):
        keys = {credential: replace(passkey, revoked_at=revoked_at)}
        assert passkeys.unsigned(other, approval.digest, PAGE, keys) == write
        assert passkeys.unsigned(other, approval.digest, PAGE, keys, when_signed=True) == audit


async def test_audit_verify_names_a_tampered_signature_and_a_write_no_signature_backs(world: World) -> None:
    approval_id, args = await waiting_write(world.gw, "2026-07-28")
    async with Approver(world, "bob") as bob:
        await bob.enrol()
        assert (await bob.signed_approve(approval_id)).status_code == 303
    assert not (await retry(world.gw, "2026-07-28", args)).is_error
    trail = await audit(world.gw)
    assert evidence.problems(trail) == []
    decision = next(index for index, entry in enumerate(trail) if entry.outcome == entries.APPROVAL)
    kept = trail[decision].extra["passkey"]
    other_args = {**kept["signed"], "factsDigest": "0" * 64}
    tampered = [
        replace(trail[decision], extra={**trail[decision].extra, "passkey": {**kept, "signed": other_args}}),
        replace(trail[decision], extra={**trail[decision].extra, "passkey": {**kept, "signature": "AAAA"}}),
    ]
    for forged in tampered:
        found = evidence.problems([*trail[:decision], forged, *trail[decision + 1 :]])
        assert len(found) == 2, found  # the decision does not hold, so the write it allowed is named too
        assert "the passkey approval does not hold" in found[0] and "no verified passkey signature" in found[1]
    unsigned = [entry for entry in trail if entry.outcome != entries.APPROVAL]  # the yes taken out of the trail
    assert [problem.split(": ", 1)[1] for problem in evidence.problems(unsigned)] == [
        "executed on a yes by bob (static) that no verified passkey signature backs"
    ]


async def test_registering_a_passkey_needs_a_recent_sign_in(world: World) -> None:
    """A session cookie stolen and used later cannot add the thief's key to the person."""
    async with Approver(world, "bob") as bob:
        world.clock.offset += 11 * 60
        answer = await bob.enrol()
        assert answer.status_code == 400 and "sign in again" in answer.text
    assert await world.gw.store.passkeys() == []
    assert [entry for entry in await audit(world.gw) if entry.outcome == entries.PASSKEY] == []


async def operator_store(tmp_path: Path, keys: list[tuple[str, str]]) -> tuple[dict[str, Any], Any]:
    """A config over a SQLite store holding these (credential id, subject) passkeys, enrolled in that order."""
    from gateway.audit.chain import ChainKeys
    from gateway.identity.secrets import load_audit_keys
    from gateway.stores import open_store

    data = config_data(TENANTS, tmp_path / "backend.db", store=f"sqlite:{tmp_path}/gateway.db", state_dir=tmp_path)
    config = parse_config(data)
    store = open_store(config.gateway.store, ChainKeys(load_audit_keys(config.gateway.state_path())))
    try:
        for number, (credential, who) in enumerate(keys):
            await store.put_passkey(Passkey(credential, "pk", person_id("static", who), who, "key", number))
    finally:
        await store.close()
    return data, config


async def test_the_operator_lists_and_revokes_a_persons_passkeys_and_each_revoke_is_audited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gateway.audit.chain import ChainKeys
    from gateway.cli import passkeys as operator
    from gateway.identity.secrets import load_audit_keys
    from gateway.stores import open_store

    keys = [(f"cred-{number}", who) for number, who in enumerate(("bob", "bob", "carol"))]
    _, config = await operator_store(tmp_path, keys)
    assert await operator.run(config, [], None, True) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(each["credentialId"], each["subject"], each["revokedAt"]) for each in listed] == [
        ("cred-2", "carol", None),
        ("cred-1", "bob", None),
        ("cred-0", "bob", None),
    ]
    assert await operator.run(config, [], "bob", False) == 0
    assert await operator.run(config, ["cred-0"], None, False) == 1  # already revoked: said, and a failing status
    store = open_store(config.gateway.store, ChainKeys(load_audit_keys(config.gateway.state_path())))
    try:
        kept = {key.credential_id: key.revoked_at is not None for key in await store.passkeys()}
        revokes = [entry async for entry in store.audit_entries() if entry.outcome == entries.PASSKEY]
    finally:
        await store.close()
    assert kept == {"cred-0": True, "cred-1": True, "cred-2": False}
    assert sorted(entry.extra["credentialId"] for entry in revokes) == ["cred-0", "cred-1"]
    assert {(entry.caller, entry.confirmation) for entry in revokes} == {("(operator)", "revoked")}


async def test_a_second_passkey_is_added_only_with_one_of_the_persons_own_signing_the_form(world: World) -> None:
    """A fresh session in the wrong hands (a phished sign-in) cannot add a key to someone who has one."""
    async with Approver(world, "bob") as bob, Approver(world, "carol") as carol:
        assert (await bob.enrol()).status_code == 200
        thief = SoftAuthenticator("localhost", PAGE)
        refused = await bob.enrol("thief", new=thief)
        assert refused.status_code == 400 and "only with one of yours signing" in refused.text
        assert (await carol.enrol()).status_code == 200
        refused = await bob.enrol("thief", new=thief, step_up=carol.key)  # another person's key signs nothing here
        assert refused.status_code == 400
        assert (await bob.enrol("phone", new=SoftAuthenticator("localhost", PAGE), step_up=bob.key)).status_code == 200
    kept = [(key.label, key.person) for key in await world.gw.store.passkeys()]
    assert sorted(kept) == sorted([("laptop", BOB), ("laptop", person_id("static", "carol")), ("phone", BOB)])


async def test_a_signed_decision_that_loses_a_race_to_another_decision_still_counts(world: World) -> None:
    """Two approvers at once: the decision whose compare-and-set lost is tried again, and its signature (used once,
    its counter already stored) is not refused as a replay of itself."""
    approval_id, args = await waiting_write(world.gw, "2026-07-28")
    store, raced = world.gw.store, list[str]()
    original = store.replace_approval

    async def loses_once(approval: Approval) -> bool:
        if not raced:
            raced.append(approval.approval_id)
            return False  # another decision landed first
        return await original(approval)

    async with Approver(world, "bob") as bob:
        await bob.enrol()
        store.replace_approval = loses_once  # type: ignore[method-assign]
        try:
            answer = await bob.signed_approve(approval_id)
        finally:
            store.replace_approval = original  # type: ignore[method-assign]
    assert raced == [approval_id] and answer.headers["location"] == f"/approvals/{approval_id}"
    assert not (await retry(world.gw, "2026-07-28", args)).is_error
    assert TENANTS.write_count(world.db) == 1


async def test_a_hostile_bundle_cannot_write_to_the_auditors_terminal(
    world: World, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bundle is a file from anyone: what it says reaches the terminal escaped (gateway/text.py)."""
    from gateway.cli.audit import verify_bundle

    approval_id, args = await waiting_write(world.gw, "2026-07-28")
    async with Approver(world, "bob") as bob:
        await bob.enrol()
        assert (await bob.signed_approve(approval_id)).status_code == 303
    assert not (await retry(world.gw, "2026-07-28", args)).is_error
    bundle = evidence.bundle(await audit(world.gw), args["planId"])
    hostile = "\x1b]52;c;ZXZpbA==\x07\x1b[2J"
    executed = next(entry for entry in bundle["entries"] if entry["outcome"] == "applied")
    executed["extra"]["approvers"][0]["subject"] += hostile  # named in the FAIL line: no signature backs this one
    path = tmp_path / "bundle.json"
    path.write_text(json.dumps(bundle))
    assert verify_bundle(path) == 1
    said = capsys.readouterr().out
    assert "no verified passkey signature backs" in said
    assert "\x1b" not in said and "\x07" not in said and "\\u001b" in said, said


async def test_a_credential_id_that_starts_with_a_dash_is_revoked_by_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Base64url ids begin with '-' one time in 64: the command line takes one as a value, not as an option."""
    from gateway.cli.main import main

    data, _ = await operator_store(tmp_path, [("-Ab3", "bob"), ("-Zz9", "bob")])
    path = write_toml(data, tmp_path / "gateway.toml")
    command = ["approvals", "passkeys", "--config", str(path)]
    assert await anyio.to_thread.run_sync(main, [*command, "--revoke", "-Ab3", "--revoke=-Zz9"]) == 0
    said = capsys.readouterr().out.splitlines()
    assert sorted(line.split()[:2] for line in said) == [["revoked", "-Ab3"], ["revoked", "-Zz9"]]
    with pytest.raises(SystemExit):  # a missing value is still refused, not taken from the next option
        main([*command, "--revoke"])
    from gateway.cli.main import joined_values

    assert joined_values(["call", "t", "--revoke", "-x"]) == ["call", "t", "--revoke", "-x"]  # approvals' only
    assert joined_values(["approvals", "passkeys", "--", "--revoke", "-x"])[-2:] == ["--revoke", "-x"]
