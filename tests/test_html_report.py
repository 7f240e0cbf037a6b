"""``rulesched simulate --output html`` and ``rulesched diff --output html``: one self-contained,
well-formed page holding every pending pod and node (or every changed pod), with every string
escaped and nothing fetched from elsewhere; drawn by a real headless browser where one is installed."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
import yaml

from rulesched.cli import main

ROOT = Path(__file__).resolve().parent.parent
CLUSTER = ROOT / "examples" / "cluster.yaml"
PENDING = ["shop/web-1", "ml/trainer", "shop/api", "shop/payments", "shop/giant"]
NODES = ["small-a", "large-b", "gpu-c", "cordoned-d"]
EVIL = "<script>alert(1)</script>"

# Elements without an end tag; every other element the pages open must be closed, in order.
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# Elements that separate words in the page's text (inline ones such as <code> or <b> do not).
BLOCKS = {
    "br",
    "details",
    "div",
    "h1",
    "h2",
    "h3",
    "header",
    "footer",
    "li",
    "p",
    "summary",
    "table",
    "td",
    "th",
    "tr",
    "ul",
}


class Page(HTMLParser):
    """Parses a page, checking that every non-void element is closed in nesting order, and keeps
    its start tags (with attributes), its text and its style sheets."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[tuple[str, tuple[int, int]]] = []
        self.problems: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.styles: list[str] = []
        self.doctype = False

    def handle_decl(self, decl: str) -> None:
        self.doctype = self.doctype or decl.lower() == "doctype html"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in BLOCKS:
            self.text.append(" ")
        if tag not in VOID:
            self.open.append((tag, self.getpos()))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.problems.append(f"<{tag}/> at {self.getpos()}: not a void element")

    def handle_endtag(self, tag: str) -> None:
        if tag in BLOCKS:
            self.text.append(" ")
        if tag in VOID:
            self.problems.append(f"</{tag}> at {self.getpos()}: end tag of a void element")
        elif not self.open or self.open[-1][0] != tag:
            expected = self.open[-1] if self.open else None
            self.problems.append(f"</{tag}> at {self.getpos()} closes {expected}")
        else:
            self.open.pop()

    def handle_data(self, data: str) -> None:
        if self.open and self.open[-1][0] == "style":
            self.styles.append(data)
        else:
            self.text.append(data)

    def attribute_values(self) -> list[str]:
        return [value for _, attrs in self.tags for value in attrs.values() if value is not None]

    def has_tag(self, name: str) -> bool:
        return any(tag == name for tag, _ in self.tags)


def parse(document: str) -> Page:
    """The parsed page, asserting that it is well formed and self-contained."""
    page = Page()
    page.feed(document)
    page.close()
    assert page.doctype, "no <!DOCTYPE html>"
    assert page.problems == []
    assert page.open == [], f"never closed: {page.open}"
    assert [tag for tag, _ in page.tags[:1]] == ["html"]
    assert_self_contained(page)
    return page


def assert_self_contained(page: Page) -> None:
    """Nothing fetched from elsewhere: no script, no style sheet link, no src at all, links to
    anchors of the page only, no url() or @import in the styles."""
    assert not page.has_tag("script")
    assert not page.has_tag("link")
    assert not page.has_tag("iframe")
    for tag, attrs in page.tags:
        assert "src" not in attrs, (tag, attrs)
        href = attrs.get("href")
        assert href is None or href.startswith("#"), (tag, attrs)
    css = "\n".join(page.styles)
    assert "url(" not in css and "@import" not in css


def visible(page: Page) -> str:
    """The page's text as a reader sees it, runs of white space as one space."""
    return " ".join("".join(page.text).split())


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def write_cluster(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


def node(name: str, cpu: str = "4", **labels: str) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": "8Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": alloc, "capacity": alloc},
    }


def pod(name: str, cpu: str = "100m", node_name: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


# --- simulate --------------------------------------------------------------------------------------


def test_simulate_html_holds_the_summary_every_node_and_pending_pod_and_explanations(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run(capsys, "simulate", CLUSTER, "--explain", "--output", "html")
    assert (code, err) == (0, "")
    page = parse(out)
    text = visible(page)
    assert re.search(r"4 scheduled, 1 unschedulable, 2 preempted in \d+\.\d{3}s", text)
    for key in PENDING:
        assert key in text
    for name in NODES:
        assert name in text
    # one row per node, as bars: the cpu bar of large-b (5.5 of 8 cores) is 68.8% wide
    assert '<span style="width:68.8%"></span>' in out
    assert "5.5 / 8 cores" in text
    # placements: shop/api preempted jobs/batch-1 on large-b; shop/giant fits nowhere
    assert "jobs/batch-1" in text and "jobs/batch-2" in text
    assert "0/4 nodes are available: 1 node(s) had untolerated taint {nvidia.com/gpu: present}, " in text
    # --explain: per-rule scores and totals of the best nodes, filtered nodes grouped by reason
    assert "NodeResourcesBalancedAllocation" in text and "total (weighted)" in text
    assert "Filtered out (3 of 4 nodes)" in text
    assert "Insufficient cpu (2 nodes): small-a, large-b" in text
    assert "its last cycle evaluated only its nominated node large-b" in text.lower()


def test_simulate_html_without_explain_has_no_explanations(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "simulate", CLUSTER, "--output", "html")
    assert code == 0
    page = parse(out)
    assert not page.has_tag("details")
    assert all(key in visible(page) for key in PENDING)


def test_simulate_html_escapes_rule_messages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (names cannot carry markup: the loader refuses what the API server would, see below)
    path = write_cluster(tmp_path / "cluster.yaml", [node("n1"), pod("evil"), pod("big", cpu="3")])
    rules = tmp_path / "evil.rules"
    rules.write_text('filter evil: pod.requests.cpu < 2 else "no <img src=http://example.com/x.png> & more"\n')
    code, out, _ = run(
        capsys, "simulate", path, "--rules", "default", "--rules", rules, "--explain", "--output", "html"
    )
    assert code == 0
    page = parse(out)  # no src: the message stayed text
    assert not page.has_tag("img")
    assert "<img" not in out
    text = visible(page)
    assert "default/evil" in text
    assert "no <img src=http://example.com/x.png> & more" in text


def test_names_with_markup_never_reach_a_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_cluster(tmp_path / "cluster.yaml", [node("n1"), pod(EVIL)])
    code, out, err = run(capsys, "simulate", path, "--output", "html")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "metadata.name: '<script>alert(1)</script>' is not a lower-case RFC 1123" in err


def test_large_clusters_get_a_heatmap_grid_naming_every_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rulesched.simulate.html import BUSIEST_NODES, HEATMAP_MIN_NODES

    names = [f"n{i:03}" for i in range(HEATMAP_MIN_NODES + 1)]
    items = [node(name) for name in names]
    items += [pod(f"run-{i}", cpu="3", node_name=names[i]) for i in range(5)]
    items += [pod("pending-0"), pod("pending-1")]
    code, out, _ = run(capsys, "simulate", write_cluster(tmp_path / "big.yaml", items), "--output", "html")
    assert code == 0
    page = parse(out)
    cells = [attrs for tag, attrs in page.tags if tag == "i" and (attrs.get("title") or "").startswith("n")]
    assert len(cells) == 3 * len(names)  # a grid each for cpu, memory and pods
    titles = {str(attrs["title"]).split(":")[0] for attrs in cells}
    assert titles == set(names)
    assert 'title="n000: 75% (3 / 4 cores)"' in out  # a busy node's cell and its figures
    bars = [attrs for tag, attrs in page.tags if tag == "span" and (attrs.get("class") or "").startswith("bar")]
    assert len(bars) == 3 * BUSIEST_NODES  # the busiest nodes as bars, not a row per node
    assert f"{len(names) - BUSIEST_NODES} of {len(names)} nodes left out of the bars" in visible(page)
    assert "pending-0" in visible(page) and "pending-1" in visible(page)


# --- diff ------------------------------------------------------------------------------------------

# Two score rules pulling towards different nodes (gold wins); the new set raises silver's weight
# and adds a filter that a 3-cpu pod fails.
OLD = """filter fits: node.free.cpu >= pod.requests.cpu else "Insufficient cpu"
score gold weight 2: if node.labels["tier"] == "gold" then 50 else 0
score silver weight 1: if node.labels["tier"] == "silver" then 60 else 0
"""
NEW = OLD.replace("score silver weight 1", "score silver weight 5") + (
    'filter small_only: pod.requests.cpu < 2 else "node(s) take only <small> pods"\n'
)


def test_diff_html_lists_changed_pods_with_old_and_new_nodes_and_the_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_cluster(
        tmp_path / "cluster.yaml",
        [node("a", tier="gold"), node("b", tier="silver"), pod("p1"), pod("evil", cpu="3")],
    )
    (tmp_path / "old.rules").write_text(OLD)
    (tmp_path / "new.rules").write_text(NEW)
    args = ("diff", "--old", tmp_path / "old.rules", "--new", tmp_path / "new.rules", path)
    code, out, err = run(capsys, *args, "--output", "html")
    assert (code, err) == (1, "")  # the exit status of the text output: something changed
    page = parse(out)
    text = visible(page)
    assert "1 pod moved, 1 newly unschedulable, 0 newly scheduled (of 2 pending)" in text
    assert "default/p1 moved a → b" in text
    assert "default/evil newly unschedulable a → none" in text
    assert "<small>" not in out and "&lt;small&gt;" in out
    # the rules that made the difference, as explain.py finds them
    assert "silver 1 → 5 0 / 60 0 / 60 +60 +300 +240" in text
    assert "total (normalised over these two nodes) -40 +200 +240" in text
    assert "small_only a absent fail (node(s) take only <small> pods)" in text
    assert "0/2 nodes are available: 2 node(s) take only <small> pods." in text
    # both sets' files side by side
    assert str(tmp_path / "old.rules") in text and str(tmp_path / "new.rules") in text


def test_diff_html_without_changes_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_cluster(tmp_path / "cluster.yaml", [node("a", tier="gold"), pod("p1")])
    (tmp_path / "old.rules").write_text(OLD)
    code, out, _ = run(
        capsys, "diff", "--old", tmp_path / "old.rules", "--new", tmp_path / "old.rules", path, "--output", "html"
    )
    assert code == 0
    text = visible(parse(out))
    assert "no change" in text and "No pending pod changes placement." in text


def test_diff_html_past_the_explain_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_cluster(
        tmp_path / "cluster.yaml", [node("a", tier="gold"), node("b", tier="silver"), pod("p1"), pod("p2")]
    )
    (tmp_path / "old.rules").write_text(OLD)
    (tmp_path / "new.rules").write_text(NEW)
    args = ("diff", "--old", tmp_path / "old.rules", "--new", tmp_path / "new.rules", path, "--explain-limit", "1")
    code, out, _ = run(capsys, *args, "--output", "html")
    assert code == 1
    text = visible(parse(out))
    assert "Not explained (beyond --explain-limit)." in text
    assert "Rules named for the first 1 changed pods only; 1 left out (--explain-limit)." in text


# --- in a real browser -----------------------------------------------------------------------------


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_headless_chromium_draws_the_example_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # CI installs Debian's chromium and sets RULESCHED_REQUIRE_CHROMIUM: there a missing browser
    # is a failure, elsewhere a skip.
    if shutil.which("chromium") is None:
        if os.environ.get("RULESCHED_REQUIRE_CHROMIUM"):
            pytest.fail("RULESCHED_REQUIRE_CHROMIUM is set but chromium is not installed")
        pytest.skip("chromium is not installed")
    code, out, _ = run(capsys, "simulate", CLUSTER, "--explain", "--output", "html")
    assert code == 0
    report, shot = tmp_path / "report.html", tmp_path / "report.png"
    report.write_text(out, encoding="utf-8")
    chromium = shutil.which("chromium")
    assert chromium is not None
    done = subprocess.run(
        [
            chromium,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1280,2000",
            report.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert shot.exists()
    assert png_size(shot) == (1280, 2000)
    assert shot.stat().st_size > 50_000  # bars, badges and tables: far from a blank page (~10 KB)
