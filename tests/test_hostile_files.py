"""Cluster files that cannot hurt ``rulesched simulate``: whatever the bytes, the load ends with
the cluster or with one line naming the file (and the object and field, or line and column), in
bounded time and memory. Regression cases first (each once a traceback, a hang or gigabytes),
then hypothesis building hostile files from a valid node and pod: values replaced at random paths
by nulls, wrong types, NaN, infinities, huge numbers, bad names; alias bombs; deep nesting;
invalid UTF-8; truncation."""

from __future__ import annotations

import contextlib
import io
import json
import random
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rulesched.cli import main
from rulesched.errors import InputError
from rulesched.model import utf8
from rulesched.simulate.load import load_cluster
from tests.helpers.profiles import examples

MEMORY_BOUND = 64 * 2**20  # bytes Python may allocate at once for one small hostile file

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1", "zone": "a"}},
    "spec": {"taints": [{"key": "team", "value": "x", "effect": "NoSchedule"}]},
    "status": {
        "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
        "images": [{"names": ["nginx:1"], "sizeBytes": 1000}],
    },
}
POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "web-1", "namespace": "shop", "labels": {"app": "web"}, "annotations": {"a": "b"}},
    "spec": {
        "priority": 10,
        "containers": [{"name": "c", "image": "nginx:1", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
        "tolerations": [{"key": "team", "operator": "Equal", "value": "x", "effect": "NoSchedule"}],
        "nodeSelector": {"zone": "a"},
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}
                ]
            }
        },
    },
}
RUNNING: dict[str, Any] = {
    **POD,
    "metadata": {"name": "db-0", "namespace": "shop"},
    "spec": {"nodeName": "node-1", "containers": [{"name": "db"}]},
}


def bomb(levels: int = 9) -> str:
    """A billion-laughs YAML mapping: 9**levels strings from a few hundred bytes."""
    lines = ['{"b0": &b0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f', "b{i}": &b{i} [' + ",".join([f"*b{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + "}"


def load_outcome(path: Path) -> str:
    """'ok', or the one-line error: anything else (another exception) fails the test."""
    try:
        load_cluster([path])
    except InputError as err:
        message = str(err)
        assert "\n" not in message and message.isprintable(), message
        assert message.startswith(str(path)), message
        return message
    return "ok"


def bounded(run: Callable[[], str], seconds: float = 5.0) -> str:
    """``run()``'s outcome, once it has used less than ``seconds`` of CPU time (on this thread,
    where the load runs: a machine busy with other work does not inflate it) and
    ``MEMORY_BOUND`` of memory."""
    tracemalloc.start()
    started = time.thread_time()
    try:
        outcome = run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert time.thread_time() - started < seconds, outcome
    assert peak < MEMORY_BOUND, (peak, outcome)
    return outcome


# --- the cases of the issue ------------------------------------------------------------------------

POD_YAML = """kind: Pod
metadata: {{name: p}}
spec:
  containers:
  - name: c
    resources: {{requests: {{cpu: {cpu}}}}}
"""
NODE_YAML = "kind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4', pods: '110'}}\n---\n"


@pytest.mark.parametrize(
    ("name", "text", "words"),
    [
        (
            "bomb.yaml",
            NODE_YAML
            + "kind: Pod\nmetadata: {name: p}\nx: "
            + bomb()
            + "\nspec: {containers: [{name: c}], affinity: *b8}",
            ":10:14: invalid YAML: excessive aliasing: aliases expand to 1729 nodes, 15 written",
        ),
        ("nan.yaml", NODE_YAML + POD_YAML.format(cpu=".nan"), "spec.containers[0].resources.requests.cpu: nan is not"),
        ("inf.yaml", NODE_YAML + POD_YAML.format(cpu="1.0e+400"), "requests.cpu: inf is not a quantity"),
        ("e400.yaml", NODE_YAML + POD_YAML.format(cpu="1e400"), "requests.cpu: '1e400' is too large (at most 2^63-1)"),
        ("digits.yaml", NODE_YAML + POD_YAML.format(cpu="1" * 5000), ":10:33: invalid YAML: an integer of 5000"),
        ("quoted.yaml", NODE_YAML + POD_YAML.format(cpu=repr("1" * 5000)), "requests.cpu: '1111"),
        ("nul.yaml", 'kind: Node\nmetadata: {name: "n\\0x"}\n', "Node: metadata.name: 'n\\x00x' is not a lower-case"),
        ("newline.yaml", 'kind: Node\nmetadata: {name: "web\\n"}\n', "metadata.name: 'web\\n' is not"),
        ("upper.yaml", "kind: Node\nmetadata: {name: Node-1}\n", "metadata.name: 'Node-1' is not a lower-case"),
        ("long.yaml", f"kind: Node\nmetadata: {{name: {'a' * 254}}}\n", "is longer than 253 characters"),
        (
            "label.yaml",
            'kind: Node\nmetadata: {name: n, labels: {"a\\tb": x}}\n',
            "Node n: metadata.labels['a\\tb']: 'a\\tb' is not a qualified name",
        ),
        (
            "null.yaml",
            NODE_YAML + "kind: Pod\nmetadata: {name: p}\nspec: {containers: null}\n",
            "Pod default/p: spec.containers: at least one container is required",
        ),
        ("deep.json", "[" * 10_000 + "]" * 10_000, "deep.json:1:500: invalid JSON: nested too deeply"),
        (
            "deep-item.json",
            '{"kind": "List", "items": [{"kind": "Pod", "x": ' + "[" * 10_000 + "]" * 10_000 + "}]}",
            "invalid JSON: nested too deeply",
        ),
        (
            "deep.yaml",
            "kind: Pod\nspec: " + "[" * 10_000 + "]" * 10_000,
            ":2:1006: invalid YAML: exceeded maximum nesting",
        ),
        (
            "recursive.yaml",
            "kind: Pod\nmetadata: &m {name: p, x: *m}\n",
            ":2:27: invalid YAML: an alias refers to a node that contains it",
        ),
        (
            "big-int.json",
            '{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n"}, "x": ' + "1" * 5000 + "}]}",
            "document 1: items[0]: invalid JSON: Exceeds the limit (4300 digits)",
        ),
        ("binary.yaml", "kind: Node\nmetadata: {name: \xff}\n", "not a text file (no UTF-8 text: byte 28 is invalid)"),
        (  # msgspec 0.23 raises a DecodeError for the item, which once escaped as a traceback
            "binary-item.json",
            '{"kind": "List", "items": [{"kind": "Node", "metadata": {"name": "n\xff"}}]}',
            "not a text file (no UTF-8 text: byte 67 is invalid)",
        ),
        (
            "truncated.json",
            '{"kind": "List", "items": [{"kind": "Node", "metad',
            "truncated.json:1:45: invalid JSON: Unterminated string",
        ),
    ],
    ids=lambda value: value if isinstance(value, str) and value.endswith(("yaml", "json")) else "",
)
def test_the_issues_cases(tmp_path: Path, name: str, text: str, words: str) -> None:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8", "surrogateescape") if "\xff" not in text else text.encode("latin-1"))
    message = bounded(lambda: load_outcome(path))
    assert words in message, message


def test_a_731_byte_bomb_is_refused_at_once(tmp_path: Path) -> None:
    text = bomb() + "\n"
    text = text.replace("{", "{kind: ConfigMap, ", 1)  # a harmless kind: the bomb alone does the harm
    path = tmp_path / "laughs.yaml"
    path.write_text(text + "---\n" + NODE_YAML)
    assert len(path.read_bytes()) < 800
    assert "excessive aliasing" in bounded(lambda: load_outcome(path), seconds=1.0)


def test_aliases_a_hand_written_file_uses_are_fine(tmp_path: Path) -> None:
    """Anchors shared by many objects (go-yaml allows 99% of a small document by alias)."""
    pods = "".join(
        f"- {{kind: Pod, metadata: {{name: p{i}}}, spec: {{containers: *cs, tolerations: *tol}}}}\n" for i in range(300)
    )
    text = (
        "kind: List\nx-shared:\n  cs: &cs [{name: c, resources: {requests: {cpu: 10m, memory: 10Mi}}}]\n"
        "  tol: &tol [{key: a, operator: Exists}, {key: b, operator: Exists}]\nitems:\n"
        "- {kind: Node, metadata: {name: n1}, status: {allocatable: {cpu: '4', pods: '110'}}}\n" + pods
    )
    path = tmp_path / "anchors.yaml"
    path.write_text(text)
    cluster = load_cluster([path])
    assert len(cluster.pods) == 300 and cluster.pods[-1].requests["cpu"] == 10


def test_one_line_errors_reach_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(NODE_YAML + POD_YAML.format(cpu=".nan"))
    assert main(["simulate", str(path), "--output", "summary"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "requests.cpu: nan is not a quantity" in err


# --- hypothesis: hostile files built from a valid one ------------------------------------------------

# Fragments of YAML (flow style, so that JSON text can carry them) put in place of a value.
FRAGMENTS = [
    "null", "[]", "{}", "true", "0", "-1", "3.5", ".nan", ".inf", "-.inf", "1e400", "1.0e+400", "9Ei", '"9Ei"',
    '"12E"', '"1e400"', '"-5"', '"NaN"', '"0x1F"', '"1.5Gi"', '"100m"', '"+1"', '"1."', '"."', "1" * 5000,
    '"' + "9" * 5000 + '"', '"0.' + "0" * 3000 + '1"', "99999999999999999999", '"a\\u0000b"', '"a\\nb"',
    '"UPPER"', '"' + "a" * 300 + '"', '"a b"', '"kubernetes.io/hostname"', '"<script>"', '"\\ud800"',
    "!!binary aGVsbG8=", "2024-05-01", "!!set {a, b}", "!!omap [{a: 1}]", "~", '""', "*b1", "*b5", "*b8", "&x [1]",
]  # fmt: skip
RAW_BYTES = [b"\xff", b"\x00", b"\xc3", b"\xed\xa0\x80", b"\t", b"\r", b"\xef\xbb\xbf", b"{", b"'", b"&", b"*"]


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [at]
    if isinstance(value, dict):
        for key, child in value.items():
            out += _paths(child, (*at, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            out += _paths(child, (*at, i))
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    target = doc
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return doc


@st.composite
def hostile_files(draw: st.DrawFn) -> tuple[str, bytes]:
    objects = json.loads(json.dumps([NODE, POD, RUNNING]))  # fresh copies
    fragments: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        which = draw(st.integers(0, len(objects) - 1))
        path = draw(st.sampled_from(_paths(objects[which])))
        if draw(st.booleans()) and path:  # a new key beside an existing one, or a replaced value
            path = (*path[:-1], draw(st.sampled_from(["name", "cpu", "kind", "items", "x", "\u0000"])))
        fragment = draw(st.sampled_from(FRAGMENTS))
        if draw(st.integers(0, 9)) == 0:
            depth = draw(st.integers(10, 3000))
            fragment = "[" * depth + "]" * depth
        fragments.append(fragment)
        try:
            objects[which] = _set(objects[which], path, f"@@{len(fragments) - 1}@@")
        except (KeyError, IndexError, TypeError):
            pass
    listed = draw(st.booleans())
    dump = json.dumps if draw(st.booleans()) else lambda value: yaml.safe_dump(value, sort_keys=False)
    if listed:
        body = dump({"kind": draw(st.sampled_from(["List", "PodList", "Pod"])), "items": objects})
    else:
        body = "\n---\n".join(dump(o) for o in objects)
    if draw(st.booleans()):  # anchors in the document the aliases among the fragments are in
        laughs = bomb(draw(st.integers(2, 9)))
        body = "{" + f'"x": {laughs}, ' + body[1:] if body.startswith("{") else f"x: {laughs}\n{body}"
    for i, fragment in enumerate(fragments):
        body = body.replace(f'"@@{i}@@"', fragment).replace(f"'@@{i}@@'", fragment)
    data = body.encode("utf-8", "surrogatepass")
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.sampled_from(RAW_BYTES)) + data[at:]
    if draw(st.integers(0, 4)) == 0:
        data = data[: draw(st.integers(0, len(data)))]
    return draw(st.sampled_from(["cluster.yaml", "cluster.json", "cluster"])), data


@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(hostile_files())
def test_hostile_files_end_in_a_located_line_or_a_cluster(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[str, bytes]
) -> None:
    name, data = case
    path = tmp_path_factory.mktemp("hostile") / name
    path.write_bytes(data)
    bounded(lambda: load_outcome(path))


@settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(hostile_files())
def test_hostile_files_through_the_whole_command(case: tuple[str, bytes]) -> None:
    """In-process ``rulesched simulate -`` (standard input): exit status 0 or 2 with one line."""
    _, data = case
    out, err = io.StringIO(), io.StringIO()
    stdin = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="surrogateescape")
    old = sys.stdin
    sys.stdin = stdin
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["simulate", "-", "--output", "summary"])
    finally:
        sys.stdin = old
    assert code in (0, 2), err.getvalue()
    if code == 2:
        assert err.getvalue().count("\n") == 1 and err.getvalue().startswith("rulesched: <stdin>"), err.getvalue()


def test_random_bytes_never_raise_anything_else(tmp_path: Path) -> None:
    rng = random.Random(22)
    valid = (json.dumps(NODE) + "\n---\n" + json.dumps(POD)).encode()
    for i in range(200):
        data = bytearray(valid)
        for _ in range(rng.randrange(1, 6)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        path = tmp_path / f"r{i}{rng.choice(['.yaml', '.json'])}"
        path.write_bytes(bytes(data))
        load_outcome(path)


# --- the fast YAML builder reads what the composer reads ----------------------------------------

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["yes", "No", "on", "~", "0x1F", "0o17", "017", "1_000", "1:30", "2024-05-01", "<<", "=", "1e3"])
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(SCALARS, inner, max_size=4))


@settings(
    max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(VALUES, st.sampled_from([None, True, False]), st.booleans())
def test_the_fast_builder_agrees_with_the_composer(value: Any, flow: bool | None, listed: bool) -> None:
    from rulesched.simulate.documents import _yaml_pass
    from rulesched.yamlreader import Unusual

    doc = {"kind": "List", "items": [{"kind": "ConfigMap", "data": value}]} if listed else {"kind": "X", "v": value}
    data = yaml.safe_dump(doc, default_flow_style=flow, allow_unicode=True).encode()
    expected = list(_yaml_pass(data, "f", fast=False))
    assert [obj for _, _, obj in expected] == (yaml.safe_load(data)["items"] if listed else [yaml.safe_load(data)])
    try:
        fast = list(_yaml_pass(data, "f", fast=True))
    except Unusual:  # a timestamp, "<<", a complex key: read the composing way
        return
    assert fast == expected


def test_large_yaml_files_are_read_from_the_disk_with_the_same_bounds(tmp_path: Path) -> None:
    """Past 64 KiB a YAML file is parsed as it is read; late problems are still located, and an
    alias late in the file sends the reading back to the start, the composing way."""
    from rulesched.simulate.documents import read_file, read_objects

    nodes = "".join(
        f"kind: Node\nmetadata: {{name: n{i}}}\nstatus: {{allocatable: {{cpu: '4', pods: '110'}}}}\n---\n"
        for i in range(1500)
    )
    cases = {
        "bad.yaml": (nodes.encode() + b"kind: Node\nmetadata: {name: \xff}\n", "not a text file (no UTF-8 text"),
        "bomb.yaml": ((nodes + "kind: X\nx: " + bomb(6) + "\n").encode(), ":6005:14: invalid YAML: excessive aliasing"),
        "alias.yaml": ((nodes + "kind: Node\nmetadata: &m {name: last}\nx: *m\n").encode(), "ok"),
    }
    for name, (data, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert len(data) > 1 << 16
        assert words in bounded(lambda: load_outcome(path)), name  # noqa: B023 - called at once
    path = tmp_path / "alias.yaml"
    assert list(read_file(path, "f")) == list(read_objects(path.read_bytes(), "f", False))
    assert len(load_cluster([path]).nodes) == 1501


def test_merge_keys_at_the_top_level_as_yaml_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "merge.yaml"
    path.write_text(
        "x: &d {kind: Node, metadata: {name: from-merge}, status: {allocatable: {cpu: '2'}}}\n"
        "<<: *d\nmetadata: {name: n1}\n---\n"
        "kind: List\nx: &p {kind: Pod, spec: {containers: [{name: c}]}}\n"
        "items:\n- {<<: *p, metadata: {name: p1}}\n"
    )
    cluster = load_cluster([path])
    assert [n.name for n in cluster.nodes] == ["n1"] and cluster.nodes[0].allocatable["cpu"] == 2000
    assert [p.name for p in cluster.pods] == ["p1"]


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=40), st.integers(1, 8))
def test_the_first_invalid_utf8_byte_is_the_decoders_even_across_slices(data: bytes, step: int) -> None:
    """first_invalid_utf8 reads in slices (1 MiB, here 1 to 8 bytes so that characters are cut
    at their ends) and names the byte bytes.decode names; None for UTF-8."""
    text = data + "é€😀".encode() + data[::-1]
    try:
        text.decode("utf-8")
        expected = None
    except UnicodeDecodeError as err:
        expected = err.start
    with mock.patch.object(utf8, "_STEP", step):
        assert utf8.first_invalid_utf8(text) == expected
    assert utf8.first_invalid_utf8(text) == expected
