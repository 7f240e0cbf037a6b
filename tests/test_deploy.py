"""deploy/: every manifest parses, each object decodes into the official client's model for its
kind with its required fields, the kustomization names files that exist, the RBAC grants only
what `rulesched run` calls (no wildcard), and the Deployment runs what the CLI accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from rulesched.cli import _parser

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
    ("apps/v1", "Deployment"): "V1Deployment",
}
# (apiGroup, resource) -> verbs rulesched's code uses (rulesched/kube/api.py and its callers)
USED = {
    ("", "nodes"): {"list", "watch"},
    ("", "namespaces"): {"list", "watch"},
    ("", "pods"): {"get", "list", "watch"},
    ("", "pods/binding"): {"create"},
    ("", "pods/eviction"): {"create"},
    ("", "pods/status"): {"patch"},
    ("policy", "poddisruptionbudgets"): {"list", "watch"},
    ("scheduling.k8s.io", "priorityclasses"): {"list", "watch"},
    ("events.k8s.io", "events"): {"create"},
    ("coordination.k8s.io", "leases"): {"get", "create", "update"},
}


def manifests() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    docs = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]
    return docs


@pytest.mark.parametrize("doc", manifests(), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_each_object_is_a_valid_model_of_its_kind(doc: dict[str, Any]) -> None:
    model = MODELS[doc["apiVersion"], doc["kind"]]
    obj = client.ApiClient().deserialize(json.dumps(doc), model, "application/json")
    assert obj.metadata.name == doc["metadata"]["name"]
    assert type(obj).__name__ == model
    if doc["kind"] == "Deployment":
        assert obj.spec.replicas == 2 and obj.spec.template.spec.service_account_name == "rulesched"


def test_the_kustomization_names_files_that_exist() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    for name in kustomization["resources"]:
        assert (DEPLOY / name).is_file(), name
    for generator in kustomization["configMapGenerator"]:
        for name in generator["files"]:
            assert (DEPLOY / name).is_file(), name


def test_rbac_grants_what_is_used_and_nothing_more() -> None:
    granted: dict[tuple[str, str], set[str]] = {}
    for doc in manifests():
        if doc["kind"] in ("ClusterRole", "Role"):
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        assert "*" not in (group, resource, *rule["verbs"])
                        granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == USED


def test_the_deployment_runs_flags_the_cli_accepts() -> None:
    (deployment,) = [d for d in manifests() if d["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = _parser().parse_args(["run", *container["args"]])
    assert args.leader_elect and args.rules == ["/etc/rulesched/rules"]
    mount = container["volumeMounts"][0]["mountPath"]
    assert args.rules[0] == mount
    probes = {container["livenessProbe"]["httpGet"]["path"], container["readinessProbe"]["httpGet"]["path"]}
    assert probes == {"/healthz", "/readyz"}
