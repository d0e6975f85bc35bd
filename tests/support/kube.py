"""deploy/kubernetes/ as ``podman play kube`` (4.3) can run it, and checked against Kubernetes' own schemas.

What runs: every workload's pod template (the gateway's Deployment, Redis's StatefulSet, the backend's
Deployment) as that many pods, with its containers, security context (user, read-only root, dropped
capabilities), resources, ConfigMap, Secret and volumes, on a network of the test's own. What does not run here,
and is only validated (``validate``): Services, the PodDisruptionBudget, PersistentVolumeClaims, the
Deployment's rollout, and the probes (podman turns an ``httpGet`` probe into a curl command, and the image has
no curl; the tests ask each probe's path themselves, with its Host header, instead).

How the manifests are changed to run (``playable``), and nothing else:
- each pod is named after the Service that selects it (podman's DNS knows pods by name, not Services), plus the
  session's suffix; the ConfigMap's host names follow;
- each gateway replica gets a loopback ``hostPort`` (the test's way in);
- images name the ones built for the test;
- the Secret becomes a ConfigMap of the same values (podman 4.3 mounts a Secret's data undecoded);
- a StatefulSet's ``volumeClaimTemplates`` and every ``persistentVolumeClaim`` become named volumes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.support.containers import name
from tests.support.processes import ROOT, free_port

MANIFESTS = ROOT / "deploy" / "kubernetes"
SCHEMA_VERSIONS = ("1.30", "latest")
"""Kubernetes versions the manifests are validated against (``latest``: kubernetes-validate's newest)."""
RUNS = {"ConfigMap", "Secret", "Deployment", "StatefulSet"}
VALIDATED_ONLY = {"Service", "PodDisruptionBudget", "PersistentVolumeClaim"}


def documents() -> list[dict[str, Any]]:
    """Every document of deploy/kubernetes/*.yaml."""
    docs: list[dict[str, Any]] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        docs += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    return docs


def validate(docs: list[dict[str, Any]]) -> list[str]:
    """Each document checked against Kubernetes' JSON schemas (strict: no unknown field); what was checked."""
    import kubernetes_validate

    checked = []
    for version in SCHEMA_VERSIONS:
        wanted = kubernetes_validate.latest_version() if version == "latest" else version
        for doc in docs:
            kubernetes_validate.validate(doc, wanted, strict=True)
            checked.append(f"{doc['kind']}/{doc['metadata']['name']}@{wanted}")
    return checked


@dataclass
class Played:
    """The YAML to play, and what it will make."""

    text: str
    pods: list[str] = field(default_factory=list)
    volumes: list[str] = field(default_factory=list)
    gateway_ports: list[int] = field(default_factory=list)
    containers: dict[str, str] = field(default_factory=dict)
    """Container name in podman, by ``POD/CONTAINER`` as the manifests name them (``legacy-backend-0/backend``)."""


def playable(docs: list[dict[str, Any]], images: dict[str, str], secret_values: dict[str, str]) -> Played:
    """The manifests as podman 4.3 can play them (the module docstring says how they are changed)."""
    services = {
        _selector_key(doc["spec"]["selector"]): doc["metadata"]["name"] for doc in docs if doc["kind"] == "Service"
    }
    renamed = {
        (doc["kind"], doc["metadata"]["name"]): name(
            doc["metadata"]["name"] + ("-secret" if doc["kind"] == "Secret" else "")
        )
        for doc in docs
        if doc["kind"] in ("ConfigMap", "Secret")
    }
    hosts = {service: name(service) for service in services.values()}
    played = Played("")
    out: list[dict[str, Any]] = []
    for doc in docs:
        kind = doc["kind"]
        if kind == "ConfigMap":
            out.append(_config_map(doc, renamed, hosts))
        elif kind == "Secret":
            data = {key: secret_values[key] for key in doc.get("stringData", {})}
            out.append(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": renamed["Secret", doc["metadata"]["name"]]},
                    "data": data,
                }
            )
        elif kind in ("Deployment", "StatefulSet"):
            out += _pods(doc, services, renamed, images, played)
    out.sort(key=lambda made: made["kind"] != "ConfigMap")  # what pods mount, first
    played.text = yaml.safe_dump_all(out, sort_keys=False)
    return played


def _selector_key(selector: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(selector.items()))


def _config_map(doc: dict[str, Any], renamed: dict[tuple[str, str], str], hosts: dict[str, str]) -> dict[str, Any]:
    made = copy.deepcopy(doc)
    made["metadata"] = {"name": renamed["ConfigMap", doc["metadata"]["name"]]}
    for key, text in made["data"].items():
        for service, host in hosts.items():
            text = text.replace(f"//{service}:", f"//{host}:")
        made["data"][key] = text
    return made


def _pods(
    doc: dict[str, Any],
    services: dict[Any, str],
    renamed: dict[tuple[str, str], str],
    images: dict[str, str],
    played: Played,
) -> Iterator[dict[str, Any]]:
    template = doc["spec"]["template"]
    service = services.get(_selector_key(template["metadata"]["labels"]))
    replicas = int(doc["spec"].get("replicas", 1))
    claims = [claim["metadata"]["name"] for claim in doc["spec"].get("volumeClaimTemplates", [])]
    for index in range(replicas):
        pod_name = name(service if service and replicas == 1 else f"{doc['metadata']['name']}-{index}")
        spec = copy.deepcopy(template["spec"])
        spec.pop("automountServiceAccountToken", None)
        spec["restartPolicy"] = "Never"
        for container in spec["containers"]:
            container["image"] = images.get(container["image"], container["image"])
            container.pop("livenessProbe", None)
            container.pop("readinessProbe", None)
            container.pop("imagePullPolicy", None)
            for port in container.get("ports", []):
                port.pop("name", None)
                if doc["kind"] == "Deployment" and replicas > 1:
                    port["hostIP"] = "127.0.0.1"
                    port["hostPort"] = free_port()
                    played.gateway_ports.append(port["hostPort"])
            played.containers[f"{doc['metadata']['name']}-{index}/{container['name']}"] = (
                f"{pod_name}-{container['name']}"
            )
        volumes = spec.setdefault("volumes", [])
        volumes += [{"name": claim, "persistentVolumeClaim": {"claimName": claim}} for claim in claims]
        for volume in volumes:
            if "configMap" in volume:
                volume["configMap"]["name"] = renamed["ConfigMap", volume["configMap"]["name"]]
            if "secret" in volume:
                secret = volume.pop("secret")
                volume["configMap"] = {
                    "name": renamed["Secret", secret["secretName"]],
                    "items": secret.get("items", []),
                }
            if "persistentVolumeClaim" in volume:
                claim = volume["persistentVolumeClaim"]["claimName"]
                claim = f"{claim}-{pod_name}" if claim in claims else name(claim)
                volume["persistentVolumeClaim"]["claimName"] = claim
                played.volumes.append(claim)
        played.pods.append(pod_name)
        yield {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": pod_name, "labels": dict(template["metadata"]["labels"])},
            "spec": spec,
        }


def probes(docs: list[dict[str, Any]], workload: str) -> dict[str, dict[str, Any]]:
    """A workload's first container's probes as written (``livenessProbe``, ``readinessProbe``)."""
    doc = next(
        doc for doc in docs if doc["metadata"]["name"] == workload and doc["kind"] in ("Deployment", "StatefulSet")
    )
    container = doc["spec"]["template"]["spec"]["containers"][0]
    return {kind: container[kind] for kind in ("livenessProbe", "readinessProbe") if kind in container}


def write(played: Played, directory: Path) -> Path:
    """The YAML to play, as a file."""
    path = directory / "played.yaml"
    path.write_text(played.text, encoding="utf-8")
    return path
