"""The gateway configs under deploy/, made from the built-in config (gateway/config/gateway.toml): the same tools,
with the store, the callers and the backend set for containers. tests/unit/test_deploy_files.py holds the committed
files equal to what this makes; after a change to the built-in config run ``python -m tests.support.deployfiles``.

    compose-redis.toml      deploy/compose.yaml's gateway, profile redis
    compose-postgres.toml   deploy/compose.yaml's gateway, profile postgres
    kubernetes.toml         the ConfigMap in deploy/kubernetes/configmap.yaml (Service names as host names)
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
BUILTIN = ROOT / "gateway" / "config" / "gateway.toml"
DEPLOY = ROOT / "deploy"
TOKEN_VARIABLE = "GATEWAY_AGENT_TOKEN_SHA256"
"""The variable (its ``_FILE`` twin, in the deploy files) holding the SHA-256 of the agent's bearer token."""
STATE_DIR = "/var/lib/mcp-safety-gateway"
CONFIGMAP_HEAD = """\
# The gateway's config file, mounted at /etc/mcp-safety-gateway/gateway.toml. Made by
# `python -m tests.support.deployfiles` from the built-in config (a unit test keeps the two in step).
apiVersion: v1
kind: ConfigMap
metadata:
  name: mcp-safety-gateway
  labels:
    app.kubernetes.io/name: mcp-safety-gateway
    app.kubernetes.io/component: gateway
data:
  gateway.toml: |
"""


@dataclass(frozen=True)
class Target:
    """Where one deploy config runs."""

    name: str
    what: str
    store: str
    backend: str
    resource_url: str
    allowed_hosts: tuple[str, ...]


TARGETS = (
    Target(
        "compose-redis.toml",
        "deploy/compose.yaml, profile redis",
        "redis://redis:6379/0",
        "http://backend:9000/mcp",
        "http://127.0.0.1:8080/mcp",
        ("127.0.0.1:*", "localhost:*", "[::1]:*"),
    ),
    Target(
        "compose-postgres.toml",
        "deploy/compose.yaml, profile postgres",
        "postgresql://gateway@postgres:5432/gateway",
        "http://backend:9000/mcp",
        "http://127.0.0.1:8080/mcp",
        ("127.0.0.1:*", "localhost:*", "[::1]:*"),
    ),
    Target(
        "kubernetes.toml",
        "deploy/kubernetes/ (Service names as host names)",
        "redis://redis:6379/0",
        "http://legacy-backend:9000/mcp",
        "https://gateway.example.com/mcp",
        ("127.0.0.1:*", "localhost:*", "[::1]:*", "mcp-safety-gateway:*", "gateway.example.com"),
    ),
)

HEAD = """\
# The gateway's config for {what}.
# The built-in config's tools (gateway/config/gateway.toml), with the store, the callers and the backend set for
# containers. Made by `python -m tests.support.deployfiles`; a unit test keeps it in step.
# Every key is explained in docs/configuration.md. Secrets are never here: each comes from a file that a
# *_FILE environment variable names (docs/configuration.md, "Environment").

[gateway]
name = "mcp-safety-gateway"
store = "{store}"  # password: GATEWAY_STORE_PASSWORD_FILE
state_dir = "{state_dir}"  # the image's state volume
stdio_caller = "local"

[auth]                             # reachable from outside its container: every caller shows a bearer token
verifier = "static"
resource_url = "{resource_url}"  # this gateway's /mcp URL as callers reach it

# The agent, known by its token's SHA-256, in the file that {token}_FILE names.
[[auth.tokens]]
sha256_env = "{token}"
client_id = "agent"
scopes = ["tenants:read", "tenants:reset"]

[http]                             # DNS-rebinding protection: the Host and Origin values accepted
dns_rebinding_protection = true
allowed_hosts = [{hosts}]
allowed_origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]

"""

STDIO_BACKEND = re.compile(r'^transport = "stdio".*\ncommand = .*\nargs = .*\n', re.MULTILINE)


def render(target: Target, builtin: str) -> str:
    """One deploy config: the built-in config's tables from ``[limits]`` on, under a head for containers."""
    tables = builtin[builtin.index("[limits]") :]
    backend = f'transport = "http"                 # the demo backend\'s own container\nurl = "{target.backend}"\n'
    tables, found = STDIO_BACKEND.subn(backend, tables, count=1)
    if found != 1:
        raise ValueError(f"{BUILTIN}: its [backend] no longer starts with transport, command and args")
    hosts = ", ".join(f'"{host}"' for host in target.allowed_hosts)
    head = HEAD.format(
        what=target.what,
        store=target.store,
        state_dir=STATE_DIR,
        resource_url=target.resource_url,
        token=TOKEN_VARIABLE,
        hosts=hosts,
    )
    return head + tables


def configmap(toml: str) -> str:
    """deploy/kubernetes/configmap.yaml around the Kubernetes config."""
    return CONFIGMAP_HEAD + "".join(f"    {line}" if line.strip() else "\n" for line in toml.splitlines(True))


def files() -> dict[Path, str]:
    """Every file this module makes, by path."""
    builtin = BUILTIN.read_text(encoding="utf-8")
    made = {
        DEPLOY / "config" / target.name: render(target, builtin)
        for target in TARGETS
        if target.name != "kubernetes.toml"
    }
    made[DEPLOY / "kubernetes" / "configmap.yaml"] = configmap(render(TARGETS[-1], builtin))
    return made


def main() -> int:
    """Write the files; print each one that changed."""
    for path, text in files().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
