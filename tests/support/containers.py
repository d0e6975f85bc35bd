"""Containers in tests: podman, with the quirks of the machines the tests run on kept here and in containers.conf
beside this module, not in each test.

- runc, not crun (hybrid cgroups), and open-file and process limits under the caller's hard limit: containers.conf,
  named by ``CONTAINERS_CONF`` in every podman command run from here (run, build, compose and ``play kube`` alike).
- No container registry: images are built from a base made of Debian packages (.ci/setup-podman.sh imports it
  as BASE), never pulled; the build mounts the host's CA bundle for pip, whose HTTPS passes a TLS-intercepting
  proxy.
- podman-compose on podman 4.3 ignores ``depends_on`` health conditions, and podman does not always restart a
  container whose dependency is itself restarting: ``after_migrate`` waits for compose's migrate step and then
  starts the gateway that had given up on the missing schema.
- podman 4.3's ``play kube`` mounts a Secret's ``data`` without decoding it (and ignores ``stringData``), and
  panics on a ``secret`` volume without ``optional``: kube.py hands it a Secret's values as a ConfigMap instead.

Every name a test makes (containers, pods, volumes, networks, compose projects) carries the test session's
``SUFFIX``, so two runs on one machine do not collide, and ``Made.remove`` removes all of them afterwards. The
gateway's image is built once per session (``gateway_image``); its build cache stays for the next run.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.support.clients import Answers
from tests.support.processes import ROOT

CONF = Path(__file__).with_name("containers.conf")
IMAGES = Path(__file__).with_name("images")
BASE = "localhost/mcp-safety-gateway-base:bookworm"
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SUFFIX = f"t{os.getpid()}{secrets.token_hex(2)}"
GATEWAY_IMAGE = f"localhost/mcp-safety-gateway:test-{SUFFIX}"
STATE = "/var/lib/mcp-safety-gateway"
"""The image's state volume."""


def environment() -> dict[str, str]:
    """The environment every podman command runs in."""
    return {**os.environ, "CONTAINERS_CONF": str(CONF)}


def missing() -> str | None:
    """Why the container tests cannot run here, or None."""
    if shutil.which("podman") is None:
        return "podman is not installed: bash .ci/setup-podman.sh installs podman, runc and mmdebstrap from Debian"
    if podman("image", "exists", BASE, check=False).returncode != 0:
        return f"the base image {BASE} is missing: bash .ci/setup-podman.sh builds it from Debian packages"
    return None


def podman(
    *args: str, check: bool = True, timeout: float = 120, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run podman with the machine's settings; AssertionError with its output when ``check`` and it fails."""
    done = subprocess.run(
        ["podman", *args], env=environment(), capture_output=True, text=True, timeout=timeout, input=stdin
    )
    if check and done.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


def build(tag: str, containerfile: Path, context: Path, **build_args: str) -> str:
    """Build an image from a Containerfile on the test base (docker format, which keeps HEALTHCHECK)."""
    args = ["build", "--format", "docker", "-f", str(containerfile), "-t", tag, "--build-arg", f"BASE={BASE}"]
    if CA_BUNDLE.exists():
        args += ["-v", f"{CA_BUNDLE}:/run/host-ca.crt:ro", "--build-arg", "PIP_CERT=/run/host-ca.crt"]
    for name, value in build_args.items():
        args += ["--build-arg", f"{name}={value}"]
    podman(*args, str(context), timeout=600)
    return tag


def gateway_image() -> str:
    """The gateway's image, built from deploy/Containerfile and this checkout (cached layers make a rebuild
    quick); tagged for this session only."""
    if podman("image", "exists", GATEWAY_IMAGE, check=False).returncode != 0:
        build(GATEWAY_IMAGE, ROOT / "deploy" / "Containerfile", ROOT, REVISION=SUFFIX)
    return GATEWAY_IMAGE


def support_image(name: str) -> str:
    """A service's image for the tests (tests/support/images/NAME.Containerfile on the test base), kept between
    runs under a tag that changes with its Containerfile and the files beside it named NAME-*."""
    containerfile = IMAGES / f"{name}.Containerfile"
    made_from = b"".join(path.read_bytes() for path in sorted(IMAGES.glob(f"{name}[.-]*")))  # and its scripts
    digest = hashlib.sha256(made_from + BASE.encode()).hexdigest()[:12]
    tag = f"localhost/mcp-safety-gateway-test-{name}:{digest}"
    if podman("image", "exists", tag, check=False).returncode != 0:
        build(tag, containerfile, IMAGES)
    return tag


def remove_image(tag: str) -> None:
    """Untag a session's image (its layers stay as build cache)."""
    podman("rmi", tag, check=False)


@dataclass
class Made:
    """What a test made, by name, to remove afterwards whatever happened."""

    containers: list[str] = field(default_factory=list)
    pods: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)

    def remove(self) -> None:
        """Remove everything made, the ones that use others first; ignores what is gone already."""
        if self.containers:
            podman("rm", "--force", "--volumes", "--time", "5", *self.containers, check=False)
        if self.pods:
            podman("pod", "rm", "--force", *self.pods, check=False)
        for volume in self.volumes:
            podman("volume", "rm", "--force", volume, check=False)
        for network in self.networks:
            podman("network", "rm", "--force", network, check=False)
        for secret in self.secrets:
            podman("secret", "rm", secret, check=False)


@contextlib.contextmanager
def made() -> Iterator[Made]:
    """A record of what the block makes, removed when it ends."""
    record = Made()
    try:
        yield record
    finally:
        record.remove()


def name(stem: str) -> str:
    """A name unique to this test session."""
    return f"{stem}-{SUFFIX}"


def wait_http(url: str, status: int = 200, seconds: float = 90, host: str | None = None) -> httpx.Response:
    """GET ``url`` until it answers ``status`` (AssertionError with the last answer after ``seconds``)."""
    deadline, last = time.monotonic() + seconds, "nothing"
    headers = {"Host": host} if host else {}
    while time.monotonic() < deadline:
        try:
            response = httpx.get(url, timeout=3, headers=headers)
            if response.status_code == status:
                return response
            last = f"HTTP {response.status_code} {response.text[:300]}"
        except httpx.HTTPError as exc:
            last = type(exc).__name__
        time.sleep(0.25)
    raise AssertionError(f"{url} did not answer {status} within {seconds:.0f} s; last: {last}")


def after_migrate(migrate: str, gateway: str, seconds: float = 90) -> None:
    """Wait until compose's migrate step has succeeded, then until the gateway runs: it refuses to serve a
    PostgreSQL store before its tables are there, and its restart policy brings it back; past the deadline it is
    started by hand."""
    deadline = time.monotonic() + seconds
    while True:
        state = json.loads(podman("inspect", migrate).stdout)[0]["State"]
        if state["Status"] == "exited" and state["ExitCode"] == 0:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"{migrate} did not succeed within {seconds:.0f} s:\n{logs(migrate)}")
        time.sleep(0.5)
    while json.loads(podman("inspect", gateway).stdout)[0]["State"]["Status"] != "running":
        if time.monotonic() > deadline:  # its restart policy did not bring it back: start it as an operator would
            podman("start", gateway)
            return
        time.sleep(0.5)


def logs(container: str) -> str:
    """A container's output, for a failure's message."""
    done = podman("logs", "--tail", "60", container, check=False)
    return done.stdout + done.stderr


def sqlite_rows(container: str, db: str, query: str) -> list[list[object]]:
    """Rows of a query on a SQLite file inside a running container, read with the image's own Python."""
    script = (
        "import json, sqlite3, sys; c = sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True); "
        "print(json.dumps([list(r) for r in c.execute(sys.argv[2])]))"
    )
    done = podman("exec", container, "python", "-c", script, db, query)
    rows: list[list[object]] = json.loads(done.stdout)
    return rows


@dataclass(frozen=True)
class Secrets:
    """The secrets deploy/ names, made as docs/deployment.md says, and the agent's token (whose hash is one)."""

    agent_token: str = field(default_factory=lambda: secrets.token_hex(24))
    password: str = field(default_factory=lambda: secrets.token_hex(16))
    secret_key: str = field(default_factory=lambda: secrets.token_hex(32))
    audit_key: str = field(default_factory=lambda: secrets.token_hex(32))

    def files(self) -> dict[str, str]:
        """Each secret by the name deploy/ gives its file (compose) or key (the Kubernetes Secret)."""
        return {
            "secret-key": self.secret_key,
            "audit-key": self.audit_key,
            "store-password": self.password,
            "agent-token-sha256": hashlib.sha256(self.agent_token.encode()).hexdigest(),
            "redis-users.acl": f"user default on >{self.password} ~* &* +@all\n",
        }


def compose_directory(directory: Path, made_secrets: Secrets) -> Path:
    """deploy/compose.yaml and its configs copied to ``directory``, with its secrets/ made there (mode 0644: the
    gateway's user reads them through the bind mount)."""
    shutil.copy(ROOT / "deploy" / "compose.yaml", directory / "compose.yaml")
    shutil.copytree(ROOT / "deploy" / "config", directory / "config")
    (directory / "secrets").mkdir()
    for file_name, value in made_secrets.files().items():
        path = directory / "secrets" / file_name
        path.write_text(value + ("" if value.endswith("\n") else "\n"))
        path.chmod(0o644)
    return directory


def compose(directory: Path, project: str, *args: str, env: dict[str, str], timeout: float = 180) -> str:
    """podman-compose (from PyPI, in the test environment) on the compose file in ``directory``; its output."""
    command = [sys.executable, "-m", "podman_compose", "-p", project, *args]
    done = subprocess.run(
        command, cwd=directory, env={**environment(), **env}, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise AssertionError(f"podman-compose {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done.stdout + done.stderr


@contextlib.asynccontextmanager
async def agent(url: str, token: str, era: str, answers: Answers | None = None) -> AsyncIterator[Client]:
    """A real SDK client with the agent's bearer token, speaking one protocol era, saying yes to prompts."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        mode = "legacy" if era == "2025-11-25" else "auto"
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, elicitation_callback=answers or Answers()) as client:
            yield client
