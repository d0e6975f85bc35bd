"""deploy/compose.yaml and deploy/kubernetes/ run under podman, as an operator would run them, each secret from a
file, and driven by real clients.

Compose (profiles redis and postgres, podman-compose from PyPI): up, a whole flow with the terminal client, down,
up again and the write replays (nothing lost); then the gateway's container is stopped in the middle of a
confirmed write (the backend made slow by its latency fault) and the write settles once: never lost, never twice,
the audit and the backend's write_log agreeing.

Kubernetes (``podman play kube``, tests/support/kube.py says what runs and what is only validated): two gateway
replicas on one Redis; a write confirmed on one replica replays on the other with the same idempotency key, and
the backend's database holds exactly one write.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.support import containers, kube
from tests.support.clients import error_code, new_key
from tests.support.containers import STATE, Secrets, agent, compose, made, name, podman
from tests.support.processes import free_port
from tests.support.terminal import at_a_terminal

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(900)]

LATENCY_MS = 3000
"""How long the backend takes over each write in the compose stack: long enough to stop a gateway mid-write."""
CONFIG = "/etc/mcp-safety-gateway/gateway.toml"


@pytest.fixture(scope="module")
def images() -> Iterator[dict[str, str]]:
    """The images the deploy files name (the gateway's, Redis's, PostgreSQL's) -> as built here."""
    reason = containers.missing()
    if reason is not None:
        pytest.skip(reason)
    gateway = containers.gateway_image()
    yield {
        "mcp-safety-gateway:0.1.0": gateway,
        "docker.io/library/redis:7": containers.support_image("redis"),
        "docker.io/library/postgres:16": containers.support_image("postgres"),
    }
    containers.remove_image(gateway)


class Stack:
    """One compose project of deploy/compose.yaml with one of its profiles (``redis``, ``postgres``)."""

    def __init__(self, directory: Path, profile: str, images: dict[str, str], record: containers.Made) -> None:
        self.profile = profile
        self.secrets = Secrets()
        self.directory = containers.compose_directory(directory, self.secrets)
        self.project = name("compose").replace("-", "")
        self.port = free_port()
        self.env = {
            "GATEWAY_IMAGE": images["mcp-safety-gateway:0.1.0"],
            "REDIS_IMAGE": images["docker.io/library/redis:7"],
            "POSTGRES_IMAGE": images["docker.io/library/postgres:16"],
            "GATEWAY_PORT": str(self.port),
            "LEGACY_FAULT": f"latency={LATENCY_MS}",
        }
        gateway = "gateway" if profile == "redis" else "gateway-postgres"
        self.gateway, self.backend = f"{self.project}_{gateway}_1", f"{self.project}_backend_1"
        self.fired = 0
        """How many writes the backend's latency fault has delayed so far."""
        record.containers += [self.gateway, self.backend] + [
            f"{self.project}_{service}_1" for service in ("redis", "postgres", "migrate")
        ]
        volumes = ("backend-data", "gateway-state", "redis-data", "postgres-data")
        record.volumes += [f"{self.project}_{volume}" for volume in volumes]
        record.networks.append(f"{self.project}_default")
        record.pods.append(f"pod_{self.project}")  # podman-compose puts the project's containers in one pod

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def up(self) -> None:
        compose(self.directory, self.project, "--profile", self.profile, "up", "-d", env=self.env)
        if self.profile == "postgres":
            containers.after_migrate(f"{self.project}_migrate_1", self.gateway)
        containers.wait_http(f"http://127.0.0.1:{self.port}/readyz")

    def down(self) -> None:
        compose(self.directory, self.project, "--profile", self.profile, "down", env=self.env)

    def terminal(self, *args: str, answers: tuple[str, ...] = ()) -> str:
        """The terminal client (``mcp-safety-gateway call``) at a real terminal, typing ``answers``."""
        command = [sys.executable, "-m", "gateway", *args, "--url", self.url]
        env = {**os.environ, "GATEWAY_TOKEN": self.secrets.agent_token}
        code, screen = at_a_terminal(command, env, list(answers), seconds=90)
        assert code == 0, screen
        return screen

    def audit(self) -> list[dict[str, Any]]:
        """The audit trail, read by ``audit list`` inside the gateway's container (its config and secrets)."""
        listed = podman("exec", self.gateway, "mcp-safety-gateway", "audit", "list", "--json", "--config", CONFIG)
        return [json.loads(line) for line in listed.stdout.splitlines()]

    def writes(self, tenant: str) -> int:
        """How many writes the backend's own database records for ``tenant``."""
        query = f"SELECT COUNT(*) FROM write_log WHERE tenant_id = '{tenant}'"
        return int(str(containers.sqlite_rows(self.backend, f"{STATE}/legacy.db", query)[0][0]))


@pytest.fixture(scope="module", params=["redis", "postgres"])
def stack(
    request: pytest.FixtureRequest, images: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    """The compose stack with one profile's store, up (PostgreSQL's: migrated by the stack's own migrate step)."""
    with made() as record:
        stack = Stack(tmp_path_factory.mktemp("compose"), request.param, images, record)
        try:
            stack.up()
            yield stack
        finally:
            compose(stack.directory, stack.project, "--profile", stack.profile, "down", "-v", env=stack.env)


def _field(screen: str, key: str) -> str:
    return next(line.split(":", 1)[1].strip() for line in screen.splitlines() if line.startswith(f"{key}:"))


def test_compose_up_a_flow_at_the_terminal_down_and_up_again_loses_nothing(stack: Stack) -> None:
    preview = stack.terminal("call", "preview_tenant_reset", "tenantId=tn_billing03", "fixture=smoke")
    plan, key = _field(preview, "planId"), new_key()
    written = stack.terminal("call", "reset_tenant", f"planId={plan}", f"idempotencyKey={key}", answers=("y",))
    assert _field(written, "replayed") == "false" and _field(written, "rowsInserted") == "25"
    assert stack.writes("tn_billing03") == 1

    stack.down()
    assert podman("container", "exists", stack.gateway, check=False).returncode != 0, "down removed the containers"
    stack.up()
    replayed = stack.terminal("call", "reset_tenant", f"planId={plan}", f"idempotencyKey={key}")
    assert _field(replayed, "replayed") == "true" and _field(replayed, "version") == _field(written, "version")
    assert stack.writes("tn_billing03") == 1, "the replay wrote nothing"
    outcomes = [
        (entry["idempotency_key"], entry["outcome"]) for entry in stack.audit() if entry["tool"] == "reset_tenant"
    ]
    assert outcomes == [(key, "applied"), (key, "replayed")]
    verified = podman("exec", stack.gateway, "mcp-safety-gateway", "audit", "verify", "--config", CONFIG)
    assert verified.stdout.startswith("ok"), verified.stdout


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_a_gateway_stopped_in_the_middle_of_a_confirmed_write_lets_it_settle_once(stack: Stack, era: str) -> None:
    tenant, key = ("tn_search02", new_key()) if era == "2026-07-28" else ("tn_load04", new_key())
    async with agent(stack.url, stack.secrets.agent_token, era) as client:
        preview = await client.call_tool("preview_tenant_reset", {"tenantId": tenant, "fixture": "smoke"})
        assert preview.structured_content is not None, preview.content
        plan = preview.structured_content["planId"]
        answer: dict[str, Any] = {}

        async def write() -> None:
            try:
                result = await client.call_tool("reset_tenant", {"planId": plan, "idempotencyKey": key})
                answer["result"] = result
            except MCPError as exc:  # the 2025 era's SSE stream ends with the process: the call's answer is lost
                answer["lost"] = exc

        async with anyio.create_task_group() as group:
            group.start_soon(write)
            await _until_in_flight(stack)
            stopped = time.monotonic()
            await anyio.to_thread.run_sync(lambda: podman("stop", "--time", "45", stack.gateway))
            took = time.monotonic() - stopped
    exit_code = json.loads(podman("inspect", stack.gateway).stdout)[0]["State"]["ExitCode"]
    assert exit_code == 0, containers.logs(stack.gateway)
    assert 1 < took < 30, f"the stop waited for the write in flight, not for its grace period ({took:.1f} s)"
    if era == "2026-07-28":
        result = answer["result"]
        assert not result.is_error and result.structured_content["replayed"] is False, result.content
    stack.up()  # as an operator brings a stopped service back (podman 4.3 cannot start it alone)
    async with agent(stack.url, stack.secrets.agent_token, "2026-07-28") as client:
        again = await client.call_tool("reset_tenant", {"planId": plan, "idempotencyKey": key})
    assert stack.writes(tenant) == 1, "written exactly once"
    assert not again.is_error, error_code(again)  # the write settled as applied: the retry replays it
    assert again.structured_content is not None and again.structured_content["replayed"] is True
    outcomes = [entry["outcome"] for entry in stack.audit() if entry["idempotency_key"] == key]
    assert outcomes == ["applied", "replayed"], "the audit agrees with the backend's write_log"


async def _until_in_flight(stack: Stack) -> None:
    """Until the backend is inside the next write (its latency fault fired and sleeps): the gateway has claimed
    the key and sent the call."""
    query = "SELECT COALESCE(SUM(fired), 0) FROM fault_fires"
    with anyio.fail_after(30):
        while True:
            fired = int(str(containers.sqlite_rows(stack.backend, f"{STATE}/legacy.db", query)[0][0]))
            if fired > stack.fired:
                stack.fired = fired
                return
            await anyio.sleep(0.1)


def test_two_replicas_from_the_kubernetes_manifests_share_one_redis(images: dict[str, str], tmp_path: Path) -> None:
    docs = kube.documents()
    made_secrets = Secrets()
    played = kube.playable(docs, images, made_secrets.files())
    network = name("kube")
    with made() as record:
        record.pods += played.pods
        record.volumes += played.volumes
        record.volumes += [name(doc["metadata"]["name"]) for doc in docs if doc["kind"] == "ConfigMap"]
        record.volumes += [name(doc["metadata"]["name"] + "-secret") for doc in docs if doc["kind"] == "Secret"]
        record.networks.append(network)
        podman("network", "create", network)
        podman("play", "kube", "--network", network, str(kube.write(played, tmp_path)), timeout=180)
        probes = kube.probes(docs, "mcp-safety-gateway")
        for port in played.gateway_ports:
            for probe in probes.values():
                get = probe["httpGet"]
                host = next(header["value"] for header in get["httpHeaders"] if header["name"] == "Host")
                containers.wait_http(f"http://127.0.0.1:{port}{get['path']}", host=host)
        first, second = (played.containers[f"mcp-safety-gateway-{n}/gateway"] for n in (0, 1))
        for container in (first, second):
            inspected = json.loads(podman("inspect", container).stdout)[0]
            assert inspected["HostConfig"]["ReadonlyRootfs"] is True and inspected["Config"]["User"] == "10001:10001"
            assert podman("exec", container, "grep", "CapEff", "/proc/1/status").stdout.split()[1] == "0" * 16
        anyio.run(_write_on_one_replay_on_the_other, played.gateway_ports, made_secrets.agent_token)
        backend = played.containers["legacy-backend-0/backend"]
        query = "SELECT COUNT(*) FROM write_log WHERE tenant_id = 'tn_checkout01'"
        assert containers.sqlite_rows(backend, f"{STATE}/legacy.db", query) == [[1]]
        listed = podman("exec", second, "mcp-safety-gateway", "audit", "list", "--json", "--config", CONFIG)
        outcomes = [json.loads(line)["outcome"] for line in listed.stdout.splitlines()]
        assert outcomes == ["applied", "replayed"]
        podman("play", "kube", "--down", str(tmp_path / "played.yaml"), timeout=180)


async def _write_on_one_replay_on_the_other(ports: list[int], token: str) -> None:
    key = new_key()
    async with agent(f"http://127.0.0.1:{ports[0]}/mcp", token, "2026-07-28") as client:
        preview = await client.call_tool("preview_tenant_reset", {"tenantId": "tn_checkout01", "fixture": "empty"})
        assert preview.structured_content is not None, preview.content
        plan = preview.structured_content["planId"]
        written = await client.call_tool("reset_tenant", {"planId": plan, "idempotencyKey": key})
        assert written.structured_content is not None, written.content
    async with agent(f"http://127.0.0.1:{ports[1]}/mcp", token, "2026-07-28") as client:
        replayed = await client.call_tool("reset_tenant", {"planId": plan, "idempotencyKey": key})
    assert replayed.structured_content == {**written.structured_content, "replayed": True}
