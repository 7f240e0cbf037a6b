"""deploy/: every manifest parses, each object decodes into the official client's model for its
kind with its required fields, the kustomization names files that exist, the RBAC grants only
what `rulesched run` calls (no wildcard), and the Deployment runs what the CLI accepts."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from rulesched.cli import _parser, log_settings
from rulesched.run.cli import settings_from
from rulesched.run.profiles import ProfileSettings

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
MODELS = {
    ("v1", "Namespace"): "V1Namespace",
    ("v1", "ServiceAccount"): "V1ServiceAccount",
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): "V1ClusterRole",
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): "V1ClusterRoleBinding",
    ("rbac.authorization.k8s.io/v1", "Role"): "V1Role",
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): "V1RoleBinding",
    ("apps/v1", "Deployment"): "V1Deployment",
    ("v1", "Service"): "V1Service",
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): "V1CustomResourceDefinition",
}
# Both faces' informer caches read these for their selectors (system default spreading).
WORKLOAD_READS = {
    ("", "services"): {"list", "watch"},
    ("", "replicationcontrollers"): {"list", "watch"},
    ("apps", "replicasets"): {"list", "watch"},
    ("apps", "statefulsets"): {"list", "watch"},
}
# (apiGroup, resource) -> verbs rulesched's code uses (rulesched/kube/api.py and its callers)
USED = {
    ("", "nodes"): {"list", "watch"},
    ("", "namespaces"): {"list", "watch"},
    ("", "pods"): {"get", "list", "watch", "delete"},  # (delete: victims no budget selects)
    ("", "pods/binding"): {"create"},
    ("", "pods/eviction"): {"create"},
    ("", "pods/status"): {"patch"},
    ("policy", "poddisruptionbudgets"): {"list", "watch"},
    ("scheduling.k8s.io", "priorityclasses"): {"list", "watch"},
    ("events.k8s.io", "events"): {"create", "patch"},  # (patch: a repeated event's series)
    ("coordination.k8s.io", "leases"): {"get", "create", "update"},
    ("", "configmaps"): {"get", "list", "watch", "create", "update"},  # update, and get, on NAME-last-good only
    **WORKLOAD_READS,
    ("", "persistentvolumes"): {"list", "watch", "patch"},
    ("", "persistentvolumeclaims"): {"list", "watch", "patch"},
    ("storage.k8s.io", "storageclasses"): {"list", "watch"},
    ("storage.k8s.io", "csinodes"): {"list", "watch"},
    ("metrics.k8s.io", "nodes"): {"list"},  # load_sources' metrics-api (rulesched/kube/node_metrics.py)
    ("wgpolicyk8s.io", "policyreports"): {"get", "create", "update"},  # --audit-interval
    # with --pod-groups / --workloads
    ("scheduling.x-k8s.io", "podgroups"): {"list", "watch"},
    ("scheduling.x-k8s.io", "podgroups/status"): {"patch"},
    ("scheduling.k8s.io", "podgroups"): {"list", "watch"},
    ("scheduling.k8s.io", "compositepodgroups"): {"list", "watch"},
    ("scheduling.k8s.io", "podgroups/status"): {"patch"},
    # Dynamic Resource Allocation (rulesched/mirror.py's DRA, rulesched/kube/claims.py)
    ("resource.k8s.io", "deviceclasses"): {"list", "watch"},
    ("resource.k8s.io", "devicetaintrules"): {"list", "watch"},  # (their taints on the slices' devices)
    ("resource.k8s.io", "resourceslices"): {"list", "watch"},
    ("resource.k8s.io", "resourceclaimtemplates"): {"list", "watch"},
    # (create, delete: the claim made for DRA-served extended resources, KEP-5004)
    ("resource.k8s.io", "resourceclaims"): {"get", "list", "watch", "update", "create", "delete"},
    ("resource.k8s.io", "resourceclaims/status"): {"update"},
    # (synthetic: 1.37's API server checks it on a status update changing allocation or reservedFor)
    ("resource.k8s.io", "resourceclaims/binding"): {"update"},
}


# What `rulesched extender` calls: the informer cache, the rules ConfigMap and its events (the
# bind verb's grants are in rbac-bind.yaml, outside the kustomization; tests/test_extender_exposed.py
# checks both against the requests the extender makes).
EXTENDER_USED = {
    ("", "nodes"): {"list", "watch"},
    ("", "namespaces"): {"list", "watch"},
    ("", "pods"): {"list", "watch"},
    ("policy", "poddisruptionbudgets"): {"list", "watch"},
    ("scheduling.k8s.io", "priorityclasses"): {"list", "watch"},
    ("", "configmaps"): {"get", "list", "watch", "create", "update"},  # update, and get, on NAME-last-good only
    ("events.k8s.io", "events"): {"create"},
    **WORKLOAD_READS,
    ("", "persistentvolumes"): {"list", "watch"},
    ("", "persistentvolumeclaims"): {"list", "watch"},
    ("storage.k8s.io", "storageclasses"): {"list", "watch"},
    ("storage.k8s.io", "csinodes"): {"list", "watch"},
    ("resource.k8s.io", "deviceclasses"): {"list", "watch"},  # DRA-backed extended resources (KEP-5004)
}
EXTENDER = DEPLOY / "extender"


def manifests(folder: Path = DEPLOY) -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    docs = []
    for name in kustomization["resources"]:
        docs += [d for d in yaml.safe_load_all((folder / name).read_text()) if d]
    return docs


@pytest.mark.parametrize("doc", manifests() + manifests(EXTENDER), ids=lambda d: f"{d['kind']}/{d['metadata']['name']}")
def test_each_object_is_a_valid_model_of_its_kind(doc: dict[str, Any]) -> None:
    model = MODELS[doc["apiVersion"], doc["kind"]]
    obj = client.ApiClient().deserialize(json.dumps(doc), model, "application/json")
    assert obj.metadata.name == doc["metadata"]["name"]
    assert type(obj).__name__ == model
    if doc["kind"] == "Deployment":
        assert obj.spec.replicas == 2 and obj.spec.template.spec.service_account_name == doc["metadata"]["name"]


@pytest.mark.parametrize("folder", [DEPLOY, EXTENDER], ids=["run", "extender"])
def test_the_kustomization_names_files_that_exist(folder: Path) -> None:
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    for name in kustomization["resources"]:
        assert (folder / name).is_file(), name
    for generator in kustomization["configMapGenerator"]:
        for name in generator["files"]:
            assert (folder / name).is_file(), name


@pytest.mark.parametrize(("folder", "used"), [(DEPLOY, USED), (EXTENDER, EXTENDER_USED)], ids=["run", "extender"])
def test_rbac_grants_what_is_used_and_nothing_more(folder: Path, used: dict[tuple[str, str], set[str]]) -> None:
    granted: dict[tuple[str, str], set[str]] = {}
    for doc in manifests(folder):
        if doc["kind"] in ("ClusterRole", "Role"):
            for rule in doc["rules"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        assert "*" not in (group, resource, *rule["verbs"])
                        granted.setdefault((group, resource), set()).update(rule["verbs"])
    assert granted == used


@pytest.mark.parametrize("folder", [DEPLOY, EXTENDER], ids=["run", "extender"])
def test_only_the_last_good_record_may_be_updated(folder: Path) -> None:
    """ConfigMaps: the rules are read; update is granted on the last good record's name only."""
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    record = kustomization["configMapGenerator"][0]["name"] + "-last-good"
    for doc in manifests(folder):
        for rule in doc.get("rules", []) if doc["kind"] in ("ClusterRole", "Role") else []:
            if "configmaps" in rule["resources"] and "update" in rule["verbs"]:
                assert doc["kind"] == "Role" and rule.get("resourceNames") == [record]


def test_the_deployment_runs_flags_the_cli_accepts(tmp_path: Path) -> None:
    """The Deployment runs deploy/config.yaml (mounted from the generated ConfigMap): one profile
    on the rules ConfigMap, and a commented second one that parses too once uncommented."""
    (deployment,) = [d for d in manifests() if d["kind"] == "Deployment"]
    pod_spec = deployment["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    (config_arg,) = [a for a in container["args"] if a.startswith("--config=")]
    mounted = config_arg.removeprefix("--config=")
    (mount,) = container["volumeMounts"]
    (volume,) = [v for v in pod_spec["volumes"] if v["name"] == mount["name"]]
    assert str(Path(mount["mountPath"]) / "config.yaml") == mounted
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    generators = {g["name"]: g["files"] for g in kustomization["configMapGenerator"]}
    assert generators[volume["configMap"]["name"]] == ["config.yaml"]
    config = tmp_path / "config.yaml"  # (the mounted file, here)
    config.write_text((DEPLOY / "config.yaml").read_text())
    args = _parser().parse_args(["run", *(a if a != config_arg else f"--config={config}" for a in container["args"])])
    settings = settings_from(args)
    assert settings.leader_elect and settings.effective_profiles == (
        ProfileSettings("rulesched", (), "rulesched/rulesched-rules"),
    )
    env = {e["name"]: e["value"] for e in container["env"]}
    assert log_settings(args, env).level == logging.INFO  # the operator's events; a valid setting
    example = "\n".join(  # the commented second profile, uncommented
        line.replace("# ", "", 1) if line.startswith(("  # -", "  #   ")) else line
        for line in (DEPLOY / "config.yaml").read_text().splitlines()
    )
    config.write_text(example)
    profiles = settings_from(args).effective_profiles
    assert [p.scheduler_name for p in profiles] == ["rulesched", "rulesched-pack"]
    assert profiles[1] == ProfileSettings("rulesched-pack", ("most-allocated",), None, 100)
    assert kustomization["configMapGenerator"][0]["name"] == "rulesched-rules"
    assert kustomization["generatorOptions"]["disableNameSuffixHash"] is True  # watched, so the name stays
    probes = {container["livenessProbe"]["httpGet"]["path"], container["readinessProbe"]["httpGet"]["path"]}
    assert probes == {"/healthz", "/readyz"}


def test_the_extender_deployment_runs_flags_the_cli_accepts() -> None:
    (deployment,) = [d for d in manifests(EXTENDER) if d["kind"] == "Deployment"]
    pod_spec = deployment["spec"]["template"]["spec"]
    (container,) = pod_spec["containers"]
    assert container["command"] == ["rulesched", "extender"]
    args = _parser().parse_args(["extender", *container["args"]])
    assert args.in_cluster and args.rules_configmap == "rulesched/rulesched-extender-rules"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert log_settings(args, {k: v for k, v in env.items() if v is not None}).level == logging.INFO
    assert not args.bind_verb  # off unless configured
    # the pod's own address (the downward API), over TLS from the mounted Secret
    host, port = args.listen.rsplit(":", 1)
    (pod_ip,) = [e for e in container["env"] if f"$({e['name']})" == host]
    assert pod_ip["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    (mount,) = container["volumeMounts"]
    assert args.tls_cert.startswith(mount["mountPath"] + "/") and args.tls_key.startswith(mount["mountPath"] + "/")
    (volume,) = [v for v in pod_spec["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == "rulesched-extender-tls"
    assert {container["livenessProbe"]["httpGet"]["scheme"], container["readinessProbe"]["httpGet"]["scheme"]} == {
        "HTTPS"
    }
    (service,) = [d for d in manifests(EXTENDER) if d["kind"] == "Service"]
    assert container["ports"][0]["containerPort"] == int(port)
    assert service["spec"]["ports"][0]["targetPort"] == container["ports"][0]["name"]


def test_the_extender_certificate_names_what_kube_scheduler_dials() -> None:
    docs = [d for d in yaml.safe_load_all((EXTENDER / "certificate.yaml").read_text()) if d]
    (certificate,) = [d for d in docs if d["kind"] == "Certificate" and d["metadata"]["name"] == "rulesched-extender"]
    (service,) = [d for d in manifests(EXTENDER) if d["kind"] == "Service"]
    config = yaml.safe_load((EXTENDER / "scheduler-config.yaml").read_text())
    (extender,) = config["extenders"]
    assert certificate["spec"]["secretName"] == "rulesched-extender-tls"
    assert service["spec"]["clusterIP"] in certificate["spec"]["ipAddresses"]
    assert extender["tlsConfig"]["serverName"] in certificate["spec"]["dnsNames"]
    assert extender["urlPrefix"] == f"https://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"


def test_the_bind_rbac_grants_the_binding_and_volume_patches_only() -> None:
    granted = set()
    for doc in yaml.safe_load_all((EXTENDER / "rbac-bind.yaml").read_text()):
        if doc and doc["kind"] == "ClusterRole":
            granted |= {
                (g, r, v)
                for rule in doc["rules"]
                for g in rule["apiGroups"]
                for r in rule["resources"]
                for v in rule["verbs"]
            }
    assert granted == {
        ("", "pods/binding", "create"),
        ("", "persistentvolumes", "patch"),
        ("", "persistentvolumeclaims", "patch"),
    }


def test_kube_scheduler_config_points_at_the_extender_verbs() -> None:
    from rulesched.extender.server import ExtenderSettings

    config = yaml.safe_load((EXTENDER / "scheduler-config.yaml").read_text())
    assert config["apiVersion"] == "kubescheduler.config.k8s.io/v1" and config["kind"] == "KubeSchedulerConfiguration"
    (extender,) = config["extenders"]
    defaults = ExtenderSettings()
    assert "/" + extender["filterVerb"] == defaults.filter_path
    assert "/" + extender["prioritizeVerb"] == defaults.prioritize_path
    assert "/" + extender["preemptVerb"] == defaults.preempt_path
    assert extender["urlPrefix"].startswith("https://") and extender["enableHTTPS"] is True
    assert extender["nodeCacheCapable"] is True and "bindVerb" not in extender  # binding: kube-scheduler's
    assert set(extender) <= {
        "urlPrefix",
        "filterVerb",
        "prioritizeVerb",
        "preemptVerb",
        "bindVerb",
        "weight",
        "enableHTTPS",
        "nodeCacheCapable",
        "ignorable",
        "httpTimeout",
        "managedResources",
        "tlsConfig",
    }
