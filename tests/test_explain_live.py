"""``/debug/explain`` on a running scheduler's ops port, over HTTP against the test API server:
a pending pod's explanation from the loop's current snapshot, a pod not yet submitted (POST),
``rulesched explain --server``, errors, and the rate limit (429 with Retry-After)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rulesched.cli import main
from rulesched.run.loop import Loop
from rulesched.run.settings import RunSettings
from tests.apiserver import TestApiServer
from tests.helpers.kube import node, pod, wait_for
from tests.helpers.scrape import families, fetch, value


def get(url: str, data: bytes | None = None) -> tuple[int, dict[str, Any], dict[str, str]]:
    request = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read()), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


@pytest.fixture
def running(server: TestApiServer, tmp_path: Path) -> Iterator[tuple[Loop, str]]:
    server.add("nodes", node("n1", cpu="2"))
    server.add("nodes", node("n2", cpu="1"))
    server.add("pods", pod("fits", cpu="500m"))
    server.add("pods", pod("huge", cpu="8"))
    shadow = tmp_path / "shadow.rules"
    shadow.write_text('audit filter never:\n    false\n    else "audit says no"\n')
    loop = Loop(
        RunSettings(
            kubeconfig=server.kubeconfig(str(tmp_path / "kubeconfig")),
            metrics_bind_address="127.0.0.1:0",
            grace_seconds=2,
            rules=("default", str(shadow)),
        )
    )
    thread = threading.Thread(target=loop.run, daemon=True)
    thread.start()
    pods = server.store.objects["pods"]
    try:
        assert wait_for(lambda: loop.ops is not None and pods["default/fits"]["spec"].get("nodeName"))
        assert loop.ops is not None
        base = f"http://127.0.0.1:{loop.ops.port}"
        assert wait_for(lambda: loop.scheduler.queue.find("default/huge") is not None)
        yield loop, base
    finally:
        loop.stop.set()
        loop.scheduler.queue.wake()
        thread.join(timeout=15)


def test_a_pending_pod_explained_live(
    running: tuple[Loop, str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    loop, base = running
    status, answer, _ = get(f"{base}/debug/explain?pod=default/huge")
    assert status == 200, answer
    assert answer["pod"] == "default/huge" and answer["feasible"] == 0 and answer["nodes"] == 2
    assert answer["message"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    blames = [b["expression"] for d in answer["detailed"] for f in d["failures"] for b in f["blame"]]
    assert 'pod.requests["cpu"] (8) <= node.free["cpu"] (1500m)' in blames  # n1 holds `fits` (500m)
    assert {s["node"]: s["needs"] for s in answer["shortfalls"]}["n1"] == {"cpu": "6500m"}
    # the reasons as codes, and the fixes: each checked on a copy of the live snapshot
    assert [c["code"] for c in answer["codes"]] == ["InsufficientResource"]
    fixes = answer["fixes"]
    assert fixes["checked"]["nodes"] == 2 and fixes["checked"]["running_pods"] == 1
    summaries = [f["summary"] for f in fixes["fixes"]]
    assert "lower pod default/huge's cpu request to 1500m" in summaries  # what n1 has free
    assert all(
        f["checked"]["placed"] == {"default/huge": f["checked"]["placed"]["default/huge"]} for f in fixes["fixes"]
    )
    assert loop.store.node_view("n1") is not None and len(loop.store.node_view("n1").pods) == 1  # its store untouched
    _, without, _ = get(f"{base}/debug/explain?pod=default/huge&fixes=0")
    assert "fixes" not in without
    # the command line asks the same endpoint
    assert main(["explain", "default/huge", "--server", base]) == 1
    table = capsys.readouterr().out
    assert "needs 6500m more cpu on n1" in table and "What would make it fit" in table
    # ... found from a `run --config` file's metrics_bind_address
    config = tmp_path / "config.yaml"
    config.write_text(f"metrics_bind_address: 0.0.0.0:{base.rsplit(':', 1)[1]}\n")
    assert main(["explain", "default/huge", "--config", str(config), "--output", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["pod"] == "default/huge"
    assert loop.cycles >= 2  # scheduling went on


def test_a_pod_not_yet_submitted(running: tuple[Loop, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, base = running
    status, answer, _ = get(f"{base}/debug/explain", json.dumps(pod("new", cpu="1")).encode())
    assert status == 200 and answer["feasible"] == 2 and answer["scores"]["best"]
    path = tmp_path / "new.json"
    path.write_text(json.dumps({"kind": "Pod", **pod("new", cpu="1")}))
    assert main(["explain", "-f", str(path), "--server", base, "--output", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["pod"] == "default/new"
    # a Job before submission: its three pods as the Job controller would create them, as a group
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"parallelism": 3, "template": {"spec": pod("t", cpu="1")["spec"]}},
    }
    jobfile = tmp_path / "job.json"
    jobfile.write_text(json.dumps(job))
    main(["explain", "-f", str(jobfile), "--server", base, "--output", "json"])
    group = json.loads(capsys.readouterr().out)["group_explanation"]
    assert group["created"] == ["Job default/train: 3 pod(s)"] and len(group["members"]) == 3
    assert group["fit"] == 2 and not group["placed"]  # n1 holds one beside `fits`, n2 one
    assert group["fixes"]["fixes"] and group["fixes"]["checked"]["nodes"] == 2


def test_errors_and_the_rate_limit(running: tuple[Loop, str]) -> None:
    _, base = running
    status, answer, _ = get(f"{base}/debug/explain?pod=default/nobody")
    assert status == 404 and "not pending" in answer["error"]
    status, answer, _ = get(f"{base}/debug/explain", b"{not json")
    assert status == 400
    statuses = [get(f"{base}/debug/explain?pod=default/huge")[0] for _ in range(8)]
    assert 429 in statuses  # a burst of 5, then 2 a second
    status, _, headers = get(f"{base}/debug/explain?pod=default/huge")
    if status == 429:
        assert int(headers["Retry-After"]) >= 1


def test_an_audit_mode_filter_counts_but_never_rejects(running: tuple[Loop, str]) -> None:
    """`fits` was bound although the audit-mode filter `never` rejects every node: the decision
    is counted in rulesched_shadow_rejections_total, and explain shows the would-be rejections."""
    _, base = running
    found = families(fetch(f"{base}/metrics"))
    assert value(found["rulesched_shadow_rejections_total"], "_total", rule="never", profile="rulesched") == 1
    _, answer, _ = get(f"{base}/debug/explain?pod=default/huge")
    assert answer["shadow"]["rules"] == ["never"]
    assert answer["shadow"]["reasons"] == [
        {"rule": "never", "reason": "audit says no", "nodes": 2, "names": ["n1", "n2"]}
    ]
