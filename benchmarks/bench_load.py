"""Loading a large cluster dump: peak memory and time of `rulesched simulate`'s cluster reading.

    python benchmarks/bench_load.py                            # 5000 nodes, 50 000 pods, YAML
    python benchmarks/bench_load.py --format json --pods 50000
    python benchmarks/bench_load.py --keep /tmp/dump.yaml      # keep (or reuse) the dump

Writes a dump the way ``kubectl get nodes,pods -A -o yaml`` (or ``-o json``) prints one: a single
``kind: List`` document whose items carry what a live cluster's objects carry besides what the
scheduler reads (node conditions, addresses, images and node info; pods' owner references,
default tolerations, the service-account volume, environment, probes, container statuses) --
about 9 kB per node and 3.5 kB per pod in YAML. Then runs, each in a fresh process:

- ``load``: :func:`rulesched.simulate.load.load_cluster` alone;
- ``simulate``: the whole command, ``rulesched simulate DUMP --output summary`` (every pod is
  bound to a node, so no scheduling happens: this is reading, decoding and building the store);

and prints the wall time and peak RSS of each, and the peak RSS per object (the RSS of an
interpreter that imported rulesched but loaded nothing is subtracted first). Figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen_cluster import deployment_pod, full_node  # noqa: E402

STAMP = "2026-01-01T00:00:00Z"


def dump_node(i: int, rng: random.Random) -> dict[str, Any]:
    out = full_node(i, rng)
    out["status"]["capacity"] = {
        "cpu": "16",
        "ephemeral-storage": "203070420Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "65843260Ki",
        "pods": "110",
    }
    out["status"]["allocatable"] = {
        "cpu": "15890m",
        "ephemeral-storage": "187149698763",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "61143612Ki",
        "pods": "110",
    }
    return out


def dump_pod(i: int, nodes: int, rng: random.Random) -> dict[str, Any]:
    """A running pod of one of 500 Deployments, with what the API server and kubelet add."""
    d = rng.randrange(500)
    hash_ = f"{d:08x}"[:10]
    name = f"deploy-{d}-{hash_}-{i:05x}"
    out = deployment_pod(name, d, f"node-{rng.randrange(nodes)}")
    namespace = f"team-{d % 40}"
    meta = out["metadata"]
    meta.update(
        namespace=namespace,
        generateName=f"deploy-{d}-{hash_}-",
        creationTimestamp=STAMP,
        resourceVersion=str(100000 + i),
        uid=f"{i:08x}-1f2e-4d3c-8b7a-{d:012x}",
        annotations={"kubectl.kubernetes.io/restartedAt": STAMP},
        ownerReferences=[
            {
                "apiVersion": "apps/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "ReplicaSet",
                "name": f"deploy-{d}-{hash_}",
                "uid": f"{d:08x}-0000-4000-8000-000000000000",
            }
        ],
    )
    spec = out["spec"]
    container = spec["containers"][0]
    container.update(
        env=[{"name": f"SETTING_{k}", "value": f"value-{d}-{k}"} for k in range(4)],
        imagePullPolicy="IfNotPresent",
        ports=[{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
        readinessProbe={
            "failureThreshold": 3,
            "httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
            "periodSeconds": 10,
            "successThreshold": 1,
            "timeoutSeconds": 1,
        },
        terminationMessagePath="/dev/termination-log",
        terminationMessagePolicy="File",
        volumeMounts=[
            {
                "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "name": f"kube-api-access-{i % 100000:05x}",
                "readOnly": True,
            }
        ],
    )
    spec.update(
        dnsPolicy="ClusterFirst",
        enableServiceLinks=True,
        preemptionPolicy="PreemptLowerPriority",
        priority=0,
        restartPolicy="Always",
        securityContext={},
        serviceAccount="default",
        serviceAccountName="default",
        terminationGracePeriodSeconds=30,
    )
    spec["tolerations"] = spec.get("tolerations", []) + [
        {"effect": "NoExecute", "key": f"node.kubernetes.io/{k}", "operator": "Exists", "tolerationSeconds": 300}
        for k in ("not-ready", "unreachable")
    ]
    spec["volumes"] = [
        {
            "name": f"kube-api-access-{i % 100000:05x}",
            "projected": {
                "defaultMode": 420,
                "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"items": [{"key": "ca.crt", "path": "ca.crt"}], "name": "kube-root-ca.crt"}},
                    {
                        "downwardAPI": {
                            "items": [
                                {
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                                    "path": "namespace",
                                }
                            ]
                        }
                    },
                ],
            },
        }
    ]
    out["status"] = {
        "conditions": [
            {"lastProbeTime": None, "lastTransitionTime": STAMP, "status": "True", "type": t}
            for t in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")
        ],
        "containerStatuses": [
            {
                "containerID": f"containerd://{i:064x}",
                "image": container["image"],
                "imageID": f"{container['image']}@sha256:{d:064x}",
                "lastState": {},
                "name": container["name"],
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": STAMP}},
            }
        ],
        "hostIP": f"10.250.{i % 250}.{i % 199}",
        "phase": "Running",
        "podIP": f"10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}",
        "qosClass": "Burstable",
        "startTime": STAMP,
    }
    return out


def items(nodes: int, pods: int, seed: int) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    for i in range(nodes):
        yield dump_node(i, rng)
    for i in range(pods):
        yield dump_pod(i, nodes, rng)


def write_dump(path: Path, nodes: int, pods: int, seed: int, form: str) -> None:
    """One List document, written item by item (kubectl sorts keys; so does this)."""
    with path.open("w", encoding="utf-8") as out:
        if form == "json":
            out.write('{\n    "apiVersion": "v1",\n    "items": [\n')
            for n, item in enumerate(items(nodes, pods, seed)):
                out.write(",\n" if n else "")
                out.write(json.dumps(item, indent=4, sort_keys=True))
            out.write('\n    ],\n    "kind": "List",\n    "metadata": {\n        "resourceVersion": ""\n    }\n}\n')
            return
        out.write("apiVersion: v1\nitems:\n")
        dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
        for item in items(nodes, pods, seed):
            text = yaml.dump(item, Dumper=dumper, default_flow_style=False, sort_keys=True, width=10**9)
            lines = text.splitlines()
            out.write("- " + lines[0] + "\n")
            out.writelines("  " + line + "\n" for line in lines[1:])
        out.write('kind: List\nmetadata:\n  resourceVersion: ""\n')


LOAD = """
import sys, time
from rulesched.simulate.load import load_cluster
started = time.perf_counter()
objects = load_cluster([sys.argv[1]])
print(time.perf_counter() - started, len(objects.nodes) + len(objects.pods))
"""
BASELINE = "import rulesched.cli, rulesched.simulate.load"


def measure(argv: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak RSS in MB and standard output of one child process (its own peak,
    from wait4: RUSAGE_CHILDREN would give the largest of all children so far)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        started = time.perf_counter()
        child = subprocess.Popen(argv, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if child.returncode != 0:
            raise SystemExit(f"{' '.join(argv[:4])} failed: {err.read().strip()[-500:]}")
        return wall, usage.ru_maxrss / 1024, out.read()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--format", choices=("yaml", "json"), default="yaml")
    parser.add_argument("--keep", type=Path, help="write the dump here (reused when it exists)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / f"dump.{args.format}"
        if not path.exists():
            started = time.perf_counter()
            write_dump(path, args.nodes, args.pods, args.seed, args.format)
            print(f"wrote {path} in {time.perf_counter() - started:.1f}s")
        size = os.path.getsize(path)
        objects = args.nodes + args.pods
        print(f"dump: {size / 2**20:.0f} MiB, {objects} objects ({size / objects / 1024:.1f} kB per object)")
        _, base, _ = measure([sys.executable, "-c", BASELINE])
        print(f"baseline (interpreter and imports): {base:.0f} MB")
        _, load_peak, out = measure([sys.executable, "-c", LOAD, str(path)])
        seconds, loaded = out.split()
        per = (load_peak - base) * 2**20 / int(loaded)
        print(f"load:     {float(seconds):6.1f} s   peak RSS {load_peak:6.0f} MB   {per / 1024:5.1f} kB per object")
        wall, sim_peak, _ = measure([sys.executable, "-m", "rulesched", "simulate", str(path), "--output", "summary"])
        per = (sim_peak - base) * 2**20 / int(loaded)
        print(f"simulate: {wall:6.1f} s   peak RSS {sim_peak:6.0f} MB   {per / 1024:5.1f} kB per object")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
