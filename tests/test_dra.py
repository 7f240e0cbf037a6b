"""Pods with Dynamic Resource Allocation claims (spec.resourceClaims), end to end in `simulate`:
claims made from templates as the resourceclaim controller does, devices allocated as
kube-scheduler's DynamicResources plugin allocates them (the allocator itself is tested against
upstream's table: tests/upstream/dra), never given twice, shared claims pinning their pods
together, and pods whose claims cannot be had unschedulable on every node without preemption;
the extender leaves the claims to kube-scheduler, which allocates them itself.

Upstream: pkg/scheduler/framework/plugins/dynamicresources (v1.37): every Filter failure is
UnschedulableAndUnresolvable; "cannot allocate all claims" when the allocator finds nothing.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from rulesched.cli import main
from rulesched.extender.service import Extender
from rulesched.lang import RulesHandle, load_rules, resolve_rules_path
from rulesched.semantics.dra_pod import CANNOT_ALLOCATE, NOT_AVAILABLE
from rulesched.simulate.load import load_cluster
from tests.helpers.dra_files import CLAIMS, DRIVER, GPU_CLASS, gpus, node, pod, simulate, template, write


def test_claims_from_templates_are_made_as_the_controller_makes_them(tmp_path: Path) -> None:
    cluster = load_cluster(
        [write(tmp_path, [node("n1"), GPU_CLASS, gpus("n1", 1), template(), pod("train-0", resourceClaims=CLAIMS)])]
    )
    (made,) = cluster.dra.claims.values()
    assert made.name.startswith("train-0-gpu-") and len(made.name) == len("train-0-gpu-") + 5
    assert made.owner == ("Pod", "train-0", "uid-train-0")
    assert made.annotations["resource.kubernetes.io/pod-claim-name"] == "gpu"
    (entry,) = cluster.pods[0].resource_claims
    assert entry.generated == made.name
    again = load_cluster(
        [write(tmp_path, [node("n1"), GPU_CLASS, gpus("n1", 1), template(), pod("train-0", resourceClaims=CLAIMS)])]
    )
    assert list(again.dra.claims) == [made.key]  # the same name every run


def test_devices_are_never_given_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Three GPUs in all, four pods wanting one: three placed where the GPUs are, the fourth
    unschedulable everywhere: unresolvable where no pod holds a device (n3), Unschedulable where
    evicting the pods would free theirs (beyond 1.37: tests/test_dra_preemption.py), but none
    is evicted (same priority)."""
    items = [node("n1"), node("n2"), node("n3"), GPU_CLASS, gpus("n1", 2), gpus("n2", 1), template()]
    items += [pod(f"train-{i}", resourceClaims=CLAIMS) for i in range(4)]
    rows = simulate(write(tmp_path, items), capsys)
    placed = sorted(rows[f"default/train-{i}"]["node"] or "-" for i in range(4))
    assert placed == ["-", "n1", "n1", "n2"]
    last = next(r for r in rows.values() if r["node"] is None)
    assert last["filtered"] == {n: [CANNOT_ALLOCATE] for n in ("n1", "n2", "n3")}
    assert sorted(last["unresolvable"]) == ["n3"]
    assert last["victims"] == []


def test_a_selector_picks_the_devices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = [node("n1"), node("n2"), GPU_CLASS, gpus("n1", 1, "T4"), gpus("n2", 1, "H100")]
    items += [template(selector=f'device.attributes["{DRIVER}"].model == "H100"'), pod("p", resourceClaims=CLAIMS)]
    rows = simulate(write(tmp_path, items), capsys)
    assert rows["default/p"]["node"] == "n2"


def test_a_shared_claim_pins_its_pods_to_the_node_it_was_allocated_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A claim named by two pods is allocated once; the second pod uses it (and so its node)."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "shared-gpu", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
    }
    shared = [{"name": "gpu", "resourceClaimName": "shared-gpu"}]
    items = [node("n1"), node("n2"), GPU_CLASS, gpus("n1", 1), gpus("n2", 1), claim]
    items += [pod("a", resourceClaims=shared, cpu="3"), pod("b", resourceClaims=shared, cpu="1")]
    rows = simulate(write(tmp_path, items), capsys)
    assert rows["default/a"]["node"] == rows["default/b"]["node"] is not None
    # a third pod too big for that node: the claim's node is the only one it could use
    items.append(pod("c", resourceClaims=shared, cpu="2"))
    rows = simulate(write(tmp_path, items), capsys)
    other = "n2" if rows["default/a"]["node"] == "n1" else "n1"
    assert rows["default/c"]["node"] is None
    assert rows["default/c"]["filtered"][other] == [NOT_AVAILABLE]


def test_a_missing_claim_leaves_the_pod_unschedulable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    items = [
        node("n1"),
        GPU_CLASS,
        gpus("n1", 1),
        pod("p", resourceClaims=[{"name": "gpu", "resourceClaimName": "nope"}]),
    ]
    rows = simulate(write(tmp_path, items), capsys)
    assert rows["default/p"]["filtered"] == {"n1": ['resourceclaim.resource.k8s.io "nope" not found']}


def test_the_extender_leaves_claims_to_kube_scheduler() -> None:
    """kube-scheduler's DynamicResources plugin filtered the nodes for the claims before asking,
    and allocates them before binding: the extender's rules see the pod as any other."""
    extender = Extender(RulesHandle(load_rules([resolve_rules_path("default")])))
    obj = pod("dra", priority=100, resourceClaims=CLAIMS)
    body = {"Pod": obj, "Nodes": {"metadata": {}, "items": [node("n1"), node("n2")]}, "NodeNames": None}
    answer = json.loads(extender.filter(json.dumps(body).encode()).body)
    assert [n["metadata"]["name"] for n in answer["Nodes"]["items"]] == ["n1", "n2"]
    assert answer["FailedNodes"] == {} and answer["FailedAndUnresolvableNodes"] == {}


def test_explain_says_which_claim_and_request_failed_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Beyond upstream's one reason ("cannot allocate all claims"), per node: the selector false
    with the attribute values it read, no device of the class."""
    items = [node("n1"), node("n2"), node("n3"), GPU_CLASS, gpus("n1", 2, "A100"), gpus("n2", 1, "H100")]
    items += [template(selector=f'device.attributes["{DRIVER}"].model == "H100"'), pod("p", resourceClaims=CLAIMS)]
    path = write(tmp_path, items)
    assert main(["explain", "--cluster", str(path), "--", "default/p"]) == 0
    out = capsys.readouterr().out
    assert "n1\n    DynamicResources [unresolvable]: cannot allocate all claims" in out
    assert (
        "request gpu: needs 1, 0 usable (2 device(s) of class gpu.example.com; 2 refused by its selectors: gpu-0 (model=A100), gpu-1 (model=A100))"
        in out
    )
    assert "request gpu: no device of class gpu.example.com on the node" in out


def test_rules_read_the_pods_claims_and_the_nodes_devices(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """pod.resource_claims (requests, classes, counts) and node.devices (attributes, what claims
    hold): a filter keeping pods that ask for 2 GPUs off nodes with fewer than 2 free A100s, and a
    score packing GPU pods onto nodes whose GPUs are already partly taken."""
    rules = tmp_path / "gpus.rules"
    rules.write_text(
        'extends "default"\n\n'
        "filter enough_a100 when len(pod.resource_claims) > 0:\n"
        '    count(d in node.devices where d.attributes["model"] == "A100" and not d.allocated)\n'
        "        >= sum(sum(r.count for r in c.requests) for c in pod.resource_claims)\n"
        '    else "not enough free A100s"\n\n'
        "score pack_gpus weight 10 normalize max when len(pod.resource_claims) > 0:\n"
        "    count(d in node.devices where d.allocated)\n"
    )
    two = template("two-gpus")
    two["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    items = [
        node("n1"),
        node("n2"),
        node("n3"),
        GPU_CLASS,
        gpus("n1", 4),
        gpus("n2", 4),
        gpus("n3", 1, "H100"),
        template(),
        two,
    ]
    items += [pod("first", resourceClaims=CLAIMS), pod("second", resourceClaims=CLAIMS)]
    items += [pod("pair", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "two-gpus"}])]
    rows = simulate(write(tmp_path, items), capsys, "--rules", str(rules), "--seed", "3")
    first = rows["default/first"]["node"]
    assert first in ("n1", "n2")
    assert rows["default/second"]["node"] == first  # packed beside the first's GPU
    assert rows["default/pair"]["node"] == first  # 2 free A100s left there, and the most taken
    assert rows["default/pair"]["filtered"] is None or "n3" in (rows["default/pair"]["filtered"] or {})


def test_a_device_score_ranks_the_devices_a_request_gets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`score NAME for device`: the allocator tries a request's devices best first (upstream:
    first fit, gpu-0); a claim's matchAttribute constraint still holds whatever the ranking."""
    rules = tmp_path / "devices.rules"
    rules.write_text(
        'extends "default"\n\n'
        "# prefer the highest-numbered GPU (a stand-in for 'the NVLink island with fewest free')\n"
        "score last_gpu for device weight 1:\n"
        '    device.numbers["index"]\n'
    )
    slice_ = gpus("n1", 4)
    for i, d in enumerate(slice_["spec"]["devices"]):
        d["attributes"]["index"] = {"int": i}
        d["attributes"]["numa"] = {"int": 0 if i < 3 else 1}
    pair = template("pair")
    pair["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = 2
    pair["spec"]["spec"]["devices"]["constraints"] = [{"matchAttribute": f"{DRIVER}/numa"}]
    items = [node("n1"), GPU_CLASS, slice_, template(), pair, pod("one", resourceClaims=CLAIMS)]
    items.append(pod("two", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "pair"}]))
    path = write(tmp_path, items)
    cluster = load_cluster([path])
    store = cluster.store(provision=True)
    from rulesched.lang import load_rules
    from rulesched.scheduler.framework import SchedulerSettings
    from rulesched.simulate.driver import Simulation

    sim = Simulation(load_rules([rules]), store, SchedulerSettings(seed=1))
    for p in cluster.pending_pods:
        sim.add(p)
    while sim.schedule_one() is not None:
        pass
    held = {
        c.name.split("-gpu-")[0]: sorted(d.device for d in c.allocation.devices)
        for c in store.dra.state.claims.values()
        if c.allocation is not None
    }
    assert held["one"] == ["gpu-3"]  # ranked first (upstream's first fit would take gpu-0)
    assert held["two"] == ["gpu-1", "gpu-2"]  # the best pair on one numa node (gpu-3 is taken)


def test_postfilter_deallocates_a_claim_no_one_uses_so_the_pod_goes_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """wrong-topology's PostFilter (dynamicresources_test.go:2081): a claim allocated on n1, used
    by no pod, where the pod does not fit (n1 is too small), is deallocated when no node fits;
    the next attempt allocates it on n2, where the pod goes."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu-claim", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER}}]}},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                    ]
                },
            }
        },
    }
    small = node("n1")
    small["status"]["allocatable"]["cpu"] = "1"
    items = [small, node("n2"), GPU_CLASS, gpus("n1", 1), gpus("n2", 1), claim]
    items.append(pod("p", cpu="2", resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu-claim"}]))
    rows = simulate(write(tmp_path, items), capsys)
    assert rows["default/p"]["node"] == "n2"


def test_the_stores_holdings_follow_the_claims(tmp_path: Path) -> None:
    """What the claims hold, counted by the store as claims are allocated (assumed pods), freed
    and removed, equals the same worked out from scratch (semantics.dra_devices.allocated_state,
    semantics.dra_views.device_use)."""
    from rulesched.semantics.dra_devices import allocated_state
    from rulesched.semantics.dra_views import device_use

    items = [node("n1"), node("n2"), GPU_CLASS, gpus("n1", 2), gpus("n2", 2), template()]
    items += [pod(f"p{i}", resourceClaims=CLAIMS) for i in range(4)]
    cluster = load_cluster([write(tmp_path, items)])
    store = cluster.store()
    nodes = ["n1", "n1", "n2", "n2"]
    for p, n in zip(cluster.pending_pods, nodes, strict=True):
        store.assume(p, n)

    def check() -> None:
        claims = list(store.dra.state.claims.values())
        assert store.dra.allocated == allocated_state(claims)
        assert store.dra._held.use() == device_use(claims)

    check()
    assert len(store.dra.allocated.devices) == 4
    first = sorted(store.dra.state.claims)[0]
    claim = store.dra.state.claims[first]
    store.dra.put("claims", first, dataclasses.replace(claim, allocation=None, reserved_for=()))
    check()
    store.dra.put("claims", sorted(store.dra.state.claims)[1], None)
    check()
    store.forget(cluster.pending_pods[3].key)  # a failed binding: its claim put back
    check()
    held = [c for c in store.dra.state.claims.values() if c.allocation is not None]
    assert len(store.dra.allocated.devices) == len(held) < 4


def test_rule_tests_take_dra_objects(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`rulesched test`: a case's cluster may hold DeviceClasses, ResourceSlices, templates and
    claims; the pod's template claim is made as the controller makes it."""
    (tmp_path / "dra.test.yaml").write_text(
        yaml.safe_dump(
            {
                "rules": ["default"],
                "nodes": [node("n1"), node("n2")],
                "deviceClasses": [GPU_CLASS],
                "resourceSlices": [gpus("n1", 1)],
                "resourceClaimTemplates": [template()],
                "cases": [
                    {
                        "name": "the GPU is on n1",
                        "pod": pod("train", resourceClaims=CLAIMS),
                        "expect": {
                            "feasible": ["n1"],
                            "reasons": {"n2": [CANNOT_ALLOCATE]},
                            "unresolvable": ["n2"],
                        },
                    }
                ],
            }
        )
    )
    assert main(["test", str(tmp_path)]) == 0, capsys.readouterr().out
