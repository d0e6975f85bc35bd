"""The gateway's image (deploy/Containerfile), built here and run under podman: read-only, as its non-root user,
answering /healthz (its HEALTHCHECK too, with the gateway's own Python), keeping its state in its one volume
across a new container, stopping on SIGTERM; holding no compiler, test or secret; refusing to listen on every
address without [auth] in the same sentence as outside a container; and running ``check`` as its entrypoint.

Skipped, saying why, where podman or the test base image is missing (bash .ci/setup-podman.sh makes both).
Compose and the Kubernetes manifests: tests/system/test_containers_deploy.py.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support import containers
from tests.support.clients import new_key
from tests.support.containers import STATE, made, name, podman
from tests.support.processes import ROOT, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """The gateway's image, built once for these tests (the layers stay cached for the next run)."""
    reason = containers.missing()
    if reason is not None:
        pytest.skip(reason)
    tag = containers.gateway_image()
    yield tag
    containers.remove_image(tag)


def _serve(image: str, container: str, volume: str, port: int) -> None:
    podman(
        "run", "--detach", "--name", container, "--read-only", "--volume", f"{volume}:{STATE}",
        "--publish", f"127.0.0.1:{port}:8080", image,
        "serve", "--host", "0.0.0.0", "--port", "8080", "--insecure-listen-without-auth",
    )  # fmt: skip


async def _reset(url: str, key: str, tenant: str = "tn_billing03") -> dict[str, object]:
    from mcp import Client

    from tests.support.clients import Answers

    async with Client(url, elicitation_callback=Answers()) as client:
        preview = await client.call_tool("preview_tenant_reset", {"tenantId": tenant, "fixture": "smoke"})
        assert preview.structured_content is not None, preview.content
        plan = preview.structured_content["planId"]
        written = await client.call_tool("reset_tenant", {"planId": plan, "idempotencyKey": key})
        assert written.structured_content is not None, written.content
        return dict(written.structured_content)


async def test_the_image_runs_read_only_as_its_user_and_keeps_its_state_in_its_volume(image: str) -> None:
    key = new_key()
    with made() as record:
        volume, port = name("state"), free_port()
        record.volumes.append(volume)
        first, second = name("gateway-a"), name("gateway-b")
        record.containers += [first, second]
        _serve(image, first, volume, port)
        containers.wait_http(f"http://127.0.0.1:{port}/healthz")
        assert podman("healthcheck", "run", first, check=False).returncode == 0, "the image's HEALTHCHECK passes"
        inspected = json.loads(podman("inspect", first).stdout)[0]
        assert inspected["HostConfig"]["ReadonlyRootfs"] is True
        assert podman("exec", first, "id", "-u").stdout.strip() == "10001"
        assert podman("exec", first, "touch", "/opt/venv/x", check=False).returncode != 0, "the root is read-only"
        written = await _reset(f"http://127.0.0.1:{port}/mcp", key)
        assert written["replayed"] is False
        sealed = podman("exec", first, "sha256sum", f"{STATE}/secret.key", f"{STATE}/audit.key").stdout
        podman("stop", "--time", "30", first)
        assert json.loads(podman("inspect", first).stdout)[0]["State"]["ExitCode"] == 0, "SIGTERM ends it cleanly"

        _serve(image, second, volume, port)
        containers.wait_http(f"http://127.0.0.1:{port}/readyz")
        assert podman("exec", second, "sha256sum", f"{STATE}/secret.key", f"{STATE}/audit.key").stdout == sealed
        again = await _replay(f"http://127.0.0.1:{port}/mcp", key, str(written["planId"]))
        assert again == {**written, "replayed": True}, "the new container found the write in the volume's store"
        writes = containers.sqlite_rows(second, f"{STATE}/legacy.db", "SELECT COUNT(*) FROM write_log")
        assert writes == [[1]]


async def _replay(url: str, key: str, plan: str) -> dict[str, object]:
    from mcp import Client

    async with Client(url) as client:
        result = await client.call_tool("reset_tenant", {"planId": plan, "idempotencyKey": key})
        assert result.structured_content is not None, result.content
        return dict(result.structured_content)


def test_the_image_holds_no_compiler_no_installer_no_tests_and_no_secret(image: str) -> None:
    config = json.loads(podman("image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == "10001:10001" and config["StopSignal"] == "SIGTERM"
    assert set(config["Volumes"]) == {STATE}
    assert {"org.opencontainers.image.title", "org.opencontainers.image.version"} <= set(config["Labels"])
    assert not [entry for entry in config["Env"] if entry.startswith(("GATEWAY_SECRET_KEY=", "GATEWAY_AUDIT_KEY="))]
    look = (
        "for tool in gcc cc c++ cpp make ld curl pip pip3; do command -v $tool; done; "
        "find / -xdev \\( -name secret.key -o -name audit.key -o -name '*.pem' -path '*gateway*' \\) -print; "
        "find /opt/venv -path '*site-packages/tests' -o -name 'test_*.py' -path '*site-packages/gateway*'; "
        f"ls -A {STATE}; "
        'python -c \'import importlib.util as u; [print(m) for m in ("pip", "setuptools") if u.find_spec(m)]\''
    )
    found = podman("run", "--rm", "--network", "none", "--entrypoint", "sh", image, "-c", look, check=False)
    assert found.stdout.split() == [], f"the image should hold none of these: {found.stdout}"


def test_listening_on_every_address_without_auth_is_refused_as_outside_a_container(image: str) -> None:
    inside = podman("run", "--rm", "--read-only", image, check=False)  # the image's CMD: serve --host 0.0.0.0
    outside = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--host", "0.0.0.0", "--port", str(free_port())],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert inside.returncode == outside.returncode == 2
    said = [line for line in inside.stderr.splitlines() if line.startswith("mcp-safety-gateway:")]
    assert said == outside.stderr.strip().splitlines()
    assert said[0].startswith("mcp-safety-gateway: refusing to listen on 0.0.0.0: no authentication is configured")


def test_check_runs_as_the_entrypoint_for_a_dry_run_of_config_and_secrets(image: str) -> None:
    dry = podman("run", "--rm", "--read-only", image, "check", check=False)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "reset_tenant" in dry.stdout
    key = hashlib.sha256(b"x").hexdigest()
    missing = podman(
        "run", "--rm", "--read-only", "--env", "GATEWAY_SECRET_KEY_FILE=/run/secrets/absent",
        "--env", f"GATEWAY_AUDIT_KEY={key}", image, "check", check=False,
    )  # fmt: skip
    assert missing.returncode == 2
    said = [line for line in missing.stderr.splitlines() if line.startswith("mcp-safety-gateway:")]
    assert said == [
        "mcp-safety-gateway: GATEWAY_SECRET_KEY_FILE: cannot read /run/secrets/absent: No such file or directory"
    ]
