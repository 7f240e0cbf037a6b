"""``rulesched simulate`` on real cluster dumps: standard input, pods bound to nodes missing from
the dump, ``--output summary``, the progress bar (only on a terminal), and table ``--explain``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.simulate.run import PROGRESS_MIN_PODS, _progress_bar, wants_progress

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples" / "cluster.yaml"
SUMMARY = re.compile(r"4 scheduled, 1 unschedulable, 2 preempted in \d+\.\d{3}s")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def rulesched(*args: str | Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """The command as a user runs it; ``stdin`` is piped in (else standard input is empty)."""
    return subprocess.run(
        [sys.executable, "-m", "rulesched", *map(str, args)],
        cwd=ROOT,
        env=_env(),
        input=stdin if stdin is not None else "",
        capture_output=True,
        text=True,
        timeout=120,
    )


def ok_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def placements(result: dict[str, Any]) -> dict[str, str | None]:
    return {row["pod"]: row["node"] for row in result["pods"]}


def node(name: str, cpu: str = "4", unschedulable: bool = False) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(name: str, cpu: str = "100m", node_name: str = "", namespace: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def as_list(items: list[dict[str, Any]]) -> str:
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items})


# --- 1. standard input ------------------------------------------------------------------------------


def test_stdin_yaml_gives_what_the_file_gives() -> None:
    from_file = ok_json(rulesched("simulate", CLUSTER, "--output", "json"))
    from_stdin = ok_json(rulesched("simulate", "-", "--output", "json", stdin=CLUSTER.read_text()))
    assert placements(from_stdin) == placements(from_file)
    assert len(from_stdin["pods"]) == 5


def test_stdin_json_as_kubectl_prints_it() -> None:
    text = json.dumps(yaml.safe_load(CLUSTER.read_text()), indent=4)
    done = rulesched("simulate", "-", "--output", "summary", stdin=text)
    assert done.returncode == 0, done.stderr
    assert SUMMARY.fullmatch(done.stdout.strip()), done.stdout


def test_stdin_among_files(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(as_list([node("n1", cpu="1"), node("n2", cpu="8")]))
    result = ok_json(
        rulesched("simulate", nodes, "-", "--output", "json", stdin=as_list([pod("big", cpu="2"), pod("small")]))
    )
    assert placements(result)["default/big"] == "n2"
    assert set(placements(result)) == {"default/big", "default/small"}


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def test_stdin_errors_name_it_stdin() -> None:
    broken = "kind: List\nitems:\n- {kind: Node, metadata: {name: a}\n"
    assert one_line_error(rulesched("simulate", "-", stdin=broken)) == (
        "rulesched: <stdin>:4:1: invalid YAML: did not find expected ',' or '}' (while parsing a flow mapping)"
    )
    assert one_line_error(rulesched("simulate", "-", stdin="")) == (
        "rulesched: <stdin>: empty input; expected Kubernetes objects"
    )


def test_stdin_may_be_given_once() -> None:
    assert one_line_error(rulesched("simulate", "-", "-", stdin=CLUSTER.read_text())) == (
        "rulesched: <stdin>: '-' given more than once; standard input can be read only once"
    )


# --- 2. pods bound to nodes missing from the dump ---------------------------------------------------

ORPHANS = [
    node("n1"),
    pod("p1", node_name="ghost"),
    pod("p2", node_name="ghost"),
    pod("p3", node_name="gone"),
    pod("p4", node_name="gone", namespace="kube-system"),
    pod("running", node_name="n1"),
    pod("new"),
]
SKIPPED_WARNING = (
    "WARNING rulesched.simulate.run: skipped 4 pods bound to nodes missing from the cluster files "
    "(default/p1 on ghost, default/p2 on ghost, default/p3 on gone, +1 more); --strict makes this an error"
)


def test_pods_on_missing_nodes_are_skipped_with_one_warning(tmp_path: Path) -> None:
    cluster = tmp_path / "dump.yaml"
    cluster.write_text(as_list(ORPHANS))
    done = rulesched("simulate", cluster, "--output", "json")
    assert done.stderr.splitlines() == [SKIPPED_WARNING]
    result = ok_json(done)
    assert placements(result) == {"default/new": "n1"}
    assert result["summary"]["skipped"] == 4
    table = rulesched("simulate", cluster)
    assert table.returncode == 0 and table.stderr.splitlines() == [SKIPPED_WARNING]
    assert re.fullmatch(
        r"1 scheduled, 0 unschedulable, 0 preempted, 4 skipped \(bound to missing nodes\) in \d+\.\d{3}s",
        table.stdout.splitlines()[-1],
    )
    # the node's use counts the running pod, not the skipped ones
    assert re.fullmatch(r"n1\s+\S+\s+\S+\s+2/110", table.stdout.splitlines()[-3])


def test_one_pod_on_a_missing_node_reads_in_the_singular() -> None:
    done = rulesched("simulate", "-", "--output", "summary", stdin=as_list([node("n1"), pod("p", node_name="n9")]))
    assert done.returncode == 0
    assert done.stderr.splitlines() == [
        "WARNING rulesched.simulate.run: skipped 1 pod bound to a node missing from the cluster files "
        "(default/p on n9); --strict makes this an error"
    ]
    assert re.fullmatch(
        r"0 scheduled, 0 unschedulable, 0 preempted, 1 skipped \(bound to missing nodes\) in \d+\.\d{3}s\n",
        done.stdout,
    )


def test_strict_makes_a_pod_on_a_missing_node_the_error_it_was(tmp_path: Path) -> None:
    cluster = tmp_path / "dump.yaml"
    cluster.write_text(as_list(ORPHANS))
    assert one_line_error(rulesched("simulate", cluster, "--strict")) == (
        f"rulesched: {cluster}: Pod default/p1: spec.nodeName: node 'ghost' does not exist in the files loaded"
    )
    assert one_line_error(rulesched("simulate", "-", "--strict", stdin=as_list(ORPHANS))) == (
        "rulesched: <stdin>: Pod default/p1: spec.nodeName: node 'ghost' does not exist in the files loaded"
    )


def test_nothing_skipped_is_zero_in_json_and_absent_from_the_table() -> None:
    result = ok_json(rulesched("simulate", CLUSTER, "--output", "json"))
    assert result["summary"]["skipped"] == 0
    done = rulesched("simulate", CLUSTER)
    assert done.stderr == ""
    assert SUMMARY.fullmatch(done.stdout.splitlines()[-1])


# --- 3. --output summary and the progress bar -------------------------------------------------------


def test_an_unknown_flag_shows_the_subcommands_usage() -> None:
    """``simulate --bogus x.yaml`` printed the list of commands (issue 34, item 13)."""
    done = rulesched("simulate", "--bogus", CLUSTER)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("usage: rulesched simulate "), done.stderr
    assert done.stderr.splitlines()[-1] == "rulesched simulate: error: unrecognized arguments: --bogus"


def test_output_summary_prints_only_the_summary() -> None:
    done = rulesched("simulate", CLUSTER, "--output", "summary")
    assert done.returncode == 0 and done.stderr == ""
    assert SUMMARY.fullmatch(done.stdout.removesuffix("\n")), done.stdout
    assert "\n" not in done.stdout.removesuffix("\n")
    # --explain changes nothing there
    assert SUMMARY.fullmatch(rulesched("simulate", CLUSTER, "--output", "summary", "--explain").stdout.strip())


def test_progress_is_wanted_only_on_a_terminal_and_for_long_runs() -> None:
    assert PROGRESS_MIN_PODS == 500
    assert wants_progress(501, stderr_is_tty=True)
    assert not wants_progress(500, stderr_is_tty=True)
    assert not wants_progress(10_000, stderr_is_tty=False)
    assert not wants_progress(0, stderr_is_tty=False)


def test_the_progress_bar_draws_with_the_rich_installed(capsys: pytest.CaptureFixture[str]) -> None:
    """The bar's columns exist in the rich release installed (the lower bound too: .ci/lower-bounds)."""
    with _progress_bar(10) as advance:
        for done in range(1, 11):
            advance(done)
    assert "Traceback" not in capsys.readouterr().err


def many_pods(tmp_path: Path, pods: int) -> Path:
    cluster = tmp_path / f"many-{pods}.yaml"
    cluster.write_text(
        as_list([node(f"n{i}", cpu="64") for i in range(4)] + [pod(f"p{i}", cpu="10m") for i in range(pods)])
    )
    return cluster


def test_no_progress_bar_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    done = rulesched("simulate", many_pods(tmp_path, 600), "--output", "summary")
    assert done.returncode == 0
    assert done.stderr == ""
    assert re.fullmatch(r"440 scheduled, 160 unschedulable, 0 preempted in \d+\.\d{3}s\n", done.stdout)


def run_on_a_terminal(*args: str | Path) -> tuple[str, str]:
    """Runs the command with stderr on a pseudo-terminal (stdout a pipe): (stdout, what the
    terminal received)."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    received: list[bytes] = []

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the last writer closed the terminal
                return
            if not data:
                return
            received.append(data)

    with subprocess.Popen(
        [sys.executable, "-m", "rulesched", *map(str, args)],
        cwd=ROOT,
        env={**_env(), "TERM": "xterm", "COLUMNS": "100"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=slave,
    ) as proc:
        os.close(slave)
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert proc.stdout is not None
        stdout = proc.stdout.read().decode()
        assert proc.wait(timeout=120) == 0
        reader.join(timeout=10)
    os.close(master)
    return stdout, b"".join(received).decode(errors="replace")


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_progress_bar_on_a_terminal_for_a_long_run_only(tmp_path: Path) -> None:
    stdout, terminal = run_on_a_terminal("simulate", many_pods(tmp_path, 600), "--output", "summary")
    assert re.fullmatch(r"440 scheduled, 160 unschedulable, 0 preempted in \d+\.\d{3}s\n", stdout)
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal)
    assert "scheduling" in plain and "600/600 pods" in plain, plain
    stdout, terminal = run_on_a_terminal("simulate", many_pods(tmp_path, 500), "--output", "summary")
    assert stdout.startswith("440 scheduled, 60 unschedulable")
    assert terminal == ""


# --- 4. table --explain -----------------------------------------------------------------------------


def pod_blocks(table: str) -> dict[str, list[str]]:
    """Each pod's explain lines (the indented ones under its row) in the pods table."""
    blocks: dict[str, list[str]] = {}
    current = ""
    for line in table.split("\n\n")[0].splitlines()[1:]:
        if line.startswith(" "):
            blocks[current].append(line)
        else:
            current = line.split()[0]
            blocks[current] = []
    return blocks


def test_table_explain_on_the_example() -> None:
    done = rulesched("simulate", CLUSTER, "--explain")
    assert done.returncode == 0, done.stderr
    blocks = pod_blocks(done.stdout)
    assert blocks["shop/web-1"] == [
        "    scores (1 node scored)             large-b",
        "      TaintToleration                      100",
        "      NodeAffinity                           0",
        "      InterPodAffinity                       0",
        "      NodeResourcesFit                      27",
        "      NodeResourcesBalancedAllocation       73",
        "      ImageLocality                          0",
        "      total                                400",
        "    filtered out (3 of 4 nodes)",
        "      node(s) didn't match pod anti-affinity rules: small-a",
        "      node(s) had untolerated taint {nvidia.com/gpu: present}: gpu-c",
        "      node(s) were unschedulable: cordoned-d",
        "      (unresolvable: preemption cannot help on gpu-c, cordoned-d)",
    ]
    assert blocks["shop/api"] == ["    its last cycle evaluated only its nominated node large-b, which fit"]
    assert blocks["shop/giant"] == [
        "    scores: no node passed the filters",
        "    filtered out (4 of 4 nodes)",
        "      Insufficient cpu: small-a, large-b",
        "      Insufficient memory: small-a, large-b",
        "      node(s) had untolerated taint {nvidia.com/gpu: present}: gpu-c",  # TaintToleration first
        "      node(s) were unschedulable: cordoned-d",
        "      (unresolvable: preemption cannot help on small-a, large-b, gpu-c (+1 more))",
    ]
    # the rest of the output is what it is without --explain
    plain = rulesched("simulate", CLUSTER).stdout
    kept = [line for line in done.stdout.splitlines() if not line.startswith(" ")]
    assert kept[:-1] == plain.splitlines()[:-1]


def test_table_explain_shows_the_top_three_nodes_and_groups_reasons(tmp_path: Path) -> None:
    nodes = [node(f"big-{cpu}", cpu=str(cpu)) for cpu in (4, 6, 8, 10, 12)]
    nodes += [node(f"small-{i}", cpu="1") for i in range(1, 6)] + [node("cordoned", cpu="16", unschedulable=True)]
    cluster = tmp_path / "c.yaml"
    cluster.write_text(as_list([*nodes, pod("web", cpu="2")]))
    explained = ok_json(
        rulesched("simulate", cluster, "--explain", "--percentage-of-nodes-to-score", "100", "--output", "json")
    )
    (row,) = explained["pods"]
    scores = row["explanation"]["scores"]
    top = sorted(scores, key=lambda n: -scores[n]["total"])[:3]
    assert top == ["big-12", "big-10", "big-8"] and row["node"] == "big-12"

    done = rulesched("simulate", cluster, "--explain", "--percentage-of-nodes-to-score", "100")
    assert done.returncode == 0, done.stderr
    block = pod_blocks(done.stdout)["default/web"]
    assert block[0].split() == ["scores", "(top", "3", "of", "5", "nodes", "scored)", "big-12", "big-10", "big-8"]
    rules = [r for r in scores["big-12"] if r != "total"]
    assert [line.split() for line in block[1 : 2 + len(rules)]] == [
        [rule, *(str(scores[n][rule]) for n in top)] for rule in [*rules, "total"]
    ]
    assert block[2 + len(rules) :] == [
        "    filtered out (6 of 11 nodes)",
        "      Insufficient cpu: small-1, small-2, small-3 (+2 more)",
        "      node(s) were unschedulable: cordoned",
        "      (unresolvable: preemption cannot help on small-1, small-2, small-3 (+3 more))",
    ]
