"""What deploy/ holds, read without running a container: the gateway configs made from the built-in one are in
step with it and load, the Kubernetes manifests are valid against Kubernetes' own schemas (what podman cannot run
here is checked at least this way: Services, the PodDisruptionBudget, the claims, the rollout), and the compose
file and the image keep the promises docs/deployment.md makes of them."""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from gateway.config import load_config, parse_config
from tests.support import kube
from tests.support.deployfiles import BUILTIN, DEPLOY, TOKEN_VARIABLE, files
from tests.support.processes import ROOT

HASH = hashlib.sha256(b"agent-token").hexdigest()


@pytest.fixture(autouse=True)
def _agent_token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TOKEN_VARIABLE, HASH)


def test_the_deploy_configs_are_made_from_the_built_in_one() -> None:
    stale = [str(path.relative_to(ROOT)) for path, text in files().items() if path.read_text(encoding="utf-8") != text]
    assert stale == [], "run: .venv/bin/python -m tests.support.deployfiles"


def _deploy_configs() -> dict[str, dict[str, Any]]:
    configs = {path.name: tomllib.loads(path.read_text()) for path in sorted((DEPLOY / "config").glob("*.toml"))}
    configmap = yaml.safe_load((DEPLOY / "kubernetes" / "configmap.yaml").read_text())
    configs["configmap.yaml"] = tomllib.loads(configmap["data"]["gateway.toml"])
    return configs


@pytest.mark.parametrize("config_name", ["compose-redis.toml", "compose-postgres.toml", "configmap.yaml"])
def test_each_deploy_config_loads_and_publishes_the_built_in_tools_behind_tokens(config_name: str) -> None:
    builtin = load_config(BUILTIN)
    config = parse_config(_deploy_configs()[config_name])
    assert config.tools == builtin.tools and config.lookups == builtin.lookups
    assert config.auth.verifier == "static" and config.auth.tokens[0].sha256 == HASH
    assert config.backend is not None and config.backend.transport == "http"
    assert config.gateway.store.startswith(("redis://", "postgresql://"))
    assert config.gateway.state_dir == "/var/lib/mcp-safety-gateway"


def test_the_kubernetes_manifests_are_valid_for_kubernetes() -> None:
    docs = kube.documents()
    kinds = sorted({doc["kind"] for doc in docs})
    assert kinds == sorted(kube.RUNS | kube.VALIDATED_ONLY)
    assert len(kube.validate(docs)) == len(docs) * len(kube.SCHEMA_VERSIONS)


def test_a_manifest_that_kubernetes_would_refuse_is_refused() -> None:
    import kubernetes_validate

    budget = next(doc for doc in kube.documents() if doc["kind"] == "PodDisruptionBudget")
    budget["spec"]["selectr"] = budget["spec"].pop("selector")
    with pytest.raises(kubernetes_validate.ValidationError):
        kube.validate([budget])


def _workloads() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in kube.documents() if doc["kind"] in ("Deployment", "StatefulSet")}


def test_every_pod_runs_as_a_non_root_user_on_a_read_only_root_with_no_capabilities_and_bounded_resources() -> None:
    for workload, doc in _workloads().items():
        pod = doc["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True, workload
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, workload
            assert context["allowPrivilegeEscalation"] is False, workload
            assert context["capabilities"]["drop"] == ["ALL"], workload
            assert set(container["resources"]) == {"requests", "limits"}, workload
            assert {"livenessProbe", "readinessProbe"} <= set(container), workload


def test_the_gateway_runs_two_replicas_probed_on_healthz_and_readyz_and_kept_by_a_budget() -> None:
    gateway = _workloads()["mcp-safety-gateway"]
    assert gateway["spec"]["replicas"] == 2
    probes = kube.probes(kube.documents(), "mcp-safety-gateway")
    assert probes["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert probes["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert _workloads()["redis"]["kind"] == "StatefulSet"
    budget = next(doc for doc in kube.documents() if doc["kind"] == "PodDisruptionBudget")
    assert budget["spec"]["selector"] == gateway["spec"]["selector"] and budget["spec"]["minAvailable"] == 1
    grace = gateway["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    config = parse_config(_deploy_configs()["configmap.yaml"])
    assert config.backend is not None and grace > config.backend.call_timeout_seconds, "a write in flight settles"


def test_the_committed_secret_holds_no_secret() -> None:
    secret = next(doc for doc in kube.documents() if doc["kind"] == "Secret")
    values = {key: value for key, value in secret["stringData"].items() if key != "redis-users.acl"}
    assert set(values.values()) == {""}
    assert secret["stringData"]["redis-users.acl"].strip() == "user default off"


def test_the_compose_file_runs_the_gateway_read_only_with_every_secret_from_a_file() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    services = compose["services"]
    assert {name for name, service in services.items() if "profiles" not in service} == {"backend"}
    profiles = {profile for service in services.values() for profile in service.get("profiles", [])}
    assert profiles == {"redis", "postgres"}
    for gateway in (services["gateway"], services["gateway-postgres"]):
        assert gateway["read_only"] is True
        assert all(value.startswith("/run/secrets/") for value in gateway["environment"].values())
        assert all(variable.endswith("_FILE") for variable in gateway["environment"])
        assert gateway["stop_grace_period"] == "45s"
    assert all(Path(secret["file"]).parts[0] == "secrets" for secret in compose["secrets"].values())


def test_the_image_carries_no_secret_test_or_source_tree_beyond_the_wheel() -> None:
    ignored = (ROOT / ".containerignore").read_text().splitlines()
    assert ignored[ignored.index("*") :][:1] == ["*"], "the build context starts from nothing"
    admitted = sorted(line[1:] for line in ignored if line.startswith("!"))
    assert admitted == ["LICENSE", "README.md", "gateway/", "legacy_backend/", "pyproject.toml"]
    containerfile = (DEPLOY / "Containerfile").read_text()
    assert "USER 10001:10001" in containerfile and "STOPSIGNAL SIGTERM" in containerfile
    healthcheck = containerfile[containerfile.index("\nHEALTHCHECK") :].split("\nENTRYPOINT", 1)[0]
    assert 'CMD ["python", "-c"' in healthcheck, "the gateway's own Python asks /healthz: the image needs no curl"
