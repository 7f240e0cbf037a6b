"""Alibaba's openb GPU trace as Kubernetes objects, GPUs the Dynamic Resource Allocation way.

    python benchmarks/openb_to_k8s.py [--trace default] [--seed 42] [--ratio 1.3 | --as-is]
        [--gpus dra | extended] [--output json | yaml] > cluster.json
    rulesched simulate cluster.json --rules gpu-fragmentation

What each row becomes (`--gpus dra`, the default; resource.k8s.io/v1):
- a **Node** per row of the node list: allocatable `cpu` (cpu_milli), `memory` (memory_mib Mi),
  `pods` 110; labels `kubernetes.io/hostname` and `openb.example.com/rank` (the run's seeded
  node order, which the paper's simulator breaks score ties by; benchmarks/openb.py);
- a **ResourceSlice** per node (driver `gpu.example.com`, pool = the node, one slice): a device
  per GPU, `gpu-0` ..., attribute `model` (the row's model), capacity `milli: 1000`,
  `allowMultipleAllocations: true` (several claims may share a GPU up to its capacity);
- one **DeviceClass** `gpu.example.com` selecting the driver's devices;
- a **Pod** per arriving task (namespace `openb`), requests `cpu` and `memory`; a task with GPUs
  is annotated with its ask as the paper's simulator annotates it (`alibabacloud.com/gpu-count`,
  `alibabacloud.com/gpu-milli`: rules read a running pod's ask there, not in its claims) and
  adds a claim from a **ResourceClaimTemplate** (one per kind of GPU ask): one request of
  `count: num_gpu` devices with the capacity request `milli: gpu_milli` each (1000 for whole GPUs;
  below 1000 only with one GPU: a shared GPU), and when `gpu_spec` lists models, a CEL selector
  `device.attributes["gpu.example.com"].model in [...]`.

Which pods: by default the paper's method for a seed (the trace shuffled, then drawn from until
the GPU requests reach `--ratio` × the GPUs; benchmarks/openb.py), pending in arrival order
(creationTimestamp one second apart); `--as-is` takes the trace file's pods once, in its order.

`--gpus extended` is for policies that predate DRA: each node advertises `nvidia.com/gpu` (its
GPU count) and each task limits `nvidia.com/gpu: num_gpu`, a shared GPU taken whole (an extended
resource cannot be shared), and the model is a node label `gpu.example.com/model` that `gpu_spec`
becomes a required node affinity on. Never written into the tree: the trace's terms ask that it
be read by path (benchmarks/openb.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import openb  # noqa: E402
from openb import MILLI, GpuNode, TracePod  # noqa: E402

DRIVER = "gpu.example.com"
DEVICE_CLASS = "gpu.example.com"
NAMESPACE = "openb"
RANK_LABEL = "openb.example.com/rank"
MODEL_LABEL = "gpu.example.com/model"
# the paper's simulator's own annotations of a pod's GPU ask (open-gpu-share/utils/const.go):
# rules cannot read what a running pod's claims ask (only the pending pod's), so the
# GpuClustering baseline reads these, as the simulator's plugin does
GPU_COUNT_ANNOTATION = "alibabacloud.com/gpu-count"
GPU_MILLI_ANNOTATION = "alibabacloud.com/gpu-milli"
EPOCH = 1_700_000_000  # creationTimestamps count up from here, one second per pod


def _time(seconds: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_object(node: GpuNode, rank: int, gpus: str) -> dict[str, Any]:
    allocatable: dict[str, str] = {"cpu": f"{node.cpu_milli}m", "memory": f"{node.memory_mib}Mi", "pods": "110"}
    labels = {"kubernetes.io/hostname": node.name, RANK_LABEL: str(rank)}
    if gpus == "extended":
        allocatable["nvidia.com/gpu"] = str(node.gpus)
        labels[MODEL_LABEL] = node.model
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": labels},
        "status": {"allocatable": allocatable, "capacity": dict(allocatable)},
    }


def resource_slice(node: GpuNode) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node.name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node.name,
            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"model": {"string": node.model}},
                    "capacity": {"milli": {"value": str(MILLI)}},
                    "allowMultipleAllocations": True,
                }
                for i in range(node.gpus)
            ],
        },
    }


def device_class() -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def template_name(pod: TracePod) -> str:
    name = f"gpu-{pod.num_gpu}x{pod.gpu_milli}"
    if pod.gpu_spec:
        name += "-" + "-".join(m.lower() for m in pod.gpu_spec)
    return name


def claim_template(pod: TracePod) -> dict[str, Any]:
    exactly: dict[str, Any] = {
        "deviceClassName": DEVICE_CLASS,
        "allocationMode": "ExactCount",
        "count": pod.num_gpu,
        "capacity": {"requests": {"milli": str(pod.gpu_milli)}},
    }
    if pod.gpu_spec:
        models = ", ".join(f'"{m}"' for m in pod.gpu_spec)
        exactly["selectors"] = [{"cel": {"expression": f'device.attributes["{DRIVER}"].model in [{models}]'}}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": template_name(pod), "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}}},
    }


def pod_object(pod: TracePod, arrival: int, gpus: str) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": f"{pod.cpu_milli}m", "memory": f"{pod.memory_mib}Mi"}}
    spec: dict[str, Any] = {"containers": [{"name": "main", "image": "openb/task", "resources": resources}]}
    annotations: dict[str, str] = {}
    if pod.num_gpu:  # the ask as the paper's simulator annotates its pods (what rules read of running pods)
        annotations = {GPU_COUNT_ANNOTATION: str(pod.num_gpu), GPU_MILLI_ANNOTATION: str(pod.gpu_milli)}
    if pod.num_gpu and gpus == "dra":
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template_name(pod)}]
        resources["claims"] = [{"name": "gpu"}]
    elif pod.num_gpu:
        resources["limits"] = {"nvidia.com/gpu": str(pod.num_gpu)}
        if pod.gpu_spec:
            term = {"matchExpressions": [{"key": MODEL_LABEL, "operator": "In", "values": list(pod.gpu_spec)}]}
            spec["affinity"] = {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
            }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod.name,
            "namespace": NAMESPACE,
            "creationTimestamp": _time(EPOCH + arrival),
            "labels": {"app": "openb"},
            "annotations": annotations,
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def objects(
    nodes: Sequence[GpuNode], pods: Sequence[TracePod], rank: Sequence[int], gpus: str = "dra"
) -> Iterator[dict[str, Any]]:
    yield {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    for node, r in zip(nodes, rank, strict=True):
        yield node_object(node, r, gpus)
    if gpus == "dra":
        yield device_class()
        for node in nodes:
            if node.gpus:
                yield resource_slice(node)
        seen: dict[str, TracePod] = {}
        for pod in pods:
            if pod.num_gpu:
                seen.setdefault(template_name(pod), pod)
        for pod in seen.values():
            yield claim_template(pod)
    for i, pod in enumerate(pods):
        yield pod_object(pod, i, gpus)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trace", default="default", help="a trace variant (default, gpushare40, ...) or a CSV path")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--ratio", type=float, default=1.3, help="GPU requests to reach, × the cluster's GPUs")
    parser.add_argument("--as-is", action="store_true", help="the trace's pods once, in file order")
    parser.add_argument("--gpus", choices=["dra", "extended"], default="dra")
    parser.add_argument("--output", choices=["json", "yaml"], default="json")
    args = parser.parse_args(argv)
    try:
        nodes = openb.read_nodes()
        trace = openb.read_pods(openb.find_trace(args.trace))
    except (openb.TraceError, OSError) as e:
        print(f"openb_to_k8s: {e}", file=sys.stderr)
        return 2
    workload = openb.arrivals(trace, nodes, args.seed, args.ratio)
    pods = trace if args.as_is else list(workload.pods)
    items = list(objects(nodes, pods, workload.node_rank, args.gpus))
    if args.output == "yaml":
        import yaml

        yaml.safe_dump_all(items, sys.stdout, sort_keys=False)
    else:
        json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout, separators=(",", ":"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
